// What the reconcilers read of cached objects, as the pure core takes it: a token's facts (with
// the joins its records carry), a Node's, a CSR's. No I/O, no memory of its own.
import { tokenProofs } from '../flavor/attestation-proofs.ts';
import { ATTESTATION_SEAL_ANNOTATION, sealedFactsOf } from '../flavor/attestation-seal.ts';
import type { JoinSecretFacts } from '../flavor/bootstrap-secret.ts';
import { bindingOf } from '../flavor/node-name-claim.ts';
import type { NodeNameClaim, StoredFlavoredToken, TokenBinding } from '../flavor/resources.ts';
import { recordExpiresAt, TOKEN_ID_LABEL } from '../flavor/resources.ts';
import type { NodeFacts, TokenFacts } from '../flavor/verdict.ts';
import type { TrimmedNode } from '../kube/node-writes.ts';
import type { CsrObject } from '../kube/token-writes.ts';

export function tokenIdOf(token: StoredFlavoredToken): string | undefined {
  return token.metadata.labels?.[TOKEN_ID_LABEL] ?? token.status?.tokenID;
}

export function tokenExpiresAt(token: StoredFlavoredToken): Date {
  return recordExpiresAt(
    { ...token, spec: token.spec as { ttl?: string; expiresAt?: string } },
    new Date(token.metadata.creationTimestamp),
  );
}

/** The latest proof of a token bound to a TPM (the issuer's record, ADR 0014), if any. */
export function latestProofOf(token: StoredFlavoredToken): number | undefined {
  if (token.spec.attestation === undefined) return undefined;
  return tokenProofs(token).latest?.number;
}

/** The joins `token` holds: the bindings its records carry (ADR 0016). */
export function joinsOf(token: StoredFlavoredToken, records: Iterable<NodeNameClaim>): TokenBinding[] {
  const joins: TokenBinding[] = [];
  for (const record of records) {
    if (record.spec.holder?.tokenUID !== token.metadata.uid) continue;
    const binding = bindingOf(record);
    if (binding) joins.push(binding);
  }
  return joins;
}

/**
 * The joins that counted the token's uses (its ledger, status.bindings), each with what its record
 * says of it (ADR 0016): the ledger is written with the use, so no join is missed however the
 * record's watch lags; one whose record is not (or no longer) its own shows no registration.
 */
export function ledgerJoins(
  token: StoredFlavoredToken,
  recordOf: (nodeName: string) => NodeNameClaim | undefined,
): (JoinSecretFacts & { nodeName: string; csrName: string })[] {
  return (token.status?.bindings ?? []).map((entry) => {
    const record = recordOf(entry.nodeName);
    const join = record?.spec.holder?.tokenUID === token.metadata.uid ? record.status?.join : undefined;
    const own = join?.csrName === entry.csrName ? join : undefined;
    return {
      nodeName: entry.nodeName,
      csrName: entry.csrName,
      boundAt: entry.boundAt,
      ...(own?.registeredAt ? { registeredAt: own.registeredAt } : {}),
      ...(own?.secretDeleted ? { secretDeleted: true } : {}),
      ...(entry.attestation !== undefined ? { proof: entry.attestation } : {}),
    };
  });
}

/**
 * The token as the decisions take it. `joins`: the joins its records carry (a token's bindings
 * live on its joins' NodeNameClaims; its status keeps the ledger of uses).
 */
export function tokenFacts(
  token: StoredFlavoredToken,
  joins: TokenBinding[] = [],
): TokenFacts & { uid: string } {
  const spec = token.spec;
  const sealed = sealedFactsOf({ metadata: token.metadata, spec });
  return {
    name: token.metadata.name,
    uid: token.metadata.uid,
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
    bindings: joins,
    uses: Math.max(token.status?.uses ?? 0, token.status?.bindings?.length ?? 0),
    rejoin: spec.attestation?.allowRejoin === true && spec.nodeName !== undefined,
    attested: spec.attestation !== undefined,
    ...(sealed
      ? {
          attestationSeal: { facts: sealed, seal: token.metadata.annotations?.[ATTESTATION_SEAL_ANNOTATION] },
          proofs: tokenProofs(token),
        }
      : {}),
  };
}

/**
 * Whether a token still reserves the one node name it was issued for (spec.nodeName): not
 * revoked, being deleted, expired, or out of uses (a rejoin token stays its machine's).
 */
export function reservesName(token: StoredFlavoredToken, now: Date): boolean {
  const facts = tokenFacts(token);
  if (facts.nodeName === undefined || facts.revoked || facts.deleting) return false;
  if (now.getTime() >= facts.expiresAt.getTime()) return false;
  return facts.rejoin === true || facts.maxUses === 0 || facts.uses < facts.maxUses;
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

export function hasCondition(csr: CsrObject, ...types: string[]): boolean {
  return csr.status?.conditions?.some((c) => types.includes(c.type)) ?? false;
}

/** Not approved, denied or failed yet. */
export function csrPending(csr: CsrObject): boolean {
  return !hasCondition(csr, 'Approved', 'Denied', 'Failed');
}

/** Keeps what the joins need of a CSR (the request itself is small: one key and a name). */
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
