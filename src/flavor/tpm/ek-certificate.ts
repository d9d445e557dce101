// Is this EK certificate from a TPM manufacturer we trust? The certificate (from the TPM's NV
// index 0x1c00002, `tpm2_nvread`) must be issued and signed by one of the configured manufacturer
// certificates, and it and that issuer must be valid at `now`. Every configured certificate, root
// or intermediate, is a trust anchor (as in spiffe/spire's TPM attestor, whose endorsement bundle is
// one root pool): configure a manufacturer's intermediates along with its roots.
//
// node:crypto's X509Certificate (OpenSSL) parses EK certificates with their critical extensions
// (a subjectAltName of directoryName form, which Go's x509 leaves unhandled and SPIRE has to
// whitelist) because parsing and X509Certificate.verify check no extension policy. Issuers are
// matched with checkIssued, which compares the authority key identifier as well as the name:
// every swtpm_localca CA is called "CN=swtpm-localca", so a name alone would pick the wrong one.
import { X509Certificate } from 'node:crypto';

export type EkCertificateVerdict =
  | { ok: true; ekSpkiDer: Buffer; issuer: string }
  | { ok: false; reason: string };

const PEM_CERTIFICATE = /-----BEGIN CERTIFICATE-----[\s\S]+?-----END CERTIFICATE-----/g;

/**
 * The configured manufacturer certificates (each entry may hold several PEM blocks). A
 * certificate that does not parse is a configuration mistake, not a node's: it throws.
 */
export function parseManufacturerCertificates(manufacturerCertsPem: readonly string[]): X509Certificate[] {
  return manufacturerCertsPem.flatMap((pem, index) => {
    const blocks = pem.match(PEM_CERTIFICATE) ?? [];
    if (blocks.length === 0)
      throw new Error(`TPM manufacturer certificate ${index}: no PEM certificate in it`);
    return blocks.map((block) => {
      try {
        return new X509Certificate(block);
      } catch (error) {
        throw new Error(`TPM manufacturer certificate ${index}: ${(error as Error).message}`);
      }
    });
  });
}

export function verifyEkCertificate(
  certificate: Uint8Array | string,
  manufacturerCertsPem: readonly string[],
  now: Date,
): EkCertificateVerdict {
  let ekCert: X509Certificate;
  let ekSpkiDer: Buffer;
  try {
    ekCert = new X509Certificate(typeof certificate === 'string' ? certificate : Buffer.from(certificate));
    ekSpkiDer = ekCert.publicKey.export({ type: 'spki', format: 'der' });
  } catch (error) {
    return { ok: false, reason: `not a usable EK certificate: ${(error as Error).message}` };
  }
  const issuers = parseManufacturerCertificates(manufacturerCertsPem).filter(
    (candidate) => candidate.ca && ekCert.checkIssued(candidate),
  );
  if (issuers.length === 0) {
    return {
      ok: false,
      reason: `issuer not among the configured TPM manufacturer CAs (the EK certificate's issuer is "${ekCert.issuer}")`,
    };
  }
  const signers = issuers.filter((issuer) => ekCert.verify(issuer.publicKey));
  if (signers.length === 0) {
    return {
      ok: false,
      reason: `signature invalid: no configured "${ekCert.issuer}" signed this EK certificate`,
    };
  }
  const ekValidity = validityProblem(ekCert, now, 'the EK certificate');
  if (ekValidity) return { ok: false, reason: ekValidity };
  let issuerValidity = '';
  for (const signer of signers) {
    issuerValidity = validityProblem(signer, now, `its manufacturer CA "${signer.subject}"`);
    if (!issuerValidity) return { ok: true, ekSpkiDer, issuer: signer.subject };
  }
  return { ok: false, reason: issuerValidity };
}

/** "" when `cert` is valid at `now`, else why not ("expired: …" / "not yet valid: …"). */
function validityProblem(cert: X509Certificate, now: Date, what: string): string {
  if (now.getTime() > cert.validToDate.getTime()) {
    return `expired: ${what} was valid until ${cert.validToDate.toISOString()}`;
  }
  if (now.getTime() < cert.validFromDate.getTime()) {
    return `not yet valid: ${what} is valid from ${cert.validFromDate.toISOString()}`;
  }
  return '';
}
