// "A retry of the same join", as one rule (ADR 0016). A token's join under a node name is carried
// by that name's NodeNameClaim: the request (CSR) it was approved on, and the Node's UID once one
// registered. A new request of the same token for the same name is one of these, and nothing
// else decides it:
//   same           it is the join's own request (judged again: a restart, a lagging cache);
//   retry          the join's request has no certificate and will get none (pending, denied or
//                  failed) and no Node registered: the kubelet asked again, approvable without a
//                  further use;
//   rebind         a rejoin token's machine, re-installed and attested again, comes back to its
//                  own Node (ADR 0014): the join moves to this request, once per proof;
//   already-joined the join's request may hold a certificate (issued; approved and not failed, as
//                  kube-controller-manager signs it within moments; or gone: its cleaner deletes
//                  issued CSRs after an hour, so "gone" counts as issued), or its Node registered:
//                  that machine has credentials of its own, and a new request is a second machine
//                  on the same use;
//   over           the join's Node registered and is gone: the join ended, and the request is
//                  judged as a new join (which counts a use).
// Pure.

/** The join a token already holds under the name (the claim's status.join, with its claim time). */
export interface HeldJoin {
  csrName: string;
  /** When the join claimed the name (or last moved to a new request). */
  boundAt: string;
  /** The Node that registered under the join, once seen. */
  nodeUID?: string;
}

export interface JoinRequestFacts {
  /** The new request. */
  csr: { name: string; createdAt: Date };
  /** The join's own request may hold a certificate: issued, approved and not failed, or gone. */
  joinCsrIssued: boolean;
  /** The UID of the Node of the name now, if one exists. */
  nodeUid?: string;
  /** A token bound to a TPM that may rejoin (verdict.ts TokenFacts.rejoin). */
  rejoin?: boolean;
  /**
   * A rejoin token's next unused proof (ADR 0014): its machine proved its TPM again after the join
   * last moved, and this request came after that proof.
   */
  provenAgain?: boolean;
}

export type JoinRequestKind = 'same' | 'retry' | 'rebind' | 'already-joined' | 'over';

/** What a request of the token that holds `join` is, for the join's name. */
export function joinRequestKind(join: HeldJoin, facts: JoinRequestFacts): JoinRequestKind {
  if (facts.csr.name === join.csrName) return 'same';
  if (join.nodeUID !== undefined) {
    if (join.nodeUID !== facts.nodeUid) return 'over';
    return facts.rejoin && facts.provenAgain ? 'rebind' : 'already-joined';
  }
  return facts.joinCsrIssued ? 'already-joined' : 'retry';
}

/** A rejoin token's request comes after a proof its join has not used yet (once per proof). */
export function provenAfter(csrCreatedAt: Date, attestedAt: Date | undefined, boundAt?: Date): boolean {
  if (attestedAt === undefined || csrCreatedAt.getTime() < attestedAt.getTime()) return false;
  return boundAt === undefined || boundAt.getTime() < attestedAt.getTime();
}
