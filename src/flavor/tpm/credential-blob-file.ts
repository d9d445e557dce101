// The file `tpm2_activatecredential -i cred.blob` reads and `tpm2_makecredential -o` writes
// (tpm2-tools 5.4, tools/tpm2_makecredential.c write_cred_and_secret; checked against a file
// written by `tpm2_makecredential -T none`, test/unit/fixtures/tpm/cred.blob):
//
//   0xBADCC0DE (u32, tpm2-tools' file magic) ‖ 0x00000001 (u32, version)
//   ‖ TPM2B_ID_OBJECT (u16 size ‖ bytes) ‖ TPM2B_ENCRYPTED_SECRET (u16 size ‖ bytes)
//
// For a SHA-256 RSA-2048 EK and a 32-byte credential: 8 + (2 + 68) + (2 + 256) = 336 bytes.
import type { MadeCredential } from './make-credential.ts';
import { sizedBytes, TpmFormatError, TpmReader, u32Bytes } from './tpm-reader.ts';

export const TPM2_TOOLS_FILE_MAGIC = 0xbadcc0de;
const CREDENTIAL_FILE_VERSION = 1;

/** `made`'s two TPM2Bs as the cred.blob file tpm2_activatecredential reads. */
export function credentialBlobFile(made: MadeCredential): Buffer {
  return Buffer.concat([
    u32Bytes(TPM2_TOOLS_FILE_MAGIC),
    u32Bytes(CREDENTIAL_FILE_VERSION),
    made.idObject,
    made.encryptedSecret,
  ]);
}

/** The two TPM2Bs (each with its size) from a cred.blob file. */
export function parseCredentialBlobFile(bytes: Uint8Array): MadeCredential {
  const reader = new TpmReader(bytes, 'credential blob file');
  const magic = reader.u32('magic');
  if (magic !== TPM2_TOOLS_FILE_MAGIC) {
    throw new TpmFormatError(`credential blob file: magic 0x${magic.toString(16)}, not 0xbadcc0de`);
  }
  const version = reader.u32('version');
  if (version !== CREDENTIAL_FILE_VERSION) {
    throw new TpmFormatError(`credential blob file: version ${version}, not ${CREDENTIAL_FILE_VERSION}`);
  }
  const idObject = reader.sized('TPM2B_ID_OBJECT');
  const encryptedSecret = reader.sized('TPM2B_ENCRYPTED_SECRET');
  reader.end();
  return { idObject: sizedBytes(idObject), encryptedSecret: sizedBytes(encryptedSecret) };
}
