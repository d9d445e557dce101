// Is this public area fit to be an attestation key (AK)? Credential activation only proves that
// the key named is loaded in the TPM holding the EK; what that proof is worth depends on the key:
// one that can leave the TPM, be duplicated or imported, or sign arbitrary data would let whoever
// holds it forge what the TPM "said".
//
// The same checks as google/go-attestation's checkTPM20AttestationParameters (attest/activation.go,
// reached from ActivationParameters.Generate with mustRestrict = true): fixedTPM ("provided key is
// exportable"), restricted ("not limited to attestation"), fixedParent ("can be duplicated to a
// different parent"), sensitiveDataOrigin ("not created by TPM"), and an RSA key of at least 2048
// bits (minRSABits). spiffe/spire's TPM DevID attestor (pkg/server/plugin/nodeattestor/tpmdevid)
// checks no AK attribute itself but refuses a key without `sign` (getSignatureScheme: "not a
// signing key"). Neither checks userWithAuth, and neither do we: tpm2_createak sets it (the AK's
// empty auth), and it says who may use the key, not what the key is. We add what makes a
// restricted key a signing one (sign set, decrypt clear: restricted + decrypt is a storage key)
// and, since the Name binds the credential, a SHA-256 name algorithm.
//
// go-attestation also verifies the AK's creation attestation (TPM2_CertifyCreation, signed by the
// AK itself); this package sees only the public area, and credential activation is what ties it
// to the EK.
import { hasAttribute } from './tpm-algorithms.ts';
import type { TpmPublic } from './tpm-public.ts';

const MIN_RSA_BITS = 2048;

/** Human-readable problems with `ak` as an attestation key; empty when it is fit. */
export function attestationKeyProblems(ak: TpmPublic): string[] {
  const problems: string[] = [];
  const attributes = ak.objectAttributes;
  if (ak.nameAlg.name !== 'sha256') {
    problems.push(`its name algorithm is ${ak.nameAlg.name}, not sha256`);
  }
  if (!hasAttribute(attributes, 'fixedTPM')) {
    problems.push('fixedTPM is clear: the key can be exported from the TPM');
  }
  if (!hasAttribute(attributes, 'fixedParent')) {
    problems.push('fixedParent is clear: the key can be duplicated to a different parent');
  }
  if (!hasAttribute(attributes, 'sensitiveDataOrigin')) {
    problems.push('sensitiveDataOrigin is clear: the key was not created by the TPM (it may be imported)');
  }
  if (!hasAttribute(attributes, 'restricted')) {
    problems.push('restricted is clear: the key signs arbitrary data, not only what the TPM attests');
  }
  if (!hasAttribute(attributes, 'sign')) {
    problems.push('sign is clear: the key is not a signing key');
  }
  if (hasAttribute(attributes, 'decrypt')) {
    problems.push('decrypt is set: an attestation key signs and does not decrypt');
  }
  if (ak.type === 'rsa' && ak.rsa.keyBits < MIN_RSA_BITS) {
    problems.push(`an RSA key of ${ak.rsa.keyBits} bits: at least ${MIN_RSA_BITS} are needed`);
  }
  return problems;
}
