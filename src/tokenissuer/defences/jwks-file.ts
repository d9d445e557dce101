// The JSON Web Key Set file JWTs are verified against, kept current without a restart. The file
// is usually a mounted ConfigMap or Secret, which the kubelet updates by swapping a symlink: so it
// is re-read by path, periodically (a removed key stops verifying within refreshMs) and on a token
// whose key is not in the set (a newly added key verifies at once), the latter throttled so that
// tokens with made-up key IDs cannot turn into a stream of file reads. A file that cannot be read
// or parsed keeps the last good set; at start-up it is an error.
import { readFileSync } from 'node:fs';
import { createLocalJWKSet, errors, type JSONWebKeySet, type JWTVerifyGetKey } from 'jose';

const DEFAULT_MISS_THROTTLE_MS = 10_000;

interface JwksFileOptions {
  /** The set is re-read when it is older than this. */
  refreshMs: number;
  /** At most one re-read per this long for tokens whose key is unknown. */
  missThrottleMs?: number;
  now?: () => number;
}

export class JwksFile {
  readonly #path: string;
  readonly #refreshMs: number;
  readonly #missThrottleMs: number;
  readonly #now: () => number;
  #text: string;
  #set: JWTVerifyGetKey;
  #readAt: number;
  #missReloadAt = Number.NEGATIVE_INFINITY;

  constructor(path: string, options: JwksFileOptions) {
    this.#path = path;
    this.#refreshMs = options.refreshMs;
    this.#missThrottleMs = options.missThrottleMs ?? DEFAULT_MISS_THROTTLE_MS;
    this.#now = options.now ?? Date.now;
    this.#text = readFileSync(path, 'utf8');
    this.#set = parseJwks(this.#text, path);
    this.#readAt = this.#now();
  }

  /** For jose's jwtVerify. */
  readonly getKey: JWTVerifyGetKey = async (header, token) => {
    if (this.#now() - this.#readAt >= this.#refreshMs) this.#reload();
    try {
      return await this.#set(header, token);
    } catch (error) {
      if (!(error instanceof errors.JWKSNoMatchingKey)) throw error;
      if (this.#now() - this.#missReloadAt < this.#missThrottleMs) throw error;
      this.#missReloadAt = this.#now();
      if (!this.#reload()) throw error;
      return this.#set(header, token);
    }
  };

  /** Re-reads the file; returns whether the set changed. */
  #reload(): boolean {
    this.#readAt = this.#now();
    try {
      const text = readFileSync(this.#path, 'utf8');
      if (text === this.#text) return false;
      this.#set = parseJwks(text, this.#path);
      this.#text = text;
      return true;
    } catch {
      return false; // mid-swap or broken: keep verifying with the last good set
    }
  }
}

function parseJwks(text: string, path: string): JWTVerifyGetKey {
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    throw new Error(`the JWKS file ${path} is not valid JSON`);
  }
  if (typeof parsed !== 'object' || parsed === null || !Array.isArray((parsed as JSONWebKeySet).keys)) {
    throw new Error(`the JWKS file ${path} is not a JSON Web Key Set (no "keys" array)`);
  }
  return createLocalJWKSet(parsed as JSONWebKeySet);
}
