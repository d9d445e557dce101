// Idempotency-Key for POST /v1/tokens: a retry with the same key, by the same caller, with the
// same body gets the answer of the first request instead of a second token; the same key with a
// different body is a conflict. "The same caller" is its identity (Caller.owner), never a name
// another caller could share: the answer holds the token's secrets. Answers are kept in memory
// for a TTL and the cache is bounded. This cache is per replica and only spares the work and
// shares a request in flight; what makes a retry on another replica safe is
// idempotent-issue.ts (ADR 0005). Failures are not kept, so a retry after a failure tries again.
import { createHash } from 'node:crypto';
import { BoundedCache } from '../defences/bounded-cache.ts';
import { IssuerError } from '../errors.ts';

/** What a key may be: 1 to 255 visible ASCII characters (as the IETF draft's examples). */
const IDEMPOTENCY_KEY_PATTERN = /^[\x21-\x7e]{1,255}$/;

interface Entry<V> {
  fingerprint: string;
  result: Promise<V>;
}

interface IdempotentResult<V> {
  value: V;
  /** True when the value is the answer to an earlier request. */
  replayed: boolean;
}

export class IdempotencyCache<V> {
  readonly #cache: BoundedCache<string, Entry<V>>;
  readonly #ttlMs: number;
  readonly #now: () => number;

  constructor(options: { ttlMs: number; maxEntries: number; now?: () => number }) {
    this.#cache = new BoundedCache(options.maxEntries);
    this.#ttlMs = options.ttlMs;
    this.#now = options.now ?? Date.now;
  }

  /**
   * The answer to `owner`'s request with `key`: the one remembered, or `produce()`'s. With
   * `stillCurrent`, a remembered answer it rejects (its token was revoked or deleted since) is
   * forgotten and the request answered as a new one, by `produce()`.
   */
  async run(
    owner: string,
    key: string,
    request: unknown,
    produce: () => Promise<V>,
    stillCurrent?: (value: V) => Promise<boolean>,
  ): Promise<IdempotentResult<V>> {
    if (!IDEMPOTENCY_KEY_PATTERN.test(key)) {
      throw new IssuerError('InvalidRequest', 'Idempotency-Key must be 1 to 255 visible ASCII characters', [
        { field: 'Idempotency-Key', message: 'must be 1 to 255 visible ASCII characters' },
      ]);
    }
    const cacheKey = `${owner}\u0000${key}`;
    const fingerprint = requestFingerprint(request);
    const existing = this.#cache.get(cacheKey, this.#now());
    if (existing) {
      if (existing.fingerprint !== fingerprint) {
        throw new IssuerError(
          'Conflict',
          'this Idempotency-Key was already used with a different request body: use a new key for a new request',
        );
      }
      const value = await existing.result;
      if (!stillCurrent || (await stillCurrent(value))) return { value, replayed: true };
      if (this.#cache.get(cacheKey, this.#now())?.result === existing.result) this.#cache.delete(cacheKey);
      // A concurrent replay may have begun producing already: share it.
      const other = this.#cache.get(cacheKey, this.#now());
      if (other && other.fingerprint === fingerprint) return { value: await other.result, replayed: true };
    }
    const result = produce();
    this.#cache.set(cacheKey, { fingerprint, result }, this.#ttlMs, this.#now());
    try {
      return { value: await result, replayed: false };
    } catch (error) {
      if (this.#cache.get(cacheKey, this.#now())?.result === result) this.#cache.delete(cacheKey);
      throw error;
    }
  }
}

/** SHA-256 of the request as canonical JSON (sorted keys), so key order and spacing do not matter. */
export function requestFingerprint(request: unknown): string {
  return createHash('sha256').update(canonicalJson(request)).digest('hex');
}

function canonicalJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(',')}]`;
  if (value !== null && typeof value === 'object') {
    const entries = Object.entries(value as Record<string, unknown>)
      .filter(([, v]) => v !== undefined)
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${canonicalJson(v)}`).join(',')}}`;
  }
  return JSON.stringify(value) ?? 'null';
}
