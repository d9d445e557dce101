// The gatherer: caches of Nodes (trimmed), kubelet client CSRs, FlavoredTokens and
// FlavorClasses, plus the indexes the reconcilers need to stay O(1) per key at thousands of
// nodes (token ID → token, token ID → CSRs, node name → tokens that bound it).
import { tokenProofs } from '../flavor/attestation-proofs.ts';
import { ATTESTATION_SEAL_ANNOTATION, sealedFactsOf } from '../flavor/attestation-seal.ts';
import { carriedFlavor } from '../flavor/class-status.ts';
import { parseKubeletCsr } from '../flavor/csr.ts';
import type { NodeNameClaim, TokenAttestation, TokenBinding } from '../flavor/resources.ts';
import { recordExpiresAt, TOKEN_ID_LABEL } from '../flavor/resources.ts';
import type { BoundToken, CsrFacts, Failure, NodeFacts, TokenFacts } from '../flavor/verdict.ts';
import type { WatchEventType } from '../kube/listwatch.ts';
import type { TrimmedNode } from '../kube/node-writes.ts';
import type { CsrObject, StoredToken } from '../kube/token-writes.ts';

/**
 * A many-to-many index: key → member names. Nearly every key has one member (a node bound by one
 * token, a token with one CSR), so one member is kept as the string itself and a Set only for
 * more: at 10,000 nodes a Set per key cost ~1.5 MB.
 */
export class SetIndex {
  private readonly map = new Map<string, string | Set<string>>();
  add(key: string, member: string): void {
    const current = this.map.get(key);
    if (current === undefined) this.map.set(key, member);
    else if (typeof current === 'string') {
      if (current !== member) this.map.set(key, new Set([current, member]));
    } else current.add(member);
  }
  remove(key: string, member: string): void {
    const current = this.map.get(key);
    if (current === undefined) return;
    if (typeof current === 'string') {
      if (current === member) this.map.delete(key);
      return;
    }
    current.delete(member);
    if (current.size === 1) this.map.set(key, current.values().next().value as string);
  }
  get(key: string): string[] {
    const current = this.map.get(key);
    if (current === undefined) return [];
    return typeof current === 'string' ? [current] : [...current];
  }
}

/**
 * Which flavor each verified Node carries and how many carry each: the FlavorClass status
 * reconciler's count costs nothing per reconcile. Fed by the Node cache on every replica, so a
 * new leader starts with it.
 */
export class NodeFlavors {
  /** Node name → the flavor it carries (only nodes that carry one). */
  private readonly flavorOf = new Map<string, string>();
  private readonly counts = new Map<string, number>();

  /** Verified nodes carrying the flavor, as the Node cache shows them now. */
  count(flavor: string): number {
    return this.counts.get(flavor) ?? 0;
  }

  /** Records a Node event; returns the flavors whose count it changed (the one left, then the one joined). */
  onNode(type: WatchEventType, node: TrimmedNode): string[] {
    const name = node.metadata.name;
    const before = this.flavorOf.get(name);
    const after =
      type === 'DELETED'
        ? undefined
        : carriedFlavor({ annotations: node.metadata.annotations, taints: node.spec.taints });
    if (before === after) return [];
    const changed: string[] = [];
    if (before !== undefined) {
      this.counts.set(before, (this.counts.get(before) ?? 1) - 1);
      if (this.counts.get(before) === 0) this.counts.delete(before);
      changed.push(before);
    }
    if (after === undefined) this.flavorOf.delete(name);
    else {
      this.flavorOf.set(name, after);
      this.counts.set(after, (this.counts.get(after) ?? 0) + 1);
      changed.push(after);
    }
    return changed;
  }
}

export function tokenIdOf(token: StoredToken): string | undefined {
  return token.metadata.labels?.[TOKEN_ID_LABEL] ?? token.status?.tokenID;
}

export function tokenExpiresAt(token: StoredToken): Date {
  return recordExpiresAt(
    { ...token, spec: token.spec as { ttl?: string; expiresAt?: string } },
    new Date(token.metadata.creationTimestamp),
  );
}

