// FlavoredTokens for the token issuer, from a watch: lists of a caller's tokens and portals waiting
// for "verified" are served from memory. Objects that do not match the schema are left out (the
// CRD and the code drifted: the API server validated them, so this does not happen in practice).

import {
  FLAVORED_TOKEN_PLURAL,
  type FlavoredToken,
  FlavoredTokenSchema,
  GROUP,
  VERSION,
} from '../flavor/resources.ts';
import type { TokenFeed } from '../tokenissuer/token-feed.ts';
import { internStrings } from './intern.ts';
import type { KubeConfig } from './kubeconfig.ts';
import { ListWatch, withoutManagedFields } from './listwatch.ts';

type Stored = { metadata: { name: string; resourceVersion?: string }; token?: FlavoredToken };

export class FlavoredTokenWatch implements TokenFeed {
  readonly #watch: ListWatch<Stored>;
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
      onEvent: (type, object) => {
        const listeners = this.#listeners.get(object.metadata.name);
        if (!listeners) return;
        const token = type === 'DELETED' ? undefined : object.token;
        for (const listener of [...listeners]) listener(token);
      },
      ...(onRestart ? { onRestart } : {}),
    });
  }

  start(): void {
    void this.#watch.start();
  }

  stop(): void {
    this.#watch.stop();
  }

  get synced(): boolean {
    return this.#watch.hasSynced;
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
