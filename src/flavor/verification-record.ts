// The verification record a flavored Node carries (annotation nodeflavor.io/verified): which
// token verified it, under which FlavorClass, and when. It is the only proof left once the
// token's FlavoredToken is deleted with revocationPolicy Keep, so it must not be forgeable by
// anyone who can write the annotation (a kubelet if the guard were off, an admin's typo, a copy
// from another Node): it carries an HMAC under the key ring over the Node's own UID and every
// field, in a domain of its own (it can never serve as a flavor token, nor one as it).
import { constantTimeEqual, hmacOf } from './flavor-token.ts';
import { type HmacKey, type KeyRing, keyRingKeys } from './keyring.ts';

export const VERIFIED_ANNOTATION = 'nodeflavor.io/verified';

const DOMAIN = 'nodeflavor/verified/v1';
const MAC_PATTERN = /^[A-Za-z0-9_-]{43}$/;

/** What the annotation records (JSON). `mac` binds it to one Node UID under the key ring. */
export interface VerificationRecord {
  tokenID: string;
  flavorClass: string;
  verifiedAt: string;
  mac?: string;
}

function recordMac(key: HmacKey, nodeUid: string, record: VerificationRecord): Buffer {
  return hmacOf(key.key, DOMAIN, nodeUid, record.tokenID, record.flavorClass, record.verifiedAt);
}

/** The record, signed with the active key for this Node UID, as the annotation's value. */
export function signedRecordAnnotation(
  ring: KeyRing,
  nodeUid: string,
  record: Omit<VerificationRecord, 'mac'>,
): string {
  const fields = { tokenID: record.tokenID, flavorClass: record.flavorClass, verifiedAt: record.verifiedAt };
  const mac = recordMac(ring.active, nodeUid, fields).toString('base64url');
  return JSON.stringify({ ...fields, mac });
}

/** Parses the annotation (untrusted text); says nothing about whether it is genuine. */
export function parseVerificationRecord(raw: string | undefined): VerificationRecord | undefined {
  if (!raw) return undefined;
  try {
    const parsed = JSON.parse(raw) as Partial<VerificationRecord>;
    if (
      typeof parsed.tokenID === 'string' &&
      typeof parsed.flavorClass === 'string' &&
      typeof parsed.verifiedAt === 'string'
    ) {
      const record: VerificationRecord = {
        tokenID: parsed.tokenID,
        flavorClass: parsed.flavorClass,
        verifiedAt: parsed.verifiedAt,
      };
      if (typeof parsed.mac === 'string') record.mac = parsed.mac;
      return record;
    }
  } catch {
    // not ours, or mangled: no record
  }
  return undefined;
}

/**
 * Is this record genuine for this Node UID under any key of the ring? Every key is tried with a
 * constant-time comparison (a record is not secret, but the MAC is the proof: no early exit).
 */
export function recordIsGenuine(ring: KeyRing, nodeUid: string, record: VerificationRecord): boolean {
  const presented =
    record.mac !== undefined && MAC_PATTERN.test(record.mac)
      ? Buffer.from(record.mac, 'base64url')
      : Buffer.alloc(32);
  let genuine = false;
  for (const key of keyRingKeys(ring)) {
    if (constantTimeEqual(presented, recordMac(key, nodeUid, record))) genuine = true;
  }
  return genuine && record.mac !== undefined && MAC_PATTERN.test(record.mac);
}
