// TPM2_MakeCredential done by the verifier, without a TPM (TPM 2.0 Part 1 §24; Part 3 §12.6):
// a credential only the TPM holding the EK can recover, and only while the AK with that Name is
// loaded in it. That is the proof a node gives that its AK lives beside its EK.
//
//   seed           random, nameAlg's digest size (as tpm2_makecredential -T none; go-tpm uses 16)
//   encryptedSecret = RSA-OAEP(EK, hash = nameAlg, label = "IDENTITY\0", seed)      TPM2B_ENCRYPTED_SECRET
//   encIdentity    = AES-CFB(KDFa "STORAGE", iv 0, u16 size ‖ credential)           (credential as TPM2B_DIGEST)
//   outerHmac      = HMAC(KDFa "INTEGRITY", encIdentity ‖ akName)
//   idObject       = TPM2B( TPM2B(outerHmac) ‖ encIdentity )                          TPM2B_ID_OBJECT
//
// Checked end to end against tpm2_activatecredential on swtpm (test/e2e/tpm-credential.test.ts);
// google/go-tpm's tpm2/credactivation is the same construction.
import {
  constants,
  createCipheriv,
  createHmac,
  type KeyObject,
  publicEncrypt,
  randomBytes,
} from 'node:crypto';
import {
  type CredentialProtection,
  credentialKeys,
  credentialProtection,
  IDENTITY_LABEL,
  zeroIv,
} from './credential-protection.ts';
import type { TpmPublic } from './tpm-public.ts';
import { sizedBytes } from './tpm-reader.ts';

export interface MakeCredentialInput {
  /** The EK: its parsed TPM2B_PUBLIC (preferred), or its public key alone (standard template assumed). */
  ekPublic: TpmPublic | KeyObject;
  /** The AK's Name (nameAlg ‖ digest): compute it from the AK's public area, do not take it on trust. */
  akName: Uint8Array;
  /** What the TPM will give back: 1 to nameAlg-digest-size bytes (32 for a SHA-256 EK). */
  credential: Uint8Array;
  /** For tests only: the seed instead of a random one (exactly nameAlg's digest size). */
  seed?: Uint8Array;
}

export interface MadeCredential {
  /** TPM2B_ID_OBJECT: size ‖ TPM2B_DIGEST(outerHmac) ‖ encIdentity. */
  idObject: Buffer;
  /** TPM2B_ENCRYPTED_SECRET: size ‖ the OAEP-encrypted seed. */
  encryptedSecret: Buffer;
}

export function makeCredential(input: MakeCredentialInput): MadeCredential {
  const protection = credentialProtection(input.ekPublic);
  const { nameAlg } = protection;
  const { credential, akName } = input;
  if (credential.length < 1 || credential.length > nameAlg.digestBytes) {
    throw new RangeError(
      `a credential for a ${nameAlg.name} EK is 1 to ${nameAlg.digestBytes} bytes, not ${credential.length}`,
    );
  }
  const seed = input.seed ?? randomBytes(nameAlg.digestBytes);
  if (seed.length !== nameAlg.digestBytes) {
    throw new RangeError(
      `the seed for a ${nameAlg.name} EK is ${nameAlg.digestBytes} bytes, not ${seed.length}`,
    );
  }
  const { aesKey, hmacKey } = credentialKeys(protection, seed, akName);
  const cipher = createCipheriv(`aes-${protection.aesKeyBits}-cfb`, aesKey, zeroIv());
  const encIdentity = Buffer.concat([cipher.update(sizedBytes(credential)), cipher.final()]);
  const outerHmac = createHmac(nameAlg.name, hmacKey).update(encIdentity).update(akName).digest();
  return {
    idObject: sizedBytes(Buffer.concat([sizedBytes(outerHmac), encIdentity])),
    encryptedSecret: sizedBytes(encryptSeed(protection, seed)),
  };
}

function encryptSeed(protection: CredentialProtection, seed: Uint8Array): Buffer {
  return publicEncrypt(
    {
      key: protection.ekKey,
      padding: constants.RSA_PKCS1_OAEP_PADDING,
      oaepHash: protection.nameAlg.name,
      oaepLabel: IDENTITY_LABEL,
    },
    seed,
  );
}
