// A Map with a size bound and per-entry expiry, oldest entries evicted first. Small on purpose:
// the issuer's caches (idempotent answers, review results) need nothing more, and a bound keeps a
// flood of distinct keys from growing memory without limit.

export class BoundedCache<K, V> {
  readonly #entries = new Map<K, { value: V; expiresAt: number }>();
  readonly #maxEntries: number;

  constructor(maxEntries: number) {
    this.#maxEntries = maxEntries;
  }

  get size(): number {
    return this.#entries.size;
  }

  get(key: K, now: number): V | undefined {
    const entry = this.#entries.get(key);
    if (!entry) return undefined;
    if (entry.expiresAt <= now) {
      this.#entries.delete(key);
      return undefined;
    }
    return entry.value;
  }

  set(key: K, value: V, ttlMs: number, now: number): void {
    this.#entries.delete(key); // re-inserting moves the key to the newest end
    this.#entries.set(key, { value, expiresAt: now + ttlMs });
    this.#evict(now);
  }

  delete(key: K): void {
    this.#entries.delete(key);
  }

  #evict(now: number): void {
    if (this.#entries.size <= this.#maxEntries) return;
    for (const [key, entry] of this.#entries) {
      if (entry.expiresAt <= now) this.#entries.delete(key);
    }
    // Map iteration is insertion order: the first keys are the oldest.
    for (const key of this.#entries.keys()) {
      if (this.#entries.size <= this.#maxEntries) break;
      this.#entries.delete(key);
    }
  }
}
