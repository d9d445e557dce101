// The webhook TLS Secret in memory, with the API server's optimistic concurrency (409 on a create
// that loses, 409 on an update with a stale resourceVersion) and a watch, for unit tests.

import type { TlsBundle } from '../../../src/pki/serving-bundle.ts';
import { KubeError } from '../../../src/runtime/kube-error.ts';
import type { SecretWatch, StoredTlsBundle, TlsSecretStore } from '../../../src/webhook/webhook-tls-store.ts';

export class MemoryStore implements TlsSecretStore {
  readonly description = 'Secret test/webhook-tls';
  private secret: StoredTlsBundle | undefined;
  private version = 0;
  private readonly watchers = new Set<(secret: StoredTlsBundle | undefined) => void>();
  writes = 0;

  async read(): Promise<StoredTlsBundle | undefined> {
    await Promise.resolve();
    return this.secret && structuredClone(this.secret);
  }

  async create(bundle: TlsBundle): Promise<StoredTlsBundle> {
    await Promise.resolve();
    if (this.secret !== undefined) throw new KubeError(409, 'AlreadyExists', 'exists');
    return this.write(bundle);
  }

  async update(bundle: TlsBundle, resourceVersion: string): Promise<StoredTlsBundle> {
    await Promise.resolve();
    if (this.secret === undefined) throw new KubeError(404, 'NotFound', 'gone');
    if (this.secret.resourceVersion !== resourceVersion) throw new KubeError(409, 'Conflict', 'stale');
    return this.write(bundle);
  }

  /** What someone else (a person, cert rotation by hand) does. */
  replace(bundle: Partial<TlsBundle> | undefined): void {
    this.secret = bundle && { bundle, resourceVersion: String(++this.version) };
    this.notify();
  }

  /** A watch event without a change, as after a relist. */
  touch(): void {
    this.notify();
  }

  current(): StoredTlsBundle | undefined {
    return this.secret;
  }

  watch(onChange: (secret: StoredTlsBundle | undefined) => void): SecretWatch {
    return {
      start: async () => {
        this.watchers.add(onChange);
        if (this.secret !== undefined) onChange(structuredClone(this.secret));
      },
      stop: () => this.watchers.delete(onChange),
    };
  }

  private write(bundle: TlsBundle): StoredTlsBundle {
    this.writes += 1;
    this.secret = { bundle: { ...bundle }, resourceVersion: String(++this.version) };
    queueMicrotask(() => this.notify());
    return structuredClone(this.secret);
  }

  private notify(): void {
    for (const watcher of this.watchers) watcher(this.secret && structuredClone(this.secret));
  }
}
