// Per-key token buckets: a key may burst up to `capacity` requests, then gets `refillPerSecond`
// more each second. There is no peek: a check that does not take lets N concurrent requests all
// pass it (take first, refund what did not count). Buckets of keys not seen for a while are
// forgotten (a forgotten bucket comes back full, which is what it would have refilled to anyway).

export interface BucketSettings {
  capacity: number;
  refillPerSecond: number;
}

interface RateDecision {
  allowed: boolean;
  /** Whole seconds until one request is allowed again (0 when allowed). */
  retryAfterSeconds: number;
}

interface Bucket {
  tokens: number;
  updatedAt: number;
}

export class RateLimiter {
  readonly #settings: BucketSettings;
  readonly #maxKeys: number;
  readonly #buckets = new Map<string, Bucket>();

  constructor(settings: BucketSettings, maxKeys: number) {
    this.#settings = settings;
    this.#maxKeys = maxKeys;
  }

  /** Takes one token from `key`'s bucket if it has one. */
  take(key: string, now: number = Date.now()): RateDecision {
    const bucket = this.#refilled(key, now);
    if (bucket.tokens >= 1) {
      bucket.tokens -= 1;
      this.#store(key, bucket);
      return { allowed: true, retryAfterSeconds: 0 };
    }
    this.#store(key, bucket);
    return { allowed: false, retryAfterSeconds: this.#secondsUntilOne(bucket) };
  }

  /** Gives back a token taken for something that turned out not to count (never above capacity). */
  refund(key: string, now: number = Date.now()): void {
    const bucket = this.#refilled(key, now);
    bucket.tokens = Math.min(this.#settings.capacity, bucket.tokens + 1);
    this.#store(key, bucket);
  }

  #refilled(key: string, now: number): Bucket {
    const { capacity, refillPerSecond } = this.#settings;
    const bucket = this.#buckets.get(key);
    if (!bucket) return { tokens: capacity, updatedAt: now };
    const elapsedSeconds = Math.max(0, now - bucket.updatedAt) / 1000;
    return { tokens: Math.min(capacity, bucket.tokens + elapsedSeconds * refillPerSecond), updatedAt: now };
  }

  #secondsUntilOne(bucket: Bucket): number {
    return Math.max(1, Math.ceil((1 - bucket.tokens) / this.#settings.refillPerSecond));
  }

  #store(key: string, bucket: Bucket): void {
    this.#buckets.delete(key); // most recently used last, so eviction drops the idlest callers
    this.#buckets.set(key, bucket);
    for (const oldest of this.#buckets.keys()) {
      if (this.#buckets.size <= this.#maxKeys) break;
      this.#buckets.delete(oldest);
    }
  }
}
