// KDFa (TPM 2.0 Part 1 §11.4.10.2): SP 800-108 counter-mode KDF with HMAC. Each block is
//   HMAC_hash(key, [i]u32 ‖ label ‖ 0x00 ‖ contextU ‖ contextV ‖ [bits]u32),  i = 1, 2, …
// and the output is the first `bits` bits. It is OpenSSL's KBKDF (mode counter, mac HMAC, with its
// default separator and length fields), which is how the unit test checks it independently.
import { createHmac } from 'node:crypto';
import type { TpmHash } from './tpm-algorithms.ts';
import { u32Bytes } from './tpm-reader.ts';

export function kdfa(
  hash: TpmHash,
  key: Uint8Array,
  label: string,
  contextU: Uint8Array,
  contextV: Uint8Array,
  bits: number,
): Buffer {
  // Every key a credential needs is whole bytes; a partial byte would need the spec's masking.
  if (!Number.isInteger(bits) || bits <= 0 || bits % 8 !== 0) {
    throw new RangeError(`KDFa: ${bits} bits is not a positive whole number of bytes`);
  }
  // The label is a NUL-terminated string; its terminator is the 0x00 above, never doubled.
  const labelBytes = Buffer.from(label.endsWith('\0') ? label.slice(0, -1) : label, 'latin1');
  const blocks: Buffer[] = [];
  for (let counter = 1, produced = 0; produced < bits / 8; counter++) {
    const block = createHmac(hash.name, key)
      .update(u32Bytes(counter))
      .update(labelBytes)
      .update(Buffer.of(0))
      .update(contextU)
      .update(contextV)
      .update(u32Bytes(bits))
      .digest();
    blocks.push(block);
    produced += block.length;
  }
  return Buffer.concat(blocks).subarray(0, bits / 8);
}
