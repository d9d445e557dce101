// What an issuance request's `attestation` becomes on the FlavoredToken (ADR 0014): the TPM's
// endorsement key, checked here once so a token is never bound to something no TPM could use.
// An EK certificate must chain to a configured TPM manufacturer CA; a bare EK public key is the
// caller's word (a platform team that read it off the machine itself), so it needs no CA.
import { createPublicKey, type KeyObject } from 'node:crypto';
import { readFileSync } from 'node:fs';
import type { TokenAttestation } from '../flavor/resources.ts';
import { verifyEkCertificate } from '../flavor/tpm/ek-certificate.ts';
import type { AttestationSettings } from './config.ts';
import { IssuerError } from './errors.ts';
import type { ValidIssueRequest } from './request.ts';

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

/** The manufacturer CAs, read when needed: a rotated bundle takes effect without a restart. */
export function readManufacturerCas(settings: AttestationSettings): string[] {
  if (!settings.manufacturerCaFile) return [];
  try {
    return [readFileSync(settings.manufacturerCaFile, 'utf8')];
  } catch (error) {
    throw new IssuerError(
      'Internal',
      `cannot read the TPM manufacturer CA file ${settings.manufacturerCaFile}: ${(error as NodeJS.ErrnoException).code ?? (error as Error).message}`,
    );
  }
}

export function tokenAttestation(
  request: NonNullable<ValidIssueRequest['attestation']>,
  settings: AttestationSettings,
  now: Date,
): TokenAttestation {
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
  const cas = readManufacturerCas(settings);
  if (cas.length === 0)
    throw refuse(
      'attestation.ekCertificate',
      'cannot be checked: no TPM manufacturer CAs are configured (--tpm-manufacturer-ca-file); bind by ekPublicKey instead',
    );
  const verdict = verifyEkCertificate(request.ekCertificate ?? '', cas, now);
  if (!verdict.ok) throw refuse('attestation.ekCertificate', `is refused: ${verdict.reason}`);
  const key = createPublicKey({ key: verdict.ekSpkiDer, format: 'der', type: 'spki' });
  return {
    ekPublicKey: ekPem(key, 'attestation.ekCertificate'),
    ekCertificateIssuer: verdict.issuer.slice(0, 1024),
    allowRejoin,
  };
}
