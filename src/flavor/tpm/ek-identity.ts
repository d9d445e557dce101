// A TPM's identity is its endorsement key (EK): the key, not a certificate's subject (swtpm's EK
// certificates all say "CN = unknown"). It reaches a verifier in three shapes — the TPM2B_PUBLIC
// `tpm2_createek -u` writes, a PEM public key, and the EK certificate — so each is reduced to one
// canonical form, the DER SubjectPublicKeyInfo as node:crypto (OpenSSL) encodes it, and two EKs
// are the same when those bytes are. Public data: no constant-time comparison is needed.
import { createPublicKey, type KeyObject, X509Certificate } from 'node:crypto';
import { parseTpm2bPublic } from './tpm-public.ts';

export type EkSource =
  | { tpm2bPublic: Uint8Array }
  | { publicKeyPem: string }
  | { certificate: Uint8Array | string }
  | { spkiDer: Uint8Array }
  /** Already parsed (TpmPublic.publicKey): no second parse of the same bytes. */
  | { publicKey: KeyObject };

/** The EK's public key from the TPM2B_PUBLIC `tpm2_createek -u` writes. */
export function ekPublicKeyFromTpmPublic(tpm2bPublic: Uint8Array): KeyObject {
  return parseTpm2bPublic(tpm2bPublic).publicKey;
}

function publicKeyOf(source: EkSource): KeyObject {
  if ('tpm2bPublic' in source) return ekPublicKeyFromTpmPublic(source.tpm2bPublic);
  if ('publicKeyPem' in source) return createPublicKey({ key: source.publicKeyPem, format: 'pem' });
  if ('certificate' in source) return new X509Certificate(source.certificate).publicKey;
  if ('publicKey' in source) return source.publicKey;
  return createPublicKey({ key: Buffer.from(source.spkiDer), format: 'der', type: 'spki' });
}

/** The EK's canonical identity: its DER SubjectPublicKeyInfo. Throws on input that is no key. */
export function ekSpkiDer(source: EkSource): Buffer {
  return publicKeyOf(source).export({ type: 'spki', format: 'der' });
}

export function sameEk(a: EkSource, b: EkSource): boolean {
  return ekSpkiDer(a).equals(ekSpkiDer(b));
}
