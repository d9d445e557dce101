// Revocation is final: once a FlavoredToken is revoked (spec.revoked) or being deleted, no
// issuance may complete it, neither a first attempt nor an idempotent replay. The issuer answers
// join material only for a record it read back (a plain issuance, after its Secret: a quorum
// read) or marked issued (a keyed one: the mark's resourceVersion precondition makes it exact)
// while that record was still issuable, and deletes again a bootstrap Secret it made for a record
// that turned out withdrawn (ADR 0015). This is the one place that says what
// "withdrawn" means. Pure.
import type { FlavoredToken } from './resources.ts';

/** Why a token's issuance may no longer complete. */
export type Withdrawal = 'revoked' | 'deleting' | 'gone';

/**
 * Why the record `current` (as read now) may no longer be issued, or undefined while it may.
 * `uid`: the record the issuance began with; another record under the same name is `gone`.
 */
export function withdrawal(
  current: FlavoredToken | undefined,
  uid: string | undefined,
): Withdrawal | undefined {
  if (!current || (uid !== undefined && current.metadata.uid !== uid)) return 'gone';
  if (current.spec.revoked) return 'revoked';
  if (current.metadata.deletionTimestamp) return 'deleting';
  return undefined;
}
