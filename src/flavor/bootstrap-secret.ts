// When a token's bootstrap Secret may go. Revoked or expired: at once. Consumed (every use bound):
// only once each bound kubelet no longer authenticates with it, i.e. its Node registered with its
// own credentials (the binding's nodeUID), or a grace after the binding for one that never does.
// Deleting it at binding time broke joins whose certificate came later than kube-apiserver's 10 s
// token cache (our approval after a leader failover; a second API server without that cache).
// Single use stays enforced by the binding (NoUsesLeft), not by the Secret's absence.
import type { FlavoredTokenStatus, TokenBinding } from './resources.ts';

/** How long a bound kubelet may take to register its Node before its token Secret goes anyway. */
export const BOOTSTRAP_SECRET_GRACE_MS = 120_000;

/**
 * Milliseconds until the Secret may be deleted (0: now), or undefined while the token is still
 * usable (uses left, not expired, not revoked).
 */
export function bootstrapSecretDeleteAfterMs(
  token: { consumed: boolean; expired: boolean; revoked: boolean },
  status: Pick<FlavoredTokenStatus, 'bindings' | 'attestation'>,
  now: Date,
  /**
   * A token bound to a TPM: its machine's latest proof, which minted a new Secret (ADR 0014). That
   * Secret waits for its join (it expires on its own after the issuer's join window); once a
   * binding used that proof, it goes a grace after that binding, as for any join.
   */
  latestProof?: number,
): number | undefined {
  if (token.revoked || token.expired) return 0;
  if (!token.consumed) return undefined;
  if (latestProof !== undefined && (status.attestation?.bound ?? 0) < latestProof) return undefined;
  const bindings = status.bindings ?? [];
  // A binding moved to a re-installed machine's CSR (after its Node was verified): its kubelet
  // fetches its certificate with the new Secret, as a first join's does before it registers.
  const rebound = (b: TokenBinding) =>
    b.verifiedAt !== undefined && Date.parse(b.boundAt) > Date.parse(b.verifiedAt);
  const waits = bindings
    .filter((b) => b.nodeUID === undefined || rebound(b))
    .map((b) => Date.parse(b.boundAt) + BOOTSTRAP_SECRET_GRACE_MS - now.getTime());
  return Math.max(0, ...waits);
}
