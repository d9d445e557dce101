// The attested join's exchange (ADR 0014), pure: no I/O, no clock. A node proves it holds the TPM
// whose endorsement key (EK) its FlavoredToken names, and only then gets its join secrets:
//
//   1. challenge: the issuer answers an attestation key (AK) with a TPM2 credential (MakeCredential,
//      src/flavor/tpm) whose secret S only the TPM holding that EK can recover, for that AK only,
//      and a ticket saying what S was made for and until when. S is not stored anywhere: it is
//      derived from the ticket under the HMAC key ring, so any issuer replica re-derives it and a
//      challenge costs no write.
//   2. answer: the node sends the ticket and HMAC(S, "proof:" ‖ ticket), never S itself; the issuer
//      re-derives S, checks the proof in constant time, the deadline, and that no proof was
//      recorded since the challenge (durable, on the record), then mints the bootstrap Secret and
//      answers the bootstrap token and flavor token sealed under keys derived from S (AES-256-CTR
//      under a key and IV from PBKDF2 of the encryption key, then HMAC-SHA256 over salt and
//      ciphertext), so a recorded exchange reveals neither.
//
// Every step is something `openssl dgst -sha256` (HMAC built from it over a pipe) and
// `openssl enc -d -aes-256-ctr -pbkdf2 -pass fd:N` do on the node (the node-side script,
// src/tokenissuer/attestation/attest-script.ts), with no key on any command line; nothing but tpm2-tools,
// openssl and curl has to be installed there.
import {
  createCipheriv,
  createDecipheriv,
  createHmac,
  randomBytes as cryptoRandomBytes,
  pbkdf2Sync,
} from 'node:crypto';
import { z } from 'zod';
import type { RandomBytes } from './bootstrap-token.ts';
import { constantTimeEqual, hmacOf } from './flavor-token.ts';
import type { HmacKey, KeyRing } from './keyring.ts';
import { keyRingKeys } from './keyring.ts';
import { Secret } from './secret.ts';

const CREDENTIAL_DOMAIN = 'nodeflavor/v1/attestation-credential';
/** 32 bytes: a TPM2B_DIGEST of the EK's SHA-256 name algorithm holds at most that. */
export const CREDENTIAL_BYTES = 32;
const NONCE_BYTES = 16;
/** openssl enc's salt length (PKCS5_SALT_LEN). */
const SALT_BYTES = 8;
/** A ticket is a few hundred characters; anything much longer is not one of ours. */
const MAX_TICKET_LENGTH = 1024;

/** What a challenge's secret was made for. Public: it travels to the node and back. */
export interface ChallengeTicket {
  v: 1;
  /** The FlavoredToken's uid: a ticket never outlives the record it was made for. */
  record: string;
  /** The key ring key S was derived under. */
  key: string;
  /** When it was issued and until when an answer counts (ms since the epoch). */
  issuedAt: number;
  deadline: number;
  /** Makes every ticket, and so every S, unique. */
  nonce: string;
  /** The AK's TPM Name, hex: S is sealed to this AK only (MakeCredential's objectName). */
  akName: string;
  /**
   * How many proofs the record counted when the challenge was made: an answer counts only while
   * it still does, so of two answers to challenges made before either proof one wins.
   */
  proofs: number;
}

const TicketSchema = z.strictObject({
  v: z.literal(1),
  record: z.string().min(1).max(64),
  key: z.string().regex(/^[0-9a-f]{8}$/),
  issuedAt: z.number().int().nonnegative(),
  deadline: z.number().int().nonnegative(),
  nonce: z.string().regex(/^[A-Za-z0-9_-]{22}$/),
  akName: z.string().regex(/^[0-9a-f]{4,132}$/),
  proofs: z.number().int().nonnegative().max(Number.MAX_SAFE_INTEGER),
});

/** The ticket as text: base64url of JSON in a fixed field order, so its bytes are canonical. */
export function encodeTicket(ticket: ChallengeTicket): string {
  const { v, record, key, issuedAt, deadline, nonce, akName, proofs } = ticket;
  return Buffer.from(JSON.stringify({ v, record, key, issuedAt, deadline, nonce, akName, proofs })).toString(
    'base64url',
  );
}

/** The ticket a node sent back, or undefined when it is not one (malformed, or not canonical). */
export function decodeTicket(text: unknown): ChallengeTicket | undefined {
  if (typeof text !== 'string' || text.length > MAX_TICKET_LENGTH || !/^[A-Za-z0-9_-]+$/.test(text))
    return undefined;
  let parsed: unknown;
  try {
    parsed = JSON.parse(Buffer.from(text, 'base64url').toString('utf8'));
  } catch {
    return undefined;
  }
  const result = TicketSchema.safeParse(parsed);
  if (!result.success) return undefined;
  // Only the canonical encoding counts: the proof covers the ticket's text, and S its fields.
  return encodeTicket(result.data) === text ? result.data : undefined;
}

export function newTicket(
  fields: Omit<ChallengeTicket, 'v' | 'nonce'>,
  randomBytes: RandomBytes = cryptoRandomBytes,
): ChallengeTicket {
  return { v: 1, ...fields, nonce: randomBytes(NONCE_BYTES).toString('base64url') };
}

/**
 * S for a ticket and the EK it was made to: HMAC under the ring key the ticket names, bound to
 * every field of the ticket and to the EK, so a ticket edited by the node derives another S.
 */
