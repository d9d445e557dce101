// Several replicas sharing one TLS Secret (an in-memory store with the API server's optimistic
// concurrency and a watch): they agree on one Secret, renew it once, and repair it.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { pino } from 'pino';
import type { ServingCertificate } from '../../src/pki/certificate-source.ts';
import {
  createBundle,
  renewServing,
  servingNames,
  type TlsBundle,
  type Wanted,
} from '../../src/pki/serving-bundle.ts';
import { SelfManagedTls } from '../../src/webhook/self-managed-tls.ts';
import { MemoryStore } from './support/memory-tls-store.ts';

const wanted: Wanted = {
  names: servingNames({ service: 'w', namespace: 'n' }),
  servingLifetimeMs: 3_600_000,
};
const quiet = pino({ level: 'silent' });

function replica(store: MemoryStore, clock: { now: Date }): SelfManagedTls {
  return new SelfManagedTls({ store, wanted, logger: quiet, now: () => clock.now });
}

/** Resolves once every replica serves the certificate the store holds, and it is not `previous`. */
async function converged(
  store: MemoryStore,
  replicas: SelfManagedTls[],
  previous: ServingCertificate,
): Promise<ServingCertificate> {
  const deadline = Date.now() + 10_000;
  for (;;) {
    const stored = store.current()?.bundle.tlsCert;
    const serving = replicas.map((r) => r.current()?.certPem);
    if (stored !== undefined && stored !== previous.certPem && serving.every((pem) => pem === stored)) {
      return replicas[0]!.current()!;
    }
    if (Date.now() > deadline) throw new Error('replicas did not converge on the stored certificate');
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

describe('SelfManagedTls with several replicas', () => {
  test('replicas starting together agree on one Secret (one create wins, the others adopt it)', async () => {
    const store = new MemoryStore();
    const clock = { now: new Date() };
    const replicas = [replica(store, clock), replica(store, clock), replica(store, clock)];
    try {
      const first = await Promise.all(replicas.map((r) => r.start()));
      assert.equal(store.writes, 1, 'exactly one replica wrote');
      assert.equal(new Set(first.map((c) => c.serial)).size, 1);
      assert.equal(first[0]!.caPem, store.current()?.bundle.caCert);
    } finally {
      for (const r of replicas) r.stop();
    }
  });

  test('at two thirds of the lifetime one replica renews, all serve it, the CA stays', async () => {
    const store = new MemoryStore();
    const clock = { now: new Date() };
    const replicas = [replica(store, clock), replica(store, clock)];
    try {
      const initial = (await Promise.all(replicas.map((r) => r.start())))[0]!;
      const writes = store.writes;
      clock.now = new Date(clock.now.getTime() + (2 / 3) * wanted.servingLifetimeMs + 1_000);
      store.touch(); // any event makes each replica judge the Secret again
      const renewed = await converged(store, replicas, initial);
      assert.notEqual(renewed.serial, initial.serial);
      assert.equal(renewed.caPem, initial.caPem, 'the caBundle must not change');
      assert.equal(store.writes, writes + 1, 'the race to renew has one winner');
    } finally {
      for (const r of replicas) r.stop();
    }
  });

  test("adopts another replica's renewal without writing", async () => {
    const store = new MemoryStore();
    const clock = { now: new Date() };
    const r = replica(store, clock);
    try {
      const initial = await r.start();
      const stored = store.current()!.bundle as TlsBundle;
      store.replace(await renewServing(stored, wanted, clock.now));
      const writes = store.writes;
      const adopted = await converged(store, [r], initial);
      assert.notEqual(adopted.serial, initial.serial);
      assert.equal(store.writes, writes);
    } finally {
      r.stop();
    }
  });

  test('repairs a broken Secret: a wrong serving key is reissued under the same CA; a deleted Secret is recreated', async () => {
    const store = new MemoryStore();
    const clock = { now: new Date() };
    const r = replica(store, clock);
    try {
      const initial = await r.start();
      const stranger = await createBundle(wanted, clock.now);
      store.replace({ ...(store.current()!.bundle as TlsBundle), tlsKey: stranger.tlsKey });
      const repaired = await converged(store, [r], initial);
      assert.notEqual(repaired.serial, initial.serial);
      assert.equal(repaired.caPem, initial.caPem);

      store.replace(undefined);
      const recreated = await converged(store, [r], repaired);
      assert.notEqual(recreated.caPem, initial.caPem, 'nothing to keep: a new CA');
    } finally {
      r.stop();
    }
  });
});
