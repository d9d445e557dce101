// An object's TPM Name (TPM 2.0 Part 1 §16): nameAlg (u16) ‖ H_nameAlg(TPMT_PUBLIC). It is what
// a credential is bound to (MakeCredential's objectName) and what `tpm2_createak -n` writes, so a
// verifier computes it from the public area it was sent instead of trusting a Name it was told.
import { createHash } from 'node:crypto';
import { hashById, type TpmHash } from './tpm-algorithms.ts';
import { TpmFormatError, u16Bytes } from './tpm-reader.ts';

export function tpmName(publicArea: Uint8Array, nameAlg: TpmHash): Buffer {
  return Buffer.concat([u16Bytes(nameAlg.id), createHash(nameAlg.name).update(publicArea).digest()]);
}

/** Checks that bytes are shaped like an object's Name (a known hash id, then a digest of its size). */
export function checkObjectName(name: Uint8Array, what = 'object Name'): TpmHash {
  if (name.length < 2) throw new TpmFormatError(`${what}: ${name.length} bytes is too short for a Name`);
  const id = (name[0]! << 8) | name[1]!;
  const hash = hashById(id);
  if (!hash)
    throw new TpmFormatError(`${what}: unknown name algorithm 0x${id.toString(16).padStart(4, '0')}`);
  if (name.length !== 2 + hash.digestBytes) {
    throw new TpmFormatError(
      `${what}: a ${hash.name} Name is ${2 + hash.digestBytes} bytes, not ${name.length}`,
    );
  }
  return hash;
}
