// Parsing a key's public area as tpm2-tools writes it: `tpm2_createek -u ek.pub`,
// `tpm2_createak -u ak.pub` and `tpm2_readpublic -o` write a TPM2B_PUBLIC (u16 size, then the
// TPMT_PUBLIC; tpm2-tools' default "tss" output format). TPMT_PUBLIC (TPM 2.0 Part 2 §12.2.4):
//
//   type u16 | nameAlg u16 | objectAttributes u32 | authPolicy TPM2B
//   | parameters:  RSA: symmetric | scheme | keyBits u16 | exponent u32
//                  ECC: symmetric | scheme | curveID u16 | kdf
//   | unique:      RSA: modulus TPM2B      ECC: x TPM2B | y TPM2B
//
// where symmetric is alg u16 (+ keyBits u16, mode u16 unless TPM_ALG_NULL) and a scheme is
// alg u16 (+ hashAlg u16 unless NULL or RSAES; ECDAA adds a u16 count). RSA and ECC keys only:
// EKs and AKs are one or the other; a keyed-hash or symmetric object is refused by name.
import { createPublicKey, type KeyObject } from 'node:crypto';
import {
  algorithmName,
  attributeNames,
  ECC_CURVES,
  hashById,
  type ObjectAttributeName,
  TPM_ALG,
  type TpmHash,
} from './tpm-algorithms.ts';
import { tpmName } from './tpm-name.ts';
import { TpmFormatError, TpmReader } from './tpm-reader.ts';

export interface SymmetricDefinition {
  algorithm: string;
  keyBits: number;
  mode: string;
}

export interface KeyScheme {
  algorithm: string;
  hashAlg?: string;
}

interface TpmPublicCommon {
  nameAlg: TpmHash;
  /** TPMA_OBJECT as the u32 it is; `attributes` names its known bits. */
  objectAttributes: number;
  attributes: ObjectAttributeName[];
  authPolicy: Buffer;
  /** The protection a restricted decryption key (an EK) gives its children; null for a signing key. */
  symmetric: SymmetricDefinition | null;
  scheme: KeyScheme | null;
  publicKey: KeyObject;
  /** The TPMT_PUBLIC bytes exactly as received: what the Name hashes. */
  publicArea: Buffer;
  /** nameAlg ‖ H(publicArea): computed here, never taken from the sender. */
  name: Buffer;
}

export interface RsaTpmPublic extends TpmPublicCommon {
  type: 'rsa';
  rsa: {
    keyBits: number;
    /** The effective exponent: the TPM's 0 means the default, 65537. */
    exponent: number;
    modulus: Buffer;
  };
}

export interface EccTpmPublic extends TpmPublicCommon {
  type: 'ecc';
  ecc: {
    curve: 'P-256' | 'P-384' | 'P-521';
    kdf: KeyScheme | null;
    x: Buffer;
    y: Buffer;
  };
}

export type TpmPublic = RsaTpmPublic | EccTpmPublic;

/** A TPM2B_PUBLIC: what `tpm2_createek -u` / `tpm2_createak -u` write. */
export function parseTpm2bPublic(bytes: Uint8Array): TpmPublic {
  const reader = new TpmReader(bytes, 'TPM2B_PUBLIC');
  const publicArea = reader.sized('publicArea');
  reader.end();
  return parseTpmtPublic(publicArea);
}