export function tokenFacts(token: StoredToken): TokenFacts {
  const spec = token.spec as {
    flavorClassName: string;
    maxUses?: number;
    nodeName?: string;
    nodeNamePattern?: string;
    revoked?: boolean;
    revocationPolicy?: string;
    attestation?: TokenAttestation;
  };
  const annotations = (token.metadata as { annotations?: Record<string, string> }).annotations;
  const sealed = sealedFactsOf({ metadata: token.metadata, spec });
  return {
    name: token.metadata.name,
    tokenId: tokenIdOf(token) ?? '',
    flavorClassName: spec.flavorClassName,
    maxUses: spec.maxUses ?? 1,
    nodeName: spec.nodeName,
    nodeNamePattern: spec.nodeNamePattern,
    expiresAt: tokenExpiresAt(token),
    ...(token.metadata.creationTimestamp ? { issuedAt: new Date(token.metadata.creationTimestamp) } : {}),
    revoked: spec.revoked === true,
    deleting: token.metadata.deletionTimestamp !== undefined,
    stripNodesOnRevoke: spec.revocationPolicy === 'StripNodes',
    bindings: token.status?.bindings ?? [],
    uses: Math.max(token.status?.uses ?? 0, token.status?.bindings?.length ?? 0),
    rejoin: spec.attestation?.allowRejoin === true && spec.nodeName !== undefined,
    attested: spec.attestation !== undefined,
    ...(sealed
      ? {
          attestationSeal: { facts: sealed, seal: annotations?.[ATTESTATION_SEAL_ANNOTATION] },
          proofs: tokenProofs({ metadata: { annotations }, status: token.status }),
        }
      : {}),
  };
}

/** The latest proof of a token bound to a TPM (the issuer's record, ADR 0014), if any. */
export function latestProofOf(token: StoredToken): number | undefined {
  if ((token.spec as { attestation?: unknown }).attestation === undefined) return undefined;
  const annotations = (token.metadata as { annotations?: Record<string, string> }).annotations;
  return tokenProofs({ metadata: { annotations }, status: token.status }).latest?.number;
}

/** A token read from the API server just now, as the claim and approval checks take it. */
export function freshTokenFacts(token: StoredToken): TokenFacts & { uid: string } {
  return { ...tokenFacts(token), uid: token.metadata.uid };
}

export function nodeFacts(node: TrimmedNode): NodeFacts {
  return {
    name: node.metadata.name,
    uid: node.metadata.uid,
    createdAt: new Date(node.metadata.creationTimestamp),
    labels: node.metadata.labels ?? {},
    annotations: node.metadata.annotations ?? {},
    taints: node.spec.taints ?? [],
  };
}

const BOOTSTRAP_USER = /^system:bootstrap:([a-z0-9]{6})$/;

export function csrTokenId(csr: CsrObject): string | undefined {
  return BOOTSTRAP_USER.exec(csr.spec.username ?? '')?.[1];
}

/** The signer issued the CSR's certificate (as read, or as our trimmed copy keeps it). */
export function csrIssued(csr: CsrObject | undefined): boolean {
  return Boolean(csr?.status?.issued || csr?.status?.certificate);
}

/** Keeps what the binding needs of a CSR (the request itself is small: one key and a name). */
export function trimCsr(raw: unknown): CsrObject {
  const csr = raw as CsrObject;
  return {
    metadata: {
      name: csr.metadata.name,
      uid: csr.metadata.uid,
      resourceVersion: csr.metadata.resourceVersion,
      creationTimestamp: csr.metadata.creationTimestamp,
    },
    spec: {
      username: csr.spec?.username,
      signerName: csr.spec?.signerName,
      request: csr.spec?.request,
      groups: csr.spec?.groups,
      usages: csr.spec?.usages,
      expirationSeconds: csr.spec?.expirationSeconds,
    },
    status: {
      ...(csr.status?.conditions ? { conditions: csr.status.conditions } : {}),
      ...(csrIssued(csr) ? { issued: true } : {}),
    },
  };
}

export class Indexes {
  readonly tokenNameById = new Map<string, string>();
  readonly csrsByTokenId = new SetIndex();
  readonly tokensByNodeName = new SetIndex();
  /** Token UID → the node names its claims hold (ADR 0011), for releasing them. */
  readonly claimsByTokenUid = new SetIndex();
  /** Which flavor each verified Node carries (the FlavorClass status counts). */
  readonly nodeFlavors = new NodeFlavors();
  /** Why CSRs naming a node were not bound (in memory; rebuilt as tokens are reconciled). */
  readonly rejections = new Map<string, Map<string, Failure>>();
  /** CSRs whose binding was released (their Node is gone): they never bind again. */
  readonly releasedCsrs = new Set<string>();
  /**
   * Why the node reconciler did not verify a bound Node (by node name, for that Node's UID): the
   * token reconciler records it on the binding. In memory: re-judging rebuilds it after a restart.
   */
  private readonly nodeFailures = new Map<string, { uid: string; failure: Failure }>();
  private readonly subjects = new Map<string, Promise<CsrFacts['subject']>>();

