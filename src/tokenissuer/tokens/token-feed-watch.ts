// The issuer's TokenFeed over the process's token and join-record caches (src/kube/token-caches.ts):
// lists of a caller's tokens and portals waiting for "verified" are served from memory, and a
// change of a token or of one of its joins' records (ADR 0016) wakes that token's watchers.
import type { FlavoredToken, NodeNameClaim } from '../../flavor/resources.ts';
import { SetIndex } from '../../flavor/set-index.ts';
import type { TokenCaches } from '../../kube/token-caches.ts';
import type { TokenFeed } from './token-feed.ts';

/** The token a join record's join belongs to (its holder, or its last join once released). */
const tokenNameOf = (claim: NodeNameClaim | undefined) =>
  claim?.spec.holder?.tokenName ?? claim?.status?.join?.tokenName;

export class TokenFeedWatch implements TokenFeed {
  readonly #caches: TokenCaches;
  /** Token name → the names of its joins' records. */
  readonly #joins = new SetIndex();
  readonly #listeners = new Map<string, Set<(token: FlavoredToken | undefined) => void>>();
  readonly #removeHandlers: (() => void)[];

  constructor(caches: TokenCaches) {
    this.#caches = caches;
    this.#removeHandlers = [
      caches.tokens.addEventHandler((type, token) =>
        this.#notify(token.metadata.name, type === 'DELETED' ? undefined : token),
      ),
      caches.records.addEventHandler((type, record, previous) => {
        const name = record.metadata.name;
        const before = tokenNameOf(previous);
        const after = type === 'DELETED' ? undefined : tokenNameOf(record);
        if (before !== undefined && before !== after) this.#joins.remove(before, name);
        if (after !== undefined) this.#joins.add(after, name);
        for (const token of new Set([before, after]))
          if (token !== undefined) this.#notify(token, this.get(token));
      }),
    ];
  }

  #notify(name: string, token: FlavoredToken | undefined): void {
    const listeners = this.#listeners.get(name);
    if (!listeners) return;
    for (const listener of [...listeners]) listener(token);
  }

  /** Its handlers leave the shared caches (their owner stops them). */
  close(): void {
    for (const remove of this.#removeHandlers.splice(0)) remove();
  }

  get synced(): boolean {
    return this.#caches.tokens.hasSynced && this.#caches.records.hasSynced;
  }

  list(): FlavoredToken[] {
    return this.#caches.tokens.list();
  }

  get(name: string): FlavoredToken | undefined {
    return this.#caches.tokens.get(name);
  }

  joinsOf(token: FlavoredToken): NodeNameClaim[] {
    return this.#joins.get(token.metadata.name ?? '').flatMap((name) => {
      const record = this.#caches.records.get(name);
      return record ? [record] : [];
    });
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
