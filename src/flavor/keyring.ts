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

const HMAC_KEY_LENGTH = 32;
export const KEY_ID_PATTERN = /^[0-9a-f]{8}$/;
const DEFAULT_MAX_RETAINED_KEYS = 3;

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

// Ring edits for the documented rotation (`kubectl flavor keys add|activate|retire`). Adding
// first and activating later lets every replica learn a key before anything is signed with it;
// retiring drops a key once no token that needs it is left. Each edit returns a new ring.

/** An edit that would break the ring (unknown key, retiring the active key): the message says why. */
export class KeyRingEditError extends Error {
  override readonly name = 'KeyRingEditError';
}

function findKey(ring: KeyRing, id: string): HmacKey {
  const key = keyRingKeys(ring).find((k) => k.id === id);
  if (!key) {
    throw new KeyRingEditError(
      `no key '${id}' in the ring (keys: ${keyRingKeys(ring)
        .map((k) => k.id)
        .join(', ')})`,
    );
  }
  return key;
}

/** A new verify-only key (newest first): it verifies at once and signs only once activated. */
export function addKey(
  ring: KeyRing,
  randomBytes: RandomBytes = cryptoRandomBytes,
): { ring: KeyRing; id: string } {
  const takenIds = new Set(keyRingKeys(ring).map((key) => key.id));
  let added = generateHmacKey(randomBytes);
  while (takenIds.has(added.id)) added = generateHmacKey(randomBytes);
  return { ring: { active: ring.active, verifyOnly: [added, ...ring.verifyOnly] }, id: added.id };
}

/**
 * Makes key `id` the active one; the previously active key becomes the newest verify-only key, so
 * tokens it derived keep verifying. Activating the active key changes nothing.
 */
export function activateKey(ring: KeyRing, id: string): KeyRing {
  const key = findKey(ring, id);
  if (key === ring.active) return ring;
  return { active: key, verifyOnly: [ring.active, ...ring.verifyOnly.filter((k) => k !== key)] };
}

/** Drops verify-only key `id`: tokens it derived stop verifying. The active key cannot be retired. */
export function retireKey(ring: KeyRing, id: string): KeyRing {
  const key = findKey(ring, id);
  if (key === ring.active) {
    throw new KeyRingEditError(
      ring.verifyOnly.length === 0
        ? `key '${id}' is the last key of the ring: add and activate another key first`
        : `key '${id}' is the active key: activate another key first`,
    );
  }
  return { active: ring.active, verifyOnly: ring.verifyOnly.filter((k) => k !== key) };
}

interface KeySummary {
  id: string;
  state: 'active' | 'verify-only';
}

/** What may be shown of a ring: ids and states, never key bytes. Active first, then newest first. */
export function describeKeyRing(ring: KeyRing): KeySummary[] {
  return keyRingKeys(ring).map((key) => ({
    id: key.id,
    state: key === ring.active ? 'active' : 'verify-only',
  }));
}
