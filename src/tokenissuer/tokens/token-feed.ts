// What the issuer reads FlavoredTokens (and their joins' records) from when it lists a caller's
// tokens or follows one for a watch: caches kept current by watches
// (src/kube/flavored-token-watch.ts), so a list or a waiting portal costs the API server nothing
// per request. An interface, so tests can feed it.
import type { FlavoredToken, NodeNameClaim } from '../../flavor/resources.ts';

export interface TokenFeed {
  /** False until the first list is in (and after a stop): answers would be incomplete. */
  readonly synced: boolean;
  list(): FlavoredToken[];
  get(name: string): FlavoredToken | undefined;
  /** The join records (NodeNameClaims) of the token's joins (ADR 0016). */
  joinsOf(token: FlavoredToken): NodeNameClaim[];
  /**
   * Calls `listener` with the token after each change of it or of one of its joins' records
   * (undefined once deleted); returns unsubscribe.
   */
  subscribe(name: string, listener: (token: FlavoredToken | undefined) => void): () => void;
}
