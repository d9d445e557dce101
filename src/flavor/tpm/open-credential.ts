// The symmetric half of TPM2_ActivateCredential (TPM 2.0 Part 1 §24; Part 3 §12.5): given the
// seed, which only the EK's private key recovers from the encrypted secret, check the outer HMAC
// over encIdentity ‖ akName, then decrypt the credential. A verifier never has the seed of a real
// exchange; this exists so a test can open what makeCredential made (and so a wrong AK Name or a
// tampered blob is seen to fail the way a TPM's TPM_RC_INTEGRITY would).
import { createDecipheriv, createHmac, type KeyObject, timingSafeEqual } from 'node:crypto';
import { credentialKeys, credentialProtection, zeroIv } from './credential-protection.ts';
import type { TpmPublic } from './tpm-public.ts';
import { TpmReader } from './tpm-reader.ts';

export type OpenedCredential = { ok: true; credential: Buffer } | { ok: false; reason: string };

export function openCredentialWithSeed(input: {
  ekPublic: TpmPublic | KeyObject;
  akName: Uint8Array;
  idObject: Uint8Array;
  seed: Uint8Array;
}): OpenedCredential {
  const protection = credentialProtection(input.ekPublic);
  const outer = new TpmReader(input.idObject, 'TPM2B_ID_OBJECT');
  const idObject = new TpmReader(outer.sized('credential'), 'TPMS_ID_OBJECT');
  outer.end();
  const outerHmac = idObject.sized('integrityHMAC');
  const encIdentity = idObject.take(idObject.remaining, 'encIdentity');
  const { aesKey, hmacKey } = credentialKeys(protection, input.seed, input.akName);
  const expected = createHmac(protection.nameAlg.name, hmacKey)
    .update(encIdentity)
    .update(input.akName)
    .digest();
  if (outerHmac.length !== expected.length || !timingSafeEqual(outerHmac, expected)) {
    return { ok: false, reason: 'integrity check failed: another seed, another AK Name, or a modified blob' };
  }
  const decipher = createDecipheriv(`aes-${protection.aesKeyBits}-cfb`, aesKey, zeroIv());
  const plain = new TpmReader(Buffer.concat([decipher.update(encIdentity), decipher.final()]), 'credential');
  const credential = plain.sized('credential');
  plain.end();
  return { ok: true, credential };
}
