// What the issuer reads FlavoredTokens from when it lists a caller's tokens or follows one for a
// watch: a cache kept current by a watch (src/kube/flavored-token-watch.ts), so a list or a
// waiting portal costs the API server nothing per request. An interface, so tests can feed it.
import type { FlavoredToken } from '../flavor/resources.ts';

export interface TokenFeed {
  /** False until the first list is in (and after a stop): answers would be incomplete. */
  readonly synced: boolean;
  list(): FlavoredToken[];
  get(name: string): FlavoredToken | undefined;
  /** Calls `listener` with the token after each change (undefined once deleted); returns unsubscribe. */
  subscribe(name: string, listener: (token: FlavoredToken | undefined) => void): () => void;
}
