// When a token's bootstrap Secret may go. Revoked or expired: at once. Consumed (every use counted):
// only once each join's kubelet no longer authenticates with it, i.e. its Node registered with its
// own credentials after the join claimed the name, or a grace after the claim for one that never
// does. Deleting it at approval broke joins whose certificate came later than kube-apiserver's
// 10 s token cache (a second API server without that cache). Single use stays enforced by the
// token's use count (NoUsesLeft), not by the Secret's absence. The join reconciler deletes it as
// the last join registers (and records that on the join's record, ADR 0016); the token
// reconciler deletes it in every other case (and records that on the token).
import { rfc3339 } from './rfc3339.ts';

/** How long a bound kubelet may take to register its Node before its token Secret goes anyway. */
export const BOOTSTRAP_SECRET_GRACE_MS = 120_000;

/** A join of the token, as its record says it. */
export interface JoinSecretFacts {
  /** When the join claimed the name (or, a rejoin, came back to it). */
  boundAt: string;
  /** When its Node was first seen; a rejoin's Node was seen before the join came back. */
  registeredAt?: string;
  /** The join reconciler deleted the Secret before recording this join's Node. */
  secretDeleted?: boolean;
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
  now: Date,
  /**
   * A token bound to a TPM: when its machine last proved it, minting a new Secret (ADR 0014). That
   * Secret waits for its join (it expires on its own after the issuer's join window); once a join
   * was made (or came back) after it, it goes as any join's does.
   */
  attestedAt?: Date,
): number | undefined {
  if (token.revoked || token.expired) return 0;
  if (!token.consumed) return undefined;
  const since = (j: JoinSecretFacts) =>
    attestedAt !== undefined && Date.parse(j.boundAt) >= attestedAt.getTime();
  if (attestedAt !== undefined && !joins.some(since)) return undefined;
  const waiting = joins.filter((j) => !registeredSinceBound(j));
  // Every join registered: the last one's record says the join reconciler deleted it (after the
  // latest proof minted one, for a token bound to a TPM).
  if (
    waiting.length === 0 &&
    joins.some(
      (j) =>
        j.secretDeleted &&
        (attestedAt === undefined || Date.parse(j.registeredAt ?? '') >= Date.parse(rfc3339(attestedAt))),
    )
  )
    return undefined;
  const waits = waiting.map((j) => Date.parse(j.boundAt) + BOOTSTRAP_SECRET_GRACE_MS - now.getTime());
  return Math.max(0, ...waits);
}