  onToken(token: StoredToken | undefined, previous: StoredToken | undefined): void {
    if (previous) {
      const id = tokenIdOf(previous);
      if (id && this.tokenNameById.get(id) === previous.metadata.name) this.tokenNameById.delete(id);
      for (const binding of previous.status?.bindings ?? [])
        this.tokensByNodeName.remove(binding.nodeName, previous.metadata.name);
    }
    if (token) {
      const id = tokenIdOf(token);
      if (id) this.tokenNameById.set(id, token.metadata.name);
      for (const binding of token.status?.bindings ?? [])
        this.tokensByNodeName.add(binding.nodeName, token.metadata.name);
    }
  }

  onClaim(claim: NodeNameClaim | undefined, previous: NodeNameClaim | undefined): void {
    const holder = previous?.spec.holder;
    if (previous?.metadata.name && holder)
      this.claimsByTokenUid.remove(holder.tokenUID, previous.metadata.name);
    const next = claim?.spec.holder;
    if (claim?.metadata.name && next) this.claimsByTokenUid.add(next.tokenUID, claim.metadata.name);
  }

  onCsr(csr: CsrObject, deleted: boolean): void {
    const id = csrTokenId(csr);
    if (!id) return;
    if (deleted) {
      this.csrsByTokenId.remove(id, csr.metadata.name);
      this.releasedCsrs.delete(csr.metadata.name);
      this.subjects.delete(csr.metadata.uid);
    } else {
      this.csrsByTokenId.add(id, csr.metadata.name);
    }
  }

  /** The CSR's parsed subject, parsed once per CSR UID (CSR specs are immutable). */
  csrFacts(csr: CsrObject): Promise<CsrFacts> {
    let subject = this.subjects.get(csr.metadata.uid);
    if (!subject) {
      subject = parseKubeletCsr(csr.spec.request ?? '');
      this.subjects.set(csr.metadata.uid, subject);
    }
    return subject.then((s) => ({
      name: csr.metadata.name,
      createdAt: new Date(csr.metadata.creationTimestamp),
      signerName: csr.spec.signerName ?? '',
      usages: csr.spec.usages ?? [],
      expirationSeconds: csr.spec.expirationSeconds,
      approved: csr.status?.conditions?.some((c) => c.type === 'Approved') ?? false,
      subject: s,
    }));
  }

  setRejection(nodeName: string, csrName: string, failure: Failure | undefined): void {
    let byCsr = this.rejections.get(nodeName);
    if (!failure) {
      byCsr?.delete(csrName);
      if (byCsr?.size === 0) this.rejections.delete(nodeName);
      return;
    }
    if (!byCsr) {
      byCsr = new Map();
      this.rejections.set(nodeName, byCsr);
    }
    byCsr.set(csrName, failure);
  }

  setNodeFailure(nodeName: string, outcome: { uid: string; failure: Failure } | undefined): void {
    if (outcome) this.nodeFailures.set(nodeName, outcome);
    else this.nodeFailures.delete(nodeName);
  }

  /** Why the Node of this name and UID is not verified, if the node reconciler said so. */
  nodeFailure(nodeName: string, uid: string): Failure | undefined {
    const outcome = this.nodeFailures.get(nodeName);
    return outcome?.uid === uid ? outcome.failure : undefined;
  }

  private readonly lastReported = new Map<string, string>();

  /** True if this reason was already reported for this node UID; records it otherwise. */
  reported(nodeUid: string, reason: string): boolean {
    if (this.lastReported.get(nodeUid) === reason) return true;
    this.lastReported.set(nodeUid, reason);
    return false;
  }

  /** A Node deleted: what was kept per node goes with it (node churn must not grow memory). */
  onNodeDeleted(node: TrimmedNode): void {
    this.lastReported.delete(node.metadata.uid);
    if (this.nodeFailures.get(node.metadata.name)?.uid === node.metadata.uid)
      this.nodeFailures.delete(node.metadata.name);
  }

  rejectionsFor(nodeName: string): Failure[] {
    return [...(this.rejections.get(nodeName)?.values() ?? [])].reverse();
  }
}

export function boundTokensFor(
  nodeName: string,
  indexes: Indexes,
  getToken: (name: string) => StoredToken | undefined,
): BoundToken[] {
  const bound: BoundToken[] = [];
  for (const tokenName of indexes.tokensByNodeName.get(nodeName)) {
    const token = getToken(tokenName);
    const binding = token?.status?.bindings?.find((b: TokenBinding) => b.nodeName === nodeName);
    if (token && binding) bound.push({ token: tokenFacts(token), binding });
  }
  return bound;
}