export function credentialSecret(key: HmacKey, ticket: ChallengeTicket, ekDigest: string): Secret {
  const mac = hmacOf(key.key, CREDENTIAL_DOMAIN, encodeTicket(ticket), ekDigest);
  return new Secret(mac.subarray(0, CREDENTIAL_BYTES).toString('hex'));
}

/** The ring key a ticket names, if the ring still holds it (a retired-and-dropped key: none). */
export function ticketKey(ring: KeyRing, ticket: ChallengeTicket): HmacKey | undefined {
  return keyRingKeys(ring).find((k) => k.id === ticket.key);
}

/** HMAC-SHA256 under a key given as hex, of ASCII text, as hex: what `openssl dgst -mac HMAC -macopt hexkey:` prints. */
function hmacHex(hexKey: string, text: string): string {
  return createHmac('sha256', Buffer.from(hexKey, 'hex')).update(text, 'ascii').digest('hex');
}

/** The node's proof that it recovered S: HMAC(S, "proof:" ‖ ticket text). */
export function answerProof(secret: Secret, ticketText: string): string {
  return hmacHex(secret.reveal(), `proof:${ticketText}`);
}

/** Does `presented` prove S for this ticket? Constant time; anything malformed is a plain no. */
export function proofHolds(secret: Secret, ticketText: string, presented: unknown): boolean {
  const expected = Buffer.from(answerProof(secret, ticketText), 'ascii');
  const wellFormed = typeof presented === 'string' && /^[0-9a-f]{64}$/.test(presented);
  // A malformed proof is compared against a stand-in, so it costs the same work as a wrong one.
  const candidate = wellFormed ? Buffer.from(presented, 'ascii') : Buffer.alloc(expected.length, 0x30);
  return constantTimeEqual(candidate, expected) && wellFormed;
}

/** The join secrets, sealed: every value fixed-length, the same size for every flavor. */
export interface SealedJoinSecrets {
  /** 8 bytes, hex: the PBKDF2 salt (`openssl enc -pbkdf2` reads it from its "Salted__" header). */
  salt: string;
  /** AES-256-CTR of "<bootstrap token>\n<flavor token>\n" (77 bytes), base64. */
  ciphertext: string;
  /** HMAC-SHA256 under the MAC key of "<salt>:<ciphertext>", hex. */
  mac: string;
}

function sealingKeys(secret: Secret): { encryption: string; mac: string } {
  return { encryption: hmacHex(secret.reveal(), 'encrypt'), mac: hmacHex(secret.reveal(), 'mac') };
}

/**
 * The AES key and IV, as `openssl enc -aes-256-ctr -pbkdf2 -iter 1 -md sha256 -pass fd:N` derives
 * them from the encryption key's hex (a password read from a file descriptor, never from argv,
 * where another user of the machine could read it): PBKDF2-HMAC-SHA256, one iteration (the
 * "password" is a 256-bit key already), 32 + 16 bytes.
 */
function cipherKeys(encryptionHex: string, salt: Buffer): { key: Buffer; iv: Buffer } {
  const derived = pbkdf2Sync(Buffer.from(encryptionHex, 'ascii'), salt, 1, 48, 'sha256');
  return { key: derived.subarray(0, 32), iv: derived.subarray(32) };
}

export function sealJoinSecrets(
  secret: Secret,
  joinSecrets: { bootstrapToken: Secret; flavorToken: Secret },
  randomBytes: RandomBytes = cryptoRandomBytes,
): SealedJoinSecrets {
  const keys = sealingKeys(secret);
  const salt = randomBytes(SALT_BYTES);
  const { key, iv } = cipherKeys(keys.encryption, salt);
  const cipher = createCipheriv('aes-256-ctr', key, iv);
  const plaintext = `${joinSecrets.bootstrapToken.reveal()}\n${joinSecrets.flavorToken.reveal()}\n`;
  const ciphertext = Buffer.concat([cipher.update(plaintext, 'ascii'), cipher.final()]).toString('base64');
  const saltHex = salt.toString('hex');
  return { salt: saltHex, ciphertext, mac: hmacHex(keys.mac, `${saltHex}:${ciphertext}`) };
}

/** What the node does with the answer (the script does the same with openssl); undefined if the MAC fails. */
export function openJoinSecrets(
  secret: Secret,
  sealed: SealedJoinSecrets,
): { bootstrapToken: Secret; flavorToken: Secret } | undefined {
  const keys = sealingKeys(secret);
  const expected = Buffer.from(hmacHex(keys.mac, `${sealed.salt}:${sealed.ciphertext}`), 'ascii');
  if (!constantTimeEqual(Buffer.from(sealed.mac, 'ascii'), expected)) return undefined;
  const { key, iv } = cipherKeys(keys.encryption, Buffer.from(sealed.salt, 'hex'));
  const decipher = createDecipheriv('aes-256-ctr', key, iv);
  const text = Buffer.concat([
    decipher.update(Buffer.from(sealed.ciphertext, 'base64')),
    decipher.final(),
  ]).toString('ascii');
  const [bootstrapToken, flavorToken] = text.split('\n');
  if (bootstrapToken === undefined || flavorToken === undefined) return undefined;
  return { bootstrapToken: new Secret(bootstrapToken), flavorToken: new Secret(flavorToken) };
}
