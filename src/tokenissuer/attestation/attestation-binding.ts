// What an issuance request's `attestation` becomes on the FlavoredToken (ADR 0014): the TPM's
// endorsement key, checked here so a token is never bound to something no TPM could use. An EK
// certificate (with the intermediates it was issued through, if the caller has them) must chain
// to a configured TPM manufacturer root; it is kept on the record so each challenge and answer
// checks it again against the CAs and CRLs configured then. A bare EK public key is the caller's
// word (a platform team that read it off the machine itself), so it needs no CA.
import { createPublicKey, type KeyObject } from 'node:crypto';
import { LIMITS, type TokenAttestation } from '../../flavor/resources.ts';
import { verifyEkCertificate } from '../../flavor/tpm/ek-certificate.ts';
import type { AttestationSettings } from '../config.ts';
import { IssuerError } from '../errors.ts';
import type { ValidIssueRequest } from '../request.ts';
import type { AttestationFiles } from './attestation-files.ts';

const EK_BITS = 2048;

function refuse(field: string, message: string): IssuerError {
  return new IssuerError('InvalidRequest', `invalid request: ${field} ${message}`, [{ field, message }]);
}

/** An RSA-2048 public key as PEM SPKI, or why not (the standard EK template; the only one assumed). */
function ekPem(key: KeyObject, field: string): string {
  const bits = key.asymmetricKeyDetails?.modulusLength;
  if (key.asymmetricKeyType !== 'rsa' || bits !== EK_BITS)
    throw refuse(
      field,
      `must be an RSA-${EK_BITS} key (the TPM's standard EK), not ${key.asymmetricKeyType}${bits ? `-${bits}` : ''}`,
    );
  return key.export({ type: 'spki', format: 'pem' }).toString();
}

export async function tokenAttestation(
  request: NonNullable<ValidIssueRequest['attestation']>,
  settings: AttestationSettings,
  files: AttestationFiles,
  now: Date,
): Promise<TokenAttestation> {
  if (!settings.url)
    throw refuse(
      'attestation',
      'needs an issuer set up for attested joins (--attestation-url: where nodes reach it)',
    );
  const allowRejoin = request.allowRejoin ?? false;
  if (request.ekPublicKey !== undefined) {
    let key: KeyObject;
    try {
      key = createPublicKey({ key: request.ekPublicKey, format: 'pem' });
    } catch {
      throw refuse('attestation.ekPublicKey', 'is not a PEM public key');
    }
    return { ekPublicKey: ekPem(key, 'attestation.ekPublicKey'), allowRejoin };
  }
  const trust = await files.manufacturerTrust();
  if (!trust)
    throw refuse(
      'attestation.ekCertificate',
      'cannot be checked: no TPM manufacturer CAs are configured (--tpm-manufacturer-ca-file); bind by ekPublicKey instead',
    );
  const verdict = await verifyEkCertificate(request.ekCertificate ?? '', trust, now);
  if (!verdict.ok) throw refuse('attestation.ekCertificate', `is refused: ${verdict.reason}`);
  const key = createPublicKey({ key: verdict.ekSpkiDer, format: 'der', type: 'spki' });
  if (verdict.presented.length > LIMITS.ekCertificateLength)
    throw refuse(
      'attestation.ekCertificate',
      `is too long to keep on the token (${verdict.presented.length} characters of PEM, at most ${LIMITS.ekCertificateLength})`,
    );
  return {
    ekPublicKey: ekPem(key, 'attestation.ekCertificate'),
    ekCertificateIssuer: verdict.issuer.slice(0, LIMITS.messageLength),
    ekCertificate: verdict.presented,
    allowRejoin,
  };
}
