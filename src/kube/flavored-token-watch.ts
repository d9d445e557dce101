// FlavoredTokens and their joins' records (NodeNameClaims, ADR 0016) for the token issuer, from
// watches: lists of a caller's tokens and portals waiting for "verified" are served from memory.
// Objects that do not match the schema are left out (the CRD and the code drifted: the API server
// validated them, so this does not happen in practice).

import {
  FLAVORED_TOKEN_PLURAL,
  type FlavoredToken,
  FlavoredTokenSchema,
  GROUP,
  type NodeNameClaim,
  NodeNameClaimSchema,
  VERSION,
} from '../flavor/resources.ts';
import { SetIndex } from '../flavor/set-index.ts';
import type { TokenFeed } from '../tokenissuer/token-feed.ts';
import { internStrings } from './intern.ts';
import type { KubeConfig } from './kubeconfig.ts';
import { ListWatch, withoutManagedFields } from './listwatch.ts';
import { CLAIMS_PATH } from './node-name-claims.ts';

type Stored = { metadata: { name: string; resourceVersion?: string }; token?: FlavoredToken };
type StoredClaim = { metadata: { name: string; resourceVersion?: string }; claim?: NodeNameClaim };

/** The token a join record's join belongs to (its holder, or its last join once released). */
const tokenNameOf = (claim: NodeNameClaim | undefined) =>
  claim?.spec.holder?.tokenName ?? claim?.status?.join?.tokenName;

export class FlavoredTokenWatch implements TokenFeed {
  readonly #watch: ListWatch<Stored>;
  readonly #claims: ListWatch<StoredClaim>;
  /** Token name → the names of its joins' records. */
  readonly #joins = new SetIndex();
  readonly #listeners = new Map<string, Set<(token: FlavoredToken | undefined) => void>>();

  constructor(kubeConfig: KubeConfig, onRestart?: (reason: string, error?: Error) => void) {
    this.#watch = new ListWatch<Stored>({
      kubeConfig,
      path: `/apis/${GROUP}/${VERSION}/${FLAVORED_TOKEN_PLURAL}`,
      transform: (raw) => {
        const trimmed = withoutManagedFields<{ metadata: Stored['metadata'] }>(raw);
        const parsed = FlavoredTokenSchema.safeParse(trimmed);
        if (!parsed.success) return { metadata: trimmed.metadata };
        // One copy of the metadata (the parsed token's) and of each shared string (intern.ts).
        const token = internStrings(parsed.data);
        return {
          metadata: {
            name: token.metadata.name ?? trimmed.metadata.name,
            resourceVersion: token.metadata.resourceVersion,
          },
          token,
        };
      },
      onEvent: (type, object) =>
        this.#notify(object.metadata.name, type === 'DELETED' ? undefined : object.token),
      ...(onRestart ? { onRestart } : {}),
    });
    this.#claims = new ListWatch<StoredClaim>({
      kubeConfig,
      path: CLAIMS_PATH,
      transform: (raw) => {
        const trimmed = withoutManagedFields<{ metadata: StoredClaim['metadata'] }>(raw);
        const parsed = NodeNameClaimSchema.safeParse(trimmed);
        return parsed.success
          ? { metadata: trimmed.metadata, claim: parsed.data }
          : { metadata: trimmed.metadata };
      },
      onEvent: (type, object, previous) => {
        const before = tokenNameOf(previous?.claim);
        const after = type === 'DELETED' ? undefined : tokenNameOf(object.claim);
        if (before !== undefined && before !== after) this.#joins.remove(before, object.metadata.name);
        if (after !== undefined) this.#joins.add(after, object.metadata.name);
        for (const name of new Set([before, after]))
          if (name !== undefined) this.#notify(name, this.get(name));
      },
      ...(onRestart ? { onRestart } : {}),
    });
  }

  #notify(name: string, token: FlavoredToken | undefined): void {
    const listeners = this.#listeners.get(name);
    if (!listeners) return;
    for (const listener of [...listeners]) listener(token);
  }

  start(): void {
    void this.#watch.start();
    void this.#claims.start();
  }

  stop(): void {
    this.#watch.stop();
    this.#claims.stop();
  }

  get synced(): boolean {
    return this.#watch.hasSynced && this.#claims.hasSynced;
  }

  joinsOf(token: FlavoredToken): NodeNameClaim[] {
    return this.#joins.get(token.metadata.name ?? '').flatMap((name) => {
      const claim = this.#claims.get(name)?.claim;
      return claim ? [claim] : [];
    });
  }

  list(): FlavoredToken[] {
    return this.#watch.list().flatMap((s) => (s.token ? [s.token] : []));
  }

  get(name: string): FlavoredToken | undefined {
    return this.#watch.get(name)?.token;
  }

  subscribe(name: string, listener: (token: FlavoredToken | undefined) => void): () => void {
    let listeners = this.#listeners.get(name);
    if (!listeners) {
      listeners = new Set();
      this.#listeners.set(name, listeners);
    }
    listeners.add(listener);
    return () => {
      listeners.delete(listener);
      if (listeners.size === 0) this.#listeners.delete(name);
    };
  }
}
