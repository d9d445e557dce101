// The TPM 2.0 numbers this package reads (TPM 2.0 Part 2, "Structures": TPM_ALG_ID §6.3,
// TPM_ECC_CURVE §6.4, TPMA_OBJECT §8.3). Only what an EK or AK public area carries; an unknown
// number is reported by its hex value rather than guessed at.

export const TPM_ALG = {
  RSA: 0x0001,
  SHA1: 0x0004,
  AES: 0x0006,
  SHA256: 0x000b,
  SHA384: 0x000c,
  SHA512: 0x000d,
  NULL: 0x0010,
  RSASSA: 0x0014,
  RSAES: 0x0015,
  RSAPSS: 0x0016,
  OAEP: 0x0017,
  ECDSA: 0x0018,
  ECDH: 0x0019,
  ECDAA: 0x001a,
  SM2: 0x001b,
  ECSCHNORR: 0x001c,
  ECMQV: 0x001d,
  KEYEDHASH: 0x0008,
  SYMCIPHER: 0x0025,
  ECC: 0x0023,
  CFB: 0x0043,
} as const;

const ALGORITHM_NAMES: ReadonlyMap<number, string> = new Map(
  Object.entries(TPM_ALG).map(([name, id]) => [id, name.toLowerCase()]),
);

/** "sha256", "aes", "cfb"… or "0x1234" for a number this package does not know. */
export function algorithmName(id: number): string {
  return ALGORITHM_NAMES.get(id) ?? `0x${id.toString(16).padStart(4, '0')}`;
}

/** A hash a TPM names objects with, as node:crypto calls it. */
export interface TpmHash {
  id: number;
  name: 'sha1' | 'sha256' | 'sha384' | 'sha512';
  digestBytes: number;
}

const HASHES: readonly TpmHash[] = [
  { id: TPM_ALG.SHA1, name: 'sha1', digestBytes: 20 },
  { id: TPM_ALG.SHA256, name: 'sha256', digestBytes: 32 },
  { id: TPM_ALG.SHA384, name: 'sha384', digestBytes: 48 },
  { id: TPM_ALG.SHA512, name: 'sha512', digestBytes: 64 },
];

export function hashById(id: number): TpmHash | undefined {
  return HASHES.find((hash) => hash.id === id);
}

/** TPM_ECC_CURVE values of the NIST curves, by their JWK name (what node:crypto imports). */
export const ECC_CURVES: ReadonlyMap<number, { jwk: 'P-256' | 'P-384' | 'P-521'; coordinateBytes: number }> =
  new Map([
    [0x0003, { jwk: 'P-256', coordinateBytes: 32 }],
    [0x0004, { jwk: 'P-384', coordinateBytes: 48 }],
    [0x0005, { jwk: 'P-521', coordinateBytes: 66 }],
  ]);

/** TPMA_OBJECT bits, by the names the specification (and tpm2_print) uses. */
export const OBJECT_ATTRIBUTE = {
  fixedTPM: 0x00000002,
  stClear: 0x00000004,
  fixedParent: 0x00000010,
  sensitiveDataOrigin: 0x00000020,
  userWithAuth: 0x00000040,
  adminWithPolicy: 0x00000080,
  noDA: 0x00000400,
  encryptedDuplication: 0x00000800,
  restricted: 0x00010000,
  decrypt: 0x00020000,
  sign: 0x00040000,
} as const;

export type ObjectAttributeName = keyof typeof OBJECT_ATTRIBUTE;

export function hasAttribute(objectAttributes: number, name: ObjectAttributeName): boolean {
  return (objectAttributes & OBJECT_ATTRIBUTE[name]) !== 0;
}

/** The set bits by name, in bit order; bits without a name here are left out. */
export function attributeNames(objectAttributes: number): ObjectAttributeName[] {
  return (Object.keys(OBJECT_ATTRIBUTE) as ObjectAttributeName[]).filter((name) =>
    hasAttribute(objectAttributes, name),
  );
}
