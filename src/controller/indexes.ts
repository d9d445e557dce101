// The indexes the reconcilers need to stay O(1) per key at thousands of nodes, each kept from the
// caches' events (wiring.ts INDEXERS) and nothing else: every one can be rebuilt from the objects
// alone, so a new leader (every replica keeps them warm) knows what the old one knew. None holds a
// decision or a reason: those are on the objects (ADR 0016).
import { carriedFlavor } from '../flavor/class-status.ts';
import { parseKubeletCsr } from '../flavor/csr.ts';
import type { NodeNameClaim, StoredFlavoredToken } from '../flavor/resources.ts';
import { SetIndex } from '../flavor/set-index.ts';
import { tokenIdOf } from '../flavor/token-facts.ts';
import type { CsrFacts } from '../flavor/verdict.ts';
import type { CsrObject } from '../kube/csrs.ts';
import type { TrimmedNode } from '../kube/node-writes.ts';
import type { WatchEventType } from '../runtime/listwatch.ts';
import { csrTokenId } from './facts.ts';

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

/** The requests a join record names: its holder's, its join's, and the one its last release names. */
export function requestsOf(record: NodeNameClaim): string[] {
  const names = new Set<string>();
  if (record.spec.holder) names.add(record.spec.holder.csrName);
  if (record.status?.join) names.add(record.status.join.csrName);
  const released = record.status?.history?.findLast((e) => e.event === 'Released');
  if (!record.spec.holder && released?.csrName) names.add(released.csrName);
  return [...names];
}

export class Indexes {
  readonly tokenNameById = new Map<string, string>();
  readonly csrsByTokenId = new SetIndex();
  /** Token UID → the names of the join records it holds (its joins). */
  readonly claimsByTokenUid = new SetIndex();
  /** CSR name → the join record that names it (as its join's request, or a retry's). */
  readonly claimByRequest = new Map<string, string>();
  /** Node name → the kubelet client CSRs that ask for it (every requester's, parsed once). */
  readonly csrsByNodeName = new SetIndex();
  /** Node name → the tokens issued for exactly that name (spec.nodeName). */
  readonly tokensByPinnedName = new SetIndex();
  /** Node name → the tokens whose status records a refused request for it. */
  readonly tokensRefusingName = new SetIndex();
  /** Which flavor each verified Node carries (the FlavorClass status counts). */
  readonly nodeFlavors = new NodeFlavors();
  private readonly subjects = new Map<string, Promise<CsrFacts['subject']>>();
  private readonly nodeNameOfCsr = new Map<string, string>();
  /** Subjects being parsed for csrsByNodeName: a join waits for them (csrsNaming). */
  private readonly parsing = new Set<Promise<unknown>>();

  onToken(token: StoredFlavoredToken | undefined, previous: StoredFlavoredToken | undefined): void {
    if (previous) {
      const name = previous.metadata.name;
      const id = tokenIdOf(previous);
      if (id && this.tokenNameById.get(id) === name) this.tokenNameById.delete(id);
      const pinned = (previous.spec as { nodeName?: string }).nodeName;
      if (pinned) this.tokensByPinnedName.remove(pinned, name);
      for (const r of previous.status?.rejections ?? [])
        if (r.nodeName) this.tokensRefusingName.remove(r.nodeName, name);
    }
    if (token) {
      const name = token.metadata.name;
      const id = tokenIdOf(token);
      if (id) this.tokenNameById.set(id, name);
      const pinned = (token.spec as { nodeName?: string }).nodeName;
      if (pinned) this.tokensByPinnedName.add(pinned, name);
      for (const r of token.status?.rejections ?? [])
        if (r.nodeName) this.tokensRefusingName.add(r.nodeName, name);
    }
  }

  onClaim(claim: NodeNameClaim | undefined, previous: NodeNameClaim | undefined): void {
    const name = previous?.metadata.name;
    if (previous && name) {
      const holder = previous.spec.holder;
      if (holder) this.claimsByTokenUid.remove(holder.tokenUID, name);
      for (const request of requestsOf(previous))
        if (this.claimByRequest.get(request) === name) this.claimByRequest.delete(request);
    }
    const next = claim?.metadata.name;
    if (claim && next) {
      const holder = claim.spec.holder;
      if (holder) this.claimsByTokenUid.add(holder.tokenUID, next);
      for (const request of requestsOf(claim)) this.claimByRequest.set(request, next);
    }
  }

  /** Keeps a CSR's indexes; its subject is parsed once per UID (CSR specs are immutable). */
  onCsr(csr: CsrObject, deleted: boolean): void {
    const id = csrTokenId(csr);
    const name = csr.metadata.name;
    if (deleted) {
      if (id) this.csrsByTokenId.remove(id, name);
      this.subjects.delete(csr.metadata.uid);
      const nodeName = this.nodeNameOfCsr.get(name);
      if (nodeName !== undefined) this.csrsByNodeName.remove(nodeName, name);
      this.nodeNameOfCsr.delete(name);
      return;
    }
    if (id) this.csrsByTokenId.add(id, name);
    if (!this.nodeNameOfCsr.has(name)) {
      const indexed = this.subject(csr).then((subject) => {
        // Still the same request (not deleted, or re-made under its name, meanwhile).
        if (!subject.ok || this.subjects.get(csr.metadata.uid) === undefined) return;
        this.nodeNameOfCsr.set(name, subject.nodeName);
        this.csrsByNodeName.add(subject.nodeName, name);
      });
      this.parsing.add(indexed);
      void indexed.finally(() => this.parsing.delete(indexed));
    }
  }

  /**
   * The kubelet client CSRs that ask for `nodeName`, every request seen so far included: a
   * subject still being parsed is waited for, so a competing request is never missed for lag.
   */
  async csrsNaming(nodeName: string): Promise<string[]> {
    while (this.parsing.size > 0) await Promise.all([...this.parsing]);
    return this.csrsByNodeName.get(nodeName);
  }

  private subject(csr: CsrObject): Promise<CsrFacts['subject']> {
    let subject = this.subjects.get(csr.metadata.uid);
    if (!subject) {
      subject = parseKubeletCsr(csr.spec.request ?? '');
      this.subjects.set(csr.metadata.uid, subject);
    }
    return subject;
  }

  /** The CSR as the decisions take it (its subject parsed once per CSR UID). */
  async csrFacts(csr: CsrObject): Promise<CsrFacts> {
    const subject = await this.subject(csr);
    return {
      name: csr.metadata.name,
      createdAt: new Date(csr.metadata.creationTimestamp),
      signerName: csr.spec.signerName ?? '',
      usages: csr.spec.usages ?? [],
      expirationSeconds: csr.spec.expirationSeconds,
      approved: csr.status?.conditions?.some((c) => c.type === 'Approved') ?? false,
      subject,
    };
  }
}
