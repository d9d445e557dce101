// FlavorClasses for the token issuer, from a watch instead of a GET per issuance (a lister, as
// client-go controllers read through informers): every issuance names one, and at hundreds of
// issuances a second the GETs were a fifth of the issuer's API requests. Until the first list is
// in, and after a stop, lookups fall back to the API server, so an answer is never invented.

import {
  FLAVOR_CLASS_PLURAL,
  type FlavorClass,
  FlavorClassSchema,
  GROUP,
  VERSION,
} from '../flavor/resources.ts';
import type { KubeConfig } from './kubeconfig.ts';
import { ListWatch } from './listwatch.ts';

type Stored = { metadata: { name: string; resourceVersion?: string } };

export class FlavorClassWatch {
  readonly #watch: ListWatch<Stored>;

  constructor(kubeConfig: KubeConfig, onRestart?: (reason: string, error?: Error) => void) {
    this.#watch = new ListWatch<Stored>({
      kubeConfig,
      path: `/apis/${GROUP}/${VERSION}/${FLAVOR_CLASS_PLURAL}`,
      onEvent: () => {},
      ...(onRestart ? { onRestart } : {}),
    });
  }

  /** Starts the watch; does not wait for it (lookups fall back until it has synced). */
  start(): void {
    void this.#watch.start();
  }

  stop(): void {
    this.#watch.stop();
  }

  /**
   * `undefined` when the cache cannot answer yet (not synced): ask the API server. `null` when
   * the class does not exist or does not match the schema, else the class.
   */
  lookup(name: string): FlavorClass | null | undefined {
    if (!this.#watch.hasSynced) return undefined;
    const raw = this.#watch.get(name);
    if (raw === undefined) return null;
    const parsed = FlavorClassSchema.safeParse(raw);
    return parsed.success ? parsed.data : null;
  }
}
