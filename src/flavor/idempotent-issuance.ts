// Issuance under an Idempotency-Key that any replica can repeat (ADR 0005). Everything a retry
// needs is derived from the key ring and the request, or stored on the FlavoredToken record,
// which holds no secret:
//   - the token ID is derived from (caller, Idempotency-Key): a retry on any replica names the
//     same FlavoredToken, and creating it is the one atomic claim (a second create is a 409);
//   - the record carries a mark (key ID and two digests) that says which caller, key and body it
//     was made for, so a replica tells a retry from a reused key or a foreign token;
//   - the bootstrap token's secret is derived from the request, the token ID and the record's UID:
//     any replica re-derives it from the record, and a record made again after a deletion (a new
//     UID) gets another secret, so a revoked secret never comes back.
// Every derivation uses its own key, itself derived from a ring key under this domain, so none can
// be confused with a flavor token or a record MAC made with the same ring key. Pure.
import { base32Encode } from './base32.ts';
import {
  type BootstrapToken,
  type RandomBytes,
  randomString,
  TOKEN_ALPHABET,
  TOKEN_ID_LENGTH,
  TOKEN_SECRET_LENGTH,
} from './bootstrap-token.ts';
import { constantTimeEqual, hmacOf } from './flavor-token.ts';
import type { HmacKey, KeyRing } from './keyring.ts';
import { keyRingKeys } from './keyring.ts';
import { Secret } from './secret.ts';

const DOMAIN = 'nodeflavor/v1/idempotent-issuance';
/** Base32 characters kept of each digest in the mark: 130 bits. */
const DIGEST_CHARS = 26;
const MARK_PATTERN = /^([0-9a-f]{8})\.([a-z2-7]{26})\.([a-z2-7]{26})$/;

/** On the FlavoredToken: which ring key, caller, Idempotency-Key and body it was issued for. */
export const IDEMPOTENCY_ANNOTATION = 'nodeflavor.io/idempotency';
/**
 * Until when (RFC 3339) the record's Idempotency-Key may be replayed (the issuer's idempotency TTL
 * from the request, and a minute of margin). A record deleted before then stays, being deleted,
 * until then (the controller holds its finalizer): a replay finds it and is refused, instead of
 * finding the name free and minting a token under the revoked one's ID.
 */
export const REPLAYABLE_UNTIL_ANNOTATION = 'nodeflavor.io/replayable-until';
/** Margin past the issuer's TTL: the record's creation is a little later than the request's clock. */
export const REPLAY_MARGIN_MS = 60_000;

export interface IdempotentRequest {
  /** The caller's identity (the issuer's owner digest): only it may replay. */
  caller: string;
  idempotencyKey: string;
  /** A digest of the validated request: the same key with another body is refused. */
  requestFingerprint: string;
}

/** A key of its own for each purpose, so that no two derivations share one. */
function purposeKey(key: HmacKey, purpose: string): Buffer {
  return hmacOf(key.key, DOMAIN, 'key', purpose);
}

function mac(key: HmacKey, purpose: string, ...fields: string[]): Buffer {
  return hmacOf(purposeKey(key, purpose), DOMAIN, purpose, ...fields);
}

/** A deterministic byte stream (HMAC in counter mode) standing in for randomBytes. */
function macStream(key: HmacKey, purpose: string, fields: string[]): RandomBytes {
  let counter = 0;
  let buffered = Buffer.alloc(0);
  return (size) => {
    while (buffered.length < size) {
      counter += 1;
      buffered = Buffer.concat([buffered, mac(key, purpose, ...fields, String(counter))]);
    }
    const out = buffered.subarray(0, size);
    buffered = buffered.subarray(size);
    return out;
  };
}

const digest = (bytes: Buffer) => base32Encode(bytes).slice(0, DIGEST_CHARS);

/** The token ID a request derives under `key`: the same on every replica, unknowable without the key. */
export function idempotentTokenId(key: HmacKey, request: IdempotentRequest): string {
  const bytes = macStream(key, 'token-id', [request.caller, request.idempotencyKey]);
  return randomString(TOKEN_ALPHABET, TOKEN_ID_LENGTH, bytes);
}

/**
 * The bootstrap token of a record: the derived ID and a secret derived from the request, the ID
 * and the record's UID (so a record made again after a deletion never brings an old secret back).
 */
export function idempotentBootstrapToken(
  key: HmacKey,
  request: IdempotentRequest,
  tokenId: string,
  recordUid: string,
): BootstrapToken {
  const bytes = macStream(key, 'token-secret', [
    request.caller,
    request.idempotencyKey,
    request.requestFingerprint,
    tokenId,
    recordUid,
  ]);
  return { id: tokenId, secret: new Secret(randomString(TOKEN_ALPHABET, TOKEN_SECRET_LENGTH, bytes)) };
}

/** The IDEMPOTENCY_ANNOTATION value for a request issued under `key`: no secret, no request data. */
export function idempotencyMark(key: HmacKey, request: IdempotentRequest): string {
  const keyDigest = digest(mac(key, 'mark-key', request.caller, request.idempotencyKey));
  const requestDigest = digest(
    mac(key, 'mark-request', request.caller, request.idempotencyKey, request.requestFingerprint),
  );
  return `${key.id}.${keyDigest}.${requestDigest}`;
}

type MarkMatch =
  /** A retry: the same caller, key and body; `key` is the ring key it was issued under. */
  | { kind: 'same-request'; key: HmacKey }
  /** The same caller and key with another body: refused, as a reused key. */
  | { kind: 'other-request' }
  /** Not this caller's key (another token, or one whose ring key is gone): not a retry. */
  | { kind: 'foreign' };

/** What a record's mark says about `request` (constant-time digest comparisons). */
export function matchIdempotencyMark(
  mark: string | undefined,
  ring: KeyRing,
  request: IdempotentRequest,
): MarkMatch {
  const parsed = mark === undefined ? null : MARK_PATTERN.exec(mark);
  if (!parsed) return { kind: 'foreign' };
  const key = keyRingKeys(ring).find((k) => k.id === parsed[1]);
  if (!key) return { kind: 'foreign' };
  const [, , keyDigest = '', requestDigest = ''] = parsed;
  const expected = idempotencyMark(key, request).split('.');
  const same = (a: string, b: string | undefined) =>
    constantTimeEqual(Buffer.from(a, 'ascii'), Buffer.from(b ?? '', 'ascii'));
  if (!same(keyDigest, expected[1])) return { kind: 'foreign' };
  return same(requestDigest, expected[2]) ? { kind: 'same-request', key } : { kind: 'other-request' };
}
