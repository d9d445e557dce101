// Flavor tokens bind a flavor to a bootstrap token ID:
//   token = base32(HMAC-SHA256(key, "nodeflavor/v1" ‖ len(tokenId) ‖ tokenId ‖ len(flavor) ‖ flavor))
// The node carries it as a label; only the holder of the key can mint one, and a token copied
// from another node is useless because the controller recomputes it for the token ID that the
// node's own CSR proves. Every token has the same length and alphabet whatever the flavor.
import { type BinaryLike, createHmac, type KeyObject, timingSafeEqual } from 'node:crypto';
import { base32Encode } from './base32.ts';
import type { HmacKey, KeyRing } from './keyring.ts';
import { keyRingKeys } from './keyring.ts';
import { Secret } from './secret.ts';

export const FLAVOR_TOKEN_LENGTH = 52;
export const FLAVOR_TOKEN_PATTERN = /^[a-z2-7]{52}$/;

/** Domain separation: an HMAC computed for any other purpose with the same key never collides. */
const DOMAIN = 'nodeflavor/v1';

/** Compared against when the presented token is malformed, so that case costs the same work. */
const MALFORMED_STAND_IN = Buffer.from('a'.repeat(FLAVOR_TOKEN_LENGTH), 'ascii');

function lengthPrefixed(text: string): Buffer {
  const bytes = Buffer.from(text, 'utf8');
  const length = Buffer.alloc(4);
  length.writeUInt32BE(bytes.length);
  return Buffer.concat([length, bytes]);
}

/**
 * An HMAC input: a domain, then each field with a 4-byte big-endian length, so no two field
 * lists share an encoding (("ab", "c") and ("a", "bc") differ) and no two purposes collide.
 */
export function hmacMessage(domain: string, ...fields: string[]): Buffer {
  return Buffer.concat([Buffer.from(domain, 'utf8'), ...fields.map(lengthPrefixed)]);
}

/**
 * HMAC-SHA256 under `key` of hmacMessage(domain, ...fields), fed to the HMAC piece by piece (the
 * same bytes, so the same MAC) instead of built as one buffer first: a restart checks and
 * re-signs several records per Node, and the copies were garbage the collector paid for.
 */
export function hmacOf(key: BinaryLike | KeyObject, domain: string, ...fields: string[]): Buffer {
  const hmac = createHmac('sha256', key).update(domain, 'utf8');
  const length = Buffer.allocUnsafe(4);
  for (const field of fields) {
    length.writeUInt32BE(Buffer.byteLength(field, 'utf8'));
    hmac.update(length).update(field, 'utf8');
  }
  return hmac.digest();
}

export function flavorTokenMessage(tokenId: string, flavor: string): Buffer {
  return hmacMessage(DOMAIN, tokenId, flavor);
}

export function deriveFlavorToken(key: HmacKey, tokenId: string, flavor: string): Secret {
  const mac = hmacOf(key.key, DOMAIN, tokenId, flavor);
  return new Secret(base32Encode(mac));
}

/** Constant-time equality of two byte strings; different lengths are unequal (and not compared). */
export function constantTimeEqual(a: Buffer, b: Buffer): boolean {
  return a.length === b.length && timingSafeEqual(a, b);
}

interface FlavorTokenVerdict {
  valid: boolean;
  /** The key that matched, when valid: lets callers count tokens still relying on retired keys. */
  keyId?: string;
}

/**
 * Does `presented` equal the token for (tokenId, flavor) under any key of the ring?
 * Timing reveals neither how much of the token was right nor which key matched: every key is
 * tried with a constant-time comparison, without stopping at a match, and a malformed or
 * missing token is compared against a stand-in of the right length before being refused.
 */
export function verifyFlavorToken(
  ring: KeyRing,
  tokenId: string,
  flavor: string,
  presented: string | undefined,
): FlavorTokenVerdict {
  const wellFormed = typeof presented === 'string' && FLAVOR_TOKEN_PATTERN.test(presented);
  const candidate = wellFormed ? Buffer.from(presented, 'ascii') : MALFORMED_STAND_IN;
  let matchedKeyId: string | undefined;
  for (const key of keyRingKeys(ring)) {
    const expected = Buffer.from(deriveFlavorToken(key, tokenId, flavor).reveal(), 'ascii');
    if (constantTimeEqual(candidate, expected) && matchedKeyId === undefined) matchedKeyId = key.id;
  }
  if (!wellFormed || matchedKeyId === undefined) return { valid: false };
  return { valid: true, keyId: matchedKeyId };
}
