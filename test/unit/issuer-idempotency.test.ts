import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { IssuerError } from '../../src/tokenissuer/errors.ts';
import { IdempotencyCache, requestFingerprint } from '../../src/tokenissuer/issuance/idempotency.ts';

function cache(options: { ttlMs?: number; maxEntries?: number } = {}) {
  let clock = 0;
  const cache = new IdempotencyCache<string>({
    ttlMs: options.ttlMs ?? 60_000,
    maxEntries: options.maxEntries ?? 100,
    now: () => clock,
  });
  let minted = 0;
  const mint = async () => `token-${++minted}`;
  return { cache, mint, advance: (ms: number) => (clock += ms), minted: () => minted };
}

describe('IdempotencyCache', () => {
  it('answers a retry with the same key and body with the first answer', async () => {
    const { cache: c, mint, minted } = cache();
    const first = await c.run('alice', 'k1', { flavorClassName: 'sweet' }, mint);
    const retry = await c.run('alice', 'k1', { flavorClassName: 'sweet' }, mint);
    assert.deepEqual(first, { value: 'token-1', replayed: false });
    assert.deepEqual(retry, { value: 'token-1', replayed: true });
    assert.equal(minted(), 1);
  });

  it('refuses the same key with a different body (409)', async () => {
    const { cache: c, mint } = cache();
    await c.run('alice', 'k1', { flavorClassName: 'sweet' }, mint);
    await assert.rejects(c.run('alice', 'k1', { flavorClassName: 'sour' }, mint), (error: IssuerError) => {
      assert.equal(error.status, 409);
      assert.match(error.message, /different request body/);
      return true;
    });
  });

  it('keeps callers apart: the same key from another caller mints anew', async () => {
    const { cache: c, mint } = cache();
    await c.run('alice', 'k1', { flavorClassName: 'sweet' }, mint);
    assert.deepEqual(await c.run('bob', 'k1', { flavorClassName: 'sweet' }, mint), {
      value: 'token-2',
      replayed: false,
    });
  });

  it('shares one in-flight issuance between concurrent duplicates', async () => {
    const { cache: c, mint, minted } = cache();
    const [a, b] = await Promise.all([
      c.run('alice', 'k', { f: 1 }, mint),
      c.run('alice', 'k', { f: 1 }, mint),
    ]);
    assert.equal(a.value, b.value);
    assert.equal(minted(), 1);
  });

  it('does not keep failures: a retry after a failure tries again', async () => {
    const { cache: c, mint } = cache();
    await assert.rejects(c.run('alice', 'k', {}, async () => Promise.reject(new Error('boom'))));
    assert.deepEqual(await c.run('alice', 'k', {}, mint), { value: 'token-1', replayed: false });
  });

  it('forgets answers after the TTL', async () => {
    const { cache: c, mint, advance } = cache({ ttlMs: 1000 });
    await c.run('alice', 'k', {}, mint);
    advance(1001);
    assert.deepEqual(await c.run('alice', 'k', {}, mint), { value: 'token-2', replayed: false });
  });

  it('is bounded: the oldest answers go first', async () => {
    const { cache: c, mint } = cache({ maxEntries: 2 });
    await c.run('alice', 'a', {}, mint);
    await c.run('alice', 'b', {}, mint);
    await c.run('alice', 'c', {}, mint);
    assert.equal((await c.run('alice', 'c', {}, mint)).replayed, true);
    assert.equal((await c.run('alice', 'a', {}, mint)).replayed, false, 'evicted');
  });

  it('refuses malformed keys with 400', async () => {
    const { cache: c, mint } = cache();
    for (const key of ['', 'has space', 'x'.repeat(256), 'naïve']) {
      await assert.rejects(c.run('alice', key, {}, mint), (error: IssuerError) => error.status === 400);
    }
  });

  it('fingerprints bodies by content, not by key order', () => {
    assert.equal(
      requestFingerprint({ a: 1, b: [1, { c: 2, d: 3 }] }),
      requestFingerprint({ b: [1, { d: 3, c: 2 }], a: 1 }),
    );
    assert.notEqual(requestFingerprint({ a: 1 }), requestFingerprint({ a: '1' }));
    assert.equal(requestFingerprint({ a: 1, b: undefined }), requestFingerprint({ a: 1 }));
  });
});
