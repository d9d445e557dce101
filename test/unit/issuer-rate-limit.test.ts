import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { RateLimiter } from '../../src/tokenissuer/defences/rate-limit.ts';

describe('RateLimiter (token bucket per caller)', () => {
  it('allows a burst of `capacity`, then refuses with a Retry-After', () => {
    const limiter = new RateLimiter({ capacity: 3, refillPerSecond: 0.5 }, 100);
    for (let i = 0; i < 3; i++) assert.equal(limiter.take('alice', 0).allowed, true);
    assert.deepEqual(limiter.take('alice', 0), { allowed: false, retryAfterSeconds: 2 });
  });

  it('refills over time, never above capacity', () => {
    const limiter = new RateLimiter({ capacity: 2, refillPerSecond: 1 }, 100);
    limiter.take('alice', 0);
    limiter.take('alice', 0);
    assert.equal(limiter.take('alice', 500).allowed, false);
    assert.equal(limiter.take('alice', 1500).allowed, true);
    // A long idle period refills to capacity only.
    assert.equal(limiter.take('alice', 100_000).allowed, true);
    assert.equal(limiter.take('alice', 100_000).allowed, true);
    assert.equal(limiter.take('alice', 100_000).allowed, false);
  });

  it('keeps callers apart', () => {
    const limiter = new RateLimiter({ capacity: 1, refillPerSecond: 1 }, 100);
    assert.equal(limiter.take('alice', 0).allowed, true);
    assert.equal(limiter.take('alice', 0).allowed, false);
    assert.equal(limiter.take('bob', 0).allowed, true);
  });

  it('refund gives back a token taken for nothing, never above capacity', () => {
    const limiter = new RateLimiter({ capacity: 2, refillPerSecond: 0.001 }, 100);
    assert.equal(limiter.take('alice', 0).allowed, true);
    assert.equal(limiter.take('alice', 0).allowed, true);
    assert.equal(limiter.take('alice', 0).allowed, false);
    limiter.refund('alice', 0);
    assert.equal(limiter.take('alice', 0).allowed, true);
    limiter.refund('bob', 0); // a full bucket stays at capacity
    assert.equal(limiter.take('bob', 0).allowed, true);
    assert.equal(limiter.take('bob', 0).allowed, true);
    assert.equal(limiter.take('bob', 0).allowed, false);
  });

  it('never allows more than capacity + elapsed × rate (property)', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 20 }),
        fc.double({ min: 0.1, max: 10, noNaN: true }),
        fc.array(fc.integer({ min: 0, max: 2000 }), { maxLength: 200 }),
        (capacity, rate, gaps) => {
          const limiter = new RateLimiter({ capacity, refillPerSecond: rate }, 10);
          let now = 0;
          let allowed = 0;
          for (const gap of gaps) {
            now += gap;
            if (limiter.take('c', now).allowed) allowed++;
          }
          return allowed <= capacity + (now / 1000) * rate + 1e-9;
        },
      ),
    );
  });

  it('forgets the idlest callers beyond maxKeys (a forgotten bucket is full again)', () => {
    const limiter = new RateLimiter({ capacity: 1, refillPerSecond: 0.001 }, 2);
    limiter.take('a', 0);
    limiter.take('b', 0);
    limiter.take('c', 0); // evicts a
    assert.equal(limiter.take('a', 0).allowed, true);
    assert.equal(limiter.take('c', 0).allowed, false);
  });
});