/** A bare TPMT_PUBLIC (a TPM2B_PUBLIC without its size). */
export function parseTpmtPublic(bytes: Uint8Array): TpmPublic {
  const reader = new TpmReader(bytes, 'TPMT_PUBLIC');
  const type = reader.u16('type');
  if (type !== TPM_ALG.RSA && type !== TPM_ALG.ECC) {
    throw new TpmFormatError(
      `TPMT_PUBLIC: object type ${algorithmName(type)} is not supported: only RSA and ECC keys`,
    );
  }
  const nameAlgId = reader.u16('nameAlg');
  const nameAlg = hashById(nameAlgId);
  if (!nameAlg)
    throw new TpmFormatError(`TPMT_PUBLIC: unsupported name algorithm ${algorithmName(nameAlgId)}`);
  const objectAttributes = reader.u32('objectAttributes');
  const authPolicy = reader.sized('authPolicy');
  const symmetric = readSymmetric(reader);
  const publicArea = Buffer.from(bytes);
  const common = {
    nameAlg,
    objectAttributes,
    attributes: attributeNames(objectAttributes),
    authPolicy,
    symmetric,
    publicArea,
    name: tpmName(publicArea, nameAlg),
  };
  if (type === TPM_ALG.RSA) {
    const scheme = readScheme(reader, 'scheme');
    const keyBits = reader.u16('keyBits');
    const rawExponent = reader.u32('exponent');
    const modulus = reader.sized('unique (RSA modulus)');
    reader.end();
    if (modulus.length === 0 || modulus.length * 8 !== keyBits) {
      throw new TpmFormatError(`TPMT_PUBLIC: an RSA-${keyBits} modulus of ${modulus.length} bytes`);
    }
    const exponent = rawExponent === 0 ? 65537 : rawExponent;
    const publicKey = createPublicKey({
      key: { kty: 'RSA', n: modulus.toString('base64url'), e: unsignedBytes(exponent).toString('base64url') },
      format: 'jwk',
    });
    return { ...common, type: 'rsa', scheme, publicKey, rsa: { keyBits, exponent, modulus } };
  }
  const scheme = readScheme(reader, 'scheme');
  const curveId = reader.u16('curveID');
  const curve = ECC_CURVES.get(curveId);
  if (!curve)
    throw new TpmFormatError(`TPMT_PUBLIC: unsupported ECC curve 0x${curveId.toString(16).padStart(4, '0')}`);
  const kdf = readScheme(reader, 'kdf');
  const x = reader.sized('unique (ECC x)');
  const y = reader.sized('unique (ECC y)');
  reader.end();
  if (x.length > curve.coordinateBytes || y.length > curve.coordinateBytes) {
    throw new TpmFormatError(
      `TPMT_PUBLIC: an ${curve.jwk} point with ${x.length}/${y.length}-byte coordinates`,
    );
  }
  let publicKey: KeyObject;
  try {
    publicKey = createPublicKey({
      key: {
        kty: 'EC',
        crv: curve.jwk,
        x: leftPad(x, curve.coordinateBytes).toString('base64url'),
        y: leftPad(y, curve.coordinateBytes).toString('base64url'),
      },
      format: 'jwk',
    });
  } catch (error) {
    throw new TpmFormatError(
      `TPMT_PUBLIC: the ${curve.jwk} point is not a public key (${(error as Error).message})`,
    );
  }
  return { ...common, type: 'ecc', scheme, publicKey, ecc: { curve: curve.jwk, kdf, x, y } };
}

/** TPMT_SYM_DEF_OBJECT: TPM_ALG_NULL alone, or algorithm, keyBits and mode. */
function readSymmetric(reader: TpmReader): SymmetricDefinition | null {
  const algorithm = reader.u16('symmetric.algorithm');
  if (algorithm === TPM_ALG.NULL) return null;
  const keyBits = reader.u16('symmetric.keyBits');
  const mode = reader.u16('symmetric.mode');
  return { algorithm: algorithmName(algorithm), keyBits, mode: algorithmName(mode) };
}

/** TPMT_RSA_SCHEME / TPMT_ECC_SCHEME / TPMT_KDF_SCHEME: the algorithm, then its details. */
function readScheme(reader: TpmReader, field: string): KeyScheme | null {
  const algorithm = reader.u16(`${field}.scheme`);
  if (algorithm === TPM_ALG.NULL) return null;
  if (algorithm === TPM_ALG.RSAES) return { algorithm: algorithmName(algorithm) }; // TPMS_EMPTY details
  const hashAlg = algorithmName(reader.u16(`${field}.hashAlg`));
  if (algorithm === TPM_ALG.ECDAA) reader.u16(`${field}.count`);
  return { algorithm: algorithmName(algorithm), hashAlg };
}

function unsignedBytes(value: number): Buffer {
  const bytes = Buffer.alloc(4);
  bytes.writeUInt32BE(value);
  let start = 0;
  while (start < 3 && bytes[start] === 0) start++;
  return bytes.subarray(start);
}

function leftPad(bytes: Buffer, length: number): Buffer {
  return bytes.length === length ? bytes : Buffer.concat([Buffer.alloc(length - bytes.length), bytes]);
}
