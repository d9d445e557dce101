// The HMAC keys that derive flavor tokens. One key is active (derives new tokens); a few retired
// keys stay verify-only so tokens issued before a rotation still verify until they expire.
// Persisted as the `data` of a Kubernetes Secret (values base64, as in Secret.data):
//   active        base64(<key id>)
//   key.<key id>  base64(<32 raw key bytes>)          one entry per key, active and verify-only
//   verifyOnly    base64(<id>,<id>,...)                verify-only ids, newest first (optional)
// `verifyOnly` records the retirement order, which decides which key a rotation drops; without it
// (a hand-made Secret) the verify-only keys are the other `key.*` entries, sorted by id.
import { randomBytes as cryptoRandomBytes } from 'node:crypto';
import type { RandomBytes } from './bootstrap-token.ts';

export const HMAC_KEY_LENGTH = 32;
export const KEY_ID_PATTERN = /^[0-9a-f]{8}$/;
export const DEFAULT_MAX_RETAINED_KEYS = 3;

const ACTIVE_ENTRY = 'active';
const VERIFY_ONLY_ENTRY = 'verifyOnly';
const KEY_ENTRY_PREFIX = 'key.';

/** An HMAC-SHA256 key. `key` is secret: never log, print or put it in an error. */
export interface HmacKey {
  id: string;
  key: Buffer;
}

export interface KeyRing {
  active: HmacKey;
  /** Retired keys, newest first: they verify tokens but never derive new ones. */
  verifyOnly: HmacKey[];
}

export function generateHmacKey(randomBytes: RandomBytes = cryptoRandomBytes): HmacKey {
  return { id: randomBytes(4).toString('hex'), key: randomBytes(HMAC_KEY_LENGTH) };
}

export function newKeyRing(randomBytes: RandomBytes = cryptoRandomBytes): KeyRing {
  return { active: generateHmacKey(randomBytes), verifyOnly: [] };
}

/** All keys that may verify a token: the active one first, then the verify-only ones. */
export function keyRingKeys(ring: KeyRing): HmacKey[] {
  return [ring.active, ...ring.verifyOnly];
}

/**
 * A new active key; the old active key becomes the newest verify-only key, and only the
 * `maxRetained` newest verify-only keys are kept. Tokens derived with a dropped key stop verifying.
 */
export function rotateKeyRing(
  ring: KeyRing,
  maxRetained: number = DEFAULT_MAX_RETAINED_KEYS,
  randomBytes: RandomBytes = cryptoRandomBytes,
): KeyRing {
  if (!Number.isSafeInteger(maxRetained) || maxRetained < 0) {
    throw new Error(`rotateKeyRing: maxRetained must be a non-negative integer, got ${maxRetained}`);
  }
  const verifyOnly = [ring.active, ...ring.verifyOnly].slice(0, maxRetained);
  const takenIds = new Set(keyRingKeys(ring).map((key) => key.id));
  let active = generateHmacKey(randomBytes);
  // Key ids are 32 random bits: a clash is unlikely but would make two keys share a Secret entry.
  while (takenIds.has(active.id)) active = generateHmacKey(randomBytes);
  return { active, verifyOnly };
}

function toBase64(text: string | Buffer): string {
  return Buffer.from(text).toString('base64');
}

export function keyRingToSecretData(ring: KeyRing): Record<string, string> {
  const data: Record<string, string> = {
    [ACTIVE_ENTRY]: toBase64(ring.active.id),
    [VERIFY_ONLY_ENTRY]: toBase64(ring.verifyOnly.map((key) => key.id).join(',')),
  };
  for (const key of keyRingKeys(ring)) data[KEY_ENTRY_PREFIX + key.id] = key.key.toString('base64');
  return data;
}

const BASE64_PATTERN = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/;

/** Strict base64: Buffer.from(..., 'base64') silently skips junk, which would hide a corrupt key. */
function fromBase64(value: string, entry: string): Buffer {
  if (!BASE64_PATTERN.test(value)) {
    throw new Error(`HMAC key Secret: entry '${entry}' is not valid base64`);
  }
  return Buffer.from(value, 'base64');
}

function parseKeyId(id: string, where: string): string {
  if (!KEY_ID_PATTERN.test(id)) {
    throw new Error(`HMAC key Secret: ${where} is not a key id (expected 8 lowercase hex characters)`);
  }
  return id;
}

/** Parses and checks the Secret data written by `keyRingToSecretData`. Errors name the entry, never a key. */
export function keyRingFromSecretData(data: Record<string, string>): KeyRing {
  const keys = new Map<string, HmacKey>();
  for (const [entry, value] of Object.entries(data)) {
    if (entry === ACTIVE_ENTRY || entry === VERIFY_ONLY_ENTRY) continue;
    if (!entry.startsWith(KEY_ENTRY_PREFIX)) {
      throw new Error(
        `HMAC key Secret: unexpected entry '${entry}' (allowed: '${ACTIVE_ENTRY}', '${VERIFY_ONLY_ENTRY}', '${KEY_ENTRY_PREFIX}<id>')`,
      );
    }
    const id = parseKeyId(entry.slice(KEY_ENTRY_PREFIX.length), `entry '${entry}'`);
    const key = fromBase64(value, entry);
    if (key.length !== HMAC_KEY_LENGTH) {
      throw new Error(
        `HMAC key Secret: entry '${entry}' holds ${key.length} bytes, expected ${HMAC_KEY_LENGTH}`,
      );
    }
    keys.set(id, { id, key });
  }

  const activeValue = data[ACTIVE_ENTRY];
  if (activeValue === undefined) {
    throw new Error(`HMAC key Secret: entry '${ACTIVE_ENTRY}' is missing: it must name the active key id`);
  }
  const activeId = parseKeyId(fromBase64(activeValue, ACTIVE_ENTRY).toString('utf8'), `'${ACTIVE_ENTRY}'`);
  const active = keys.get(activeId);
  if (!active) {
    throw new Error(
      `HMAC key Secret: the active key '${activeId}' has no entry '${KEY_ENTRY_PREFIX}${activeId}'`,
    );
  }
  keys.delete(activeId);

  const verifyOnlyValue = data[VERIFY_ONLY_ENTRY];
  if (verifyOnlyValue === undefined) {
    const verifyOnly = [...keys.values()].sort((a, b) => (a.id < b.id ? -1 : 1));
    return { active, verifyOnly };
  }
  const listed = fromBase64(verifyOnlyValue, VERIFY_ONLY_ENTRY).toString('utf8');
  const verifyOnly: HmacKey[] = [];
  for (const item of listed === '' ? [] : listed.split(',')) {
    const id = parseKeyId(item, `an id in '${VERIFY_ONLY_ENTRY}'`);
    const key = keys.get(id);
    if (!key) {
      const why =
        id === activeId
          ? 'the active key'
          : verifyOnly.some((k) => k.id === id)
            ? 'a key listed twice'
            : `a key without an entry '${KEY_ENTRY_PREFIX}${id}'`;
      throw new Error(`HMAC key Secret: '${VERIFY_ONLY_ENTRY}' lists '${id}', ${why}`);
    }
    verifyOnly.push(key);
    keys.delete(id);
  }
  const unlisted = [...keys.keys()];
  if (unlisted.length > 0) {
    throw new Error(
      `HMAC key Secret: ${unlisted.map((id) => `'${KEY_ENTRY_PREFIX}${id}'`).join(', ')} neither active nor listed in '${VERIFY_ONLY_ENTRY}'`,
    );
  }
  return { active, verifyOnly };
}
