// When a token's bootstrap Secret may go. Revoked or expired: at once. Consumed (every use counted):
// only once each join's kubelet no longer authenticates with it, i.e. its Node registered with its
// own credentials after the join claimed the name, or a grace after the claim for one that never
// does. Deleting it at approval broke joins whose certificate came later than kube-apiserver's
// 10 s token cache (a second API server without that cache). Single use stays enforced by the
// token's use count (NoUsesLeft), not by the Secret's absence. The join reconciler deletes it as
// the last join registers (and records that on the join's record, ADR 0016); the token
// reconciler deletes it in every other case (and records that on the token). A token bound to a
// TPM gets a new Secret with each proof of its machine (ADR 0014): what was deleted is named by
// the proof whose Secret it was, never by a time in whole seconds.
import type { FlavoredTokenStatus } from './resources.ts';

/** How long a bound kubelet may take to register its Node before its token Secret goes anyway. */
export const BOOTSTRAP_SECRET_GRACE_MS = 120_000;

/** A join of the token, as its ledger entry and its record say it. */
export interface JoinSecretFacts {
  /** When the join claimed the name (or, a rejoin, came back to it). */
  boundAt: string;
  /** When its Node was first seen; a rejoin's Node was seen before the join came back. */
  registeredAt?: string;
  /** The join reconciler deleted the Secret before recording this join's Node. */
  secretDeleted?: boolean;
  /** For a token bound to a TPM: the proof this join used. */
  proof?: number;
}

const registeredSinceBound = (join: JoinSecretFacts) =>
  join.registeredAt !== undefined && Date.parse(join.registeredAt) >= Date.parse(join.boundAt);

/**
 * Milliseconds until the Secret may be deleted (0: now), or undefined while the token is still
 * usable (uses left, not expired, not revoked) or nothing is left to delete.
 */
export function bootstrapSecretDeleteAfterMs(
  token: { consumed: boolean; expired: boolean; revoked: boolean },
  joins: readonly JoinSecretFacts[],
  status: Pick<FlavoredTokenStatus, 'attestation'> | undefined,
  now: Date,
  /**
   * A token bound to a TPM: its machine's latest proof, which minted a new Secret (ADR 0014). That
   * Secret waits for its join (it expires on its own after the issuer's join window); once a join
   * used that proof, it goes as any join's does.
   */
  latestProof?: number,
): number | undefined {
  if (token.revoked || token.expired) return 0;
  if (!token.consumed) return undefined;
  if (latestProof !== undefined && (status?.attestation?.bound ?? 0) < latestProof) return undefined;
  const waiting = joins.filter((j) => !registeredSinceBound(j));
  // Every join registered: the last one's record says the join reconciler deleted it (the latest
  // proof's Secret, for a token bound to a TPM).
  const deletedByJoin = joins.some(
    (j) => j.secretDeleted && (latestProof === undefined || (j.proof ?? 0) >= latestProof),
  );
  if (waiting.length === 0 && deletedByJoin) return undefined;
  const waits = waiting.map((j) => Date.parse(j.boundAt) + BOOTSTRAP_SECRET_GRACE_MS - now.getTime());
  return Math.max(0, ...waits);
}
