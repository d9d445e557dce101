// The admission guard's keys come from the process's shared FlavorClass cache: they follow its
// events, and a cache stopped before its first list must not let the guard serve with no keys.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { FlavorClassCache, StoredFlavorClass } from '../../src/kube/flavor-classes.ts';
import { protectedKeysFrom } from '../../src/kube/protected-keys-source.ts';
import type { EventHandler } from '../../src/runtime/listwatch.ts';

/** The part of a FlavorClass cache the guard reads, driven by the test. */
class FakeClassCache {
  readonly classes = new Map<string, StoredFlavorClass>();
  hasSynced = false;
  private readonly handlers: EventHandler<StoredFlavorClass>[] = [];
  private wake: (() => void) | undefined;
  private readonly synced = new Promise<void>((resolve) => {
    this.wake = resolve;
  });
  list(): StoredFlavorClass[] {
    return [...this.classes.values()];
  }
  addEventHandler(handler: EventHandler<StoredFlavorClass>): () => void {
    this.handlers.push(handler);
    return () => this.handlers.splice(this.handlers.indexOf(handler), 1);
  }
  waitForSync(): Promise<void> {
    return this.synced;
  }
  add(name: string, labels: Record<string, string>): void {
    const flavorClass = { metadata: { name }, spec: { labels } };
    this.classes.set(name, flavorClass);
    for (const handler of this.handlers) handler('ADDED', flavorClass, undefined);
  }
  sync(): void {
    this.hasSynced = true;
    this.wake?.();
  }
  /** ListWatch.stop(): waitForSync resolves, although nothing was listed. */
  stop(): void {
    this.wake?.();
  }
}

const asCache = (fake: FakeClassCache) => fake as unknown as FlavorClassCache;

describe('protectedKeysFrom (the shared FlavorClass cache)', () => {
  it('protects what classes listed before it name, and follows later ones', async () => {
    const fake = new FakeClassCache();
    fake.add('gold', { 'example.com/tier': 'gold' });
    const source = protectedKeysFrom(asCache(fake));
    let changes = 0;
    source.onChange(() => changes++);
    fake.sync();
    await source.ready;
    assert.ok(source.protectedKeys().labels.has('example.com/tier'), 'a class listed before it was made');
    fake.add('zone', { 'example.com/zone': 'a' });
    assert.ok(source.protectedKeys().labels.has('example.com/zone'));
    assert.equal(changes, 1);
    source.stop();
    fake.add('late', { 'example.com/late': 'x' });
    assert.equal(changes, 1, 'nothing heard once stopped');
  });

  it('does not become ready when the cache stops before its first list (the guard would serve open)', async () => {
    const fake = new FakeClassCache();
    const source = protectedKeysFrom(asCache(fake));
    fake.stop();
    await assert.rejects(source.ready as Promise<void>, /stopped before its first list/);
  });
});
