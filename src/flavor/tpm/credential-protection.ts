// How an EK protects a credential (TPM 2.0 Part 1 §24, "Credential Protection"): the EK's name
// algorithm and symmetric definition decide the seed size, the OAEP hash, the KDFa hash, the AES
// key size and the HMAC; from the seed and the AK's Name come the two keys
//   AES key  = KDFa(nameAlg, seed, "STORAGE",   akName, "", symmetric keyBits)   (§24.4)
//   HMAC key = KDFa(nameAlg, seed, "INTEGRITY", "",     "", digest bits)         (§24.5)
// Shared by makeCredential and its inverse (openCredentialWithSeed), so both derive them alike.
import { type KeyObject, X509Certificate } from 'node:crypto';
import { kdfa } from './kdfa.ts';
import { TPM_ALG, type TpmHash } from './tpm-algorithms.ts';
import { checkObjectName } from './tpm-name.ts';
import type { TpmPublic } from './tpm-public.ts';
import { TpmFormatError } from './tpm-reader.ts';

export interface CredentialProtection {
  /** The EK's public key, which the seed is encrypted to. */
  ekKey: KeyObject;
  nameAlg: TpmHash;
  aesKeyBits: 128 | 192 | 256;
}

/** The TCG EK Credential Profile's low-range RSA template (L-1): RSA-2048, SHA-256, AES-128-CFB. */
const STANDARD_RSA_EK: { modulusBits: number; nameAlg: TpmHash } = {
  modulusBits: 2048,
  nameAlg: { id: TPM_ALG.SHA256, name: 'sha256', digestBytes: 32 },
};

/**
 * The protection an EK gives. From its TPMT_PUBLIC when the verifier has it (the actual name
 * algorithm and symmetric definition). From a bare public key (an SPKI, a certificate's key) the
 * standard L-1 template is assumed, since an SPKI does not say how the TPM will unwrap the seed;
 * only an RSA-2048 key is accepted that way, as any other size cannot be that template.
 */
export function credentialProtection(ek: TpmPublic | KeyObject | X509Certificate): CredentialProtection {
  if (ek instanceof X509Certificate) return credentialProtection(ek.publicKey);
  if (!('publicArea' in ek)) {
    const bits = ek.asymmetricKeyDetails?.modulusLength;
    if (ek.asymmetricKeyType !== 'rsa' || bits !== STANDARD_RSA_EK.modulusBits) {
      throw new TpmFormatError(
        `EK: a ${ek.asymmetricKeyType ?? 'unknown'}${bits ? `-${bits}` : ''} key without its TPMT_PUBLIC: only the standard RSA-2048 EK template can be assumed; give the EK's TPM2B_PUBLIC`,
      );
    }
    return { ekKey: ek, nameAlg: STANDARD_RSA_EK.nameAlg, aesKeyBits: 128 };
  }
  if (ek.type !== 'rsa') {
    throw new TpmFormatError(
      `EK: credentials for an ${ek.type.toUpperCase()} EK are not supported: only RSA`,
    );
  }
  if (!ek.attributes.includes('decrypt')) {
    throw new TpmFormatError('EK: not a decryption key, so no TPM would activate a credential with it');
  }
  const symmetric = ek.symmetric;
  if (symmetric?.algorithm !== 'aes' || symmetric.mode !== 'cfb') {
    const given = symmetric ? `${symmetric.algorithm}-${symmetric.keyBits}-${symmetric.mode}` : 'none';
    throw new TpmFormatError(`EK: symmetric definition ${given}: only AES in CFB mode is supported`);
  }
  if (symmetric.keyBits !== 128 && symmetric.keyBits !== 192 && symmetric.keyBits !== 256) {
    throw new TpmFormatError(`EK: AES key size of ${symmetric.keyBits} bits`);
  }
  return { ekKey: ek.publicKey, nameAlg: ek.nameAlg, aesKeyBits: symmetric.keyBits };
}

export interface CredentialKeys {
  aesKey: Buffer;
  hmacKey: Buffer;
}

export function credentialKeys(
  protection: CredentialProtection,
  seed: Uint8Array,
  akName: Uint8Array,
): CredentialKeys {
  checkObjectName(akName, 'AK Name');
  const { nameAlg } = protection;
  return {
    aesKey: kdfa(nameAlg, seed, 'STORAGE', akName, Buffer.alloc(0), protection.aesKeyBits),
    hmacKey: kdfa(nameAlg, seed, 'INTEGRITY', Buffer.alloc(0), Buffer.alloc(0), nameAlg.digestBytes * 8),
  };
}

/** OAEP's label for a credential's seed (TPM 2.0 Part 1 Annex B.10.4): "IDENTITY" with its NUL. */
export const IDENTITY_LABEL = Buffer.from('IDENTITY\0', 'latin1');

/** The CFB IV is all zeros: each seed (and so each AES key) is used once. */
export function zeroIv(): Buffer {
  return Buffer.alloc(16);
}
