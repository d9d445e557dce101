// Deterministic stand-ins for crypto.randomBytes, so tests that sample randomness are repeatable.
import { createHash } from 'node:crypto';
import type { RandomBytes } from '../../../src/flavor/bootstrap-token.ts';

/** A repeatable byte stream: SHA-256(seed ‖ counter) blocks. Statistically sound, not secret. */
export function seededRandomBytes(seed: string): RandomBytes {
  let counter = 0;
  let pool = Buffer.alloc(0);
  return (size) => {
    while (pool.length < size) {
      const block = createHash('sha256').update(`${seed}/${counter++}`).digest();
      pool = Buffer.concat([pool, block]);
    }
    const out = pool.subarray(0, size);
    pool = pool.subarray(size);
    return Buffer.from(out);
  };
}

/** Serves bytes from `next()` in order and counts how many were handed out. */
export function countingRandomBytes(next: () => number): {
  randomBytes: RandomBytes;
  consumed: () => number;
} {
  let consumed = 0;
  return {
    randomBytes: (size) => {
      consumed += size;
      return Buffer.from(Array.from({ length: size }, next));
    },
    consumed: () => consumed,
  };
}

/** 0, 1, ..., 255, 0, 1, ...: every byte value equally often over each run of 256. */
export function cyclingBytes(): () => number {
  let value = 0;
  return () => {
    const current = value;
    value = (value + 1) % 256;
    return current;
  };
}
