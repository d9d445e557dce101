// RFC 4648 base32 (section 6), lowercase and without padding: the output of a 32-byte HMAC is
// 52 characters of [a-z2-7], a valid Kubernetes label value. Small enough to own rather than
// depend on a package for.

const BASE32_ALPHABET = 'abcdefghijklmnopqrstuvwxyz234567';

export function base32Encode(bytes: Uint8Array): string {
  let output = '';
  let buffer = 0; // pending bits, most significant first
  let bufferedBits = 0;
  for (const byte of bytes) {
    buffer = (buffer << 8) | byte;
    bufferedBits += 8;
    while (bufferedBits >= 5) {
      bufferedBits -= 5;
      output += BASE32_ALPHABET[(buffer >>> bufferedBits) & 31];
    }
    buffer &= (1 << bufferedBits) - 1; // keep only the bits not yet emitted, so `buffer` stays small
  }
  if (bufferedBits > 0) output += BASE32_ALPHABET[(buffer << (5 - bufferedBits)) & 31];
  return output;
}
