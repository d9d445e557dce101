// Is this EK certificate from a TPM manufacturer we trust? TPM vendors issue EK certificates
// through intermediate CAs (root → one or more intermediates → EK), so the path is built, as a
// browser or `openssl verify` builds it, from the EK certificate through intermediates (configured
// ones, or those the machine's administrator presented with the certificate) to a configured root:
// @peculiar/x509's X509ChainBuilder finds each issuer by name and key identifier and checks its
// signature (every swtpm_localca CA is called "CN=swtpm-localca": a name alone would pick the
// wrong one). Then, for every hop, what RFC 5280 §6.1 asks of an issuer: basicConstraints cA and
// its path length, keyUsage keyCertSign; every certificate valid at `now`; and none revoked by a
// CRL the administrator configured (files only: no network here), whose signature verifies under
// its issuer and whose next update is not past (a CRL is honoured even from a CA whose keyUsage
// lacks cRLSign: revocation only ever refuses more). Only self-signed certificates
// are trust anchors: a configured intermediate builds paths but vouches for nothing by itself, so
// its root's CRL can revoke it.
//
// Pure (no I/O): the caller parses the configured files once (parseEkTrust) and checks at issuance
// and again at each challenge and answer, so a CA removed or a CRL added since takes effect.
// The EK certificate itself keeps its vendor extensions (a critical subjectAltName of directoryName
// form, which Go's x509 leaves unhandled and SPIRE has to whitelist): no extension policy is
// applied to it beyond not being a CA.
import { X509Certificate as NodeCertificate } from 'node:crypto';
import type * as X509 from '@peculiar/x509';
import { loadX509 } from '../x509-library.ts';

export type EkCertificateVerdict =
  | {
      ok: true;
      ekSpkiDer: Buffer;
      /** The subject of the CA that signed the EK certificate. */
      issuer: string;
      /** The EK certificate and the intermediates presented with it, PEM: what a later check re-verifies. */
      presented: string;
    }
  | { ok: false; reason: string };

/** The configured trust, parsed once (parseEkTrust). */
export interface EkTrust {
  /** Self-signed certificates: the only trust anchors. */
  roots: X509.X509Certificate[];
  /** The other configured certificates: paths are built through them; they anchor nothing. */
  intermediates: X509.X509Certificate[];
  crls: X509.X509Crl[];
}

const PEM_CERTIFICATE = /-----BEGIN CERTIFICATE-----[\s\S]+?-----END CERTIFICATE-----/g;
/** OpenSSL writes "X509 CRL", some tools "CRL". */
const PEM_CRL = /-----BEGIN (X509 )?CRL-----[\s\S]+?-----END (X509 )?CRL-----/g;
/** CRL extensions whose meaning this check honours by reading the CRL as complete. */
const ID_CE_CRL_NUMBER = '2.5.29.20';
const ID_CE_AUTHORITY_KEY_IDENTIFIER = '2.5.29.35';

/**
 * The configured manufacturer certificates and CRLs. A certificate or CRL that does not parse, a
 * bundle without a root, or a CRL this check cannot read as complete is a configuration mistake,
 * not a node's: it throws (at start-up, or a reload keeps the last good trust).
 */
export async function parseEkTrust(input: { certificatesPem: string; crls?: Buffer }): Promise<EkTrust> {
  const x509 = await loadX509();
  const blocks = input.certificatesPem.match(PEM_CERTIFICATE) ?? [];
  if (blocks.length === 0) throw new Error('no PEM certificate in the TPM manufacturer CA file');
  const roots: X509.X509Certificate[] = [];
  const intermediates: X509.X509Certificate[] = [];
  for (const [index, block] of blocks.entries()) {
    let cert: X509.X509Certificate;
    try {
      cert = new x509.X509Certificate(block);
    } catch (error) {
      throw new Error(`TPM manufacturer certificate ${index}: ${(error as Error).message}`);
    }
    ((await cert.isSelfSigned()) ? roots : intermediates).push(cert);
  }
  if (roots.length === 0)
    throw new Error(
      'the TPM manufacturer CA file holds no root (self-signed) certificate: an intermediate is no trust anchor, configure its root',
    );
  return { roots, intermediates, crls: input.crls ? parseCrls(x509, input.crls) : [] };
}

function parseCrls(x509: typeof X509, bytes: Buffer): X509.X509Crl[] {
  const text = bytes.toString('latin1');
  const encoded = text.includes('-----BEGIN') ? (text.match(PEM_CRL) ?? []).map(derOfPem) : [bytes];
  if (encoded.length === 0)
    throw new Error('no CRL (PEM "X509 CRL" or DER) in the TPM manufacturer CRL file');
  return encoded.map((item, index) => {
    let crl: X509.X509Crl;
    try {
      crl = new x509.X509Crl(item);
    } catch (error) {
      throw new Error(`TPM manufacturer CRL ${index}: ${(error as Error).message}`);
    }
    // A delta CRL or one scoped by an issuing distribution point is not the whole list: read as
    // complete it would let revoked certificates through.
    const unknown = crl.extensions.filter(
      (e) => e.critical && e.type !== ID_CE_CRL_NUMBER && e.type !== ID_CE_AUTHORITY_KEY_IDENTIFIER,
    );
    if (unknown.length > 0)
      throw new Error(
        `TPM manufacturer CRL ${index} (of "${crl.issuer}") has a critical extension ${unknown[0]?.type} this check does not process (a delta or partitioned CRL): configure the complete CRL`,
      );
    return crl;
  });
}

function derOfPem(block: string): Buffer {
  return Buffer.from(block.replace(/-----[^-]+-----/g, '').replace(/\s+/g, ''), 'base64');
}

/** The EK certificate (PEM, optionally followed by intermediates; or DER) as certificates. */
async function presentedCertificates(
  x509: typeof X509,
  presented: Uint8Array | string,
): Promise<X509.X509Certificate[]> {
  if (typeof presented !== 'string') return [new x509.X509Certificate(Buffer.from(presented))];
  const blocks = presented.match(PEM_CERTIFICATE) ?? [];
  if (blocks.length === 0) throw new Error('no PEM certificate in it');
  return blocks.map((block) => new x509.X509Certificate(block));
}

const same = (a: X509.X509Certificate, b: X509.X509Certificate) =>
  Buffer.from(a.rawData).equals(Buffer.from(b.rawData));

export async function verifyEkCertificate(
  presented: Uint8Array | string,
  trust: EkTrust,
  now: Date,
): Promise<EkCertificateVerdict> {
  const x509 = await loadX509();
  let certs: X509.X509Certificate[];
  let ekSpkiDer: Buffer;
  try {
    certs = await presentedCertificates(x509, presented);
    // The EK's canonical identity, as every other EK source is reduced to it (ek-identity.ts).
    ekSpkiDer = new NodeCertificate(Buffer.from((certs[0] as X509.X509Certificate).rawData)).publicKey.export(
      {
        type: 'spki',
        format: 'der',
      },
    );
  } catch (error) {
    return { ok: false, reason: `not a usable EK certificate: ${(error as Error).message}` };
  }
  const [ek, ...carried] = certs as [X509.X509Certificate, ...X509.X509Certificate[]];
  // The configured certificates first: of two candidates for one issuer, the configured one wins.
  const pool = [...trust.roots, ...trust.intermediates, ...carried];
  let chain: X509.X509Certificate[];
  try {
    chain = [...(await new x509.X509ChainBuilder({ certificates: pool }).build(ek))];
  } catch (error) {
    return { ok: false, reason: `no certificate path: ${(error as Error).message}` };
  }
  const top = chain.at(-1) as X509.X509Certificate;
  if (!trust.roots.some((root) => same(root, top))) return { ok: false, reason: unanchored(ek, top, pool) };
  const problem =
    ekIsNoCa(x509, ek) ??
    hopProblem(x509, chain) ??
    validityProblem(chain, now) ??
    (await revocationProblem(chain, trust.crls, now));
  if (problem) return { ok: false, reason: problem };
  return {
    ok: true,
    ekSpkiDer,
    issuer: (chain[1] as X509.X509Certificate).subject,
    presented: certs.map((c) => c.toString('pem')).join('\n'),
  };
}

/** Why the path built from `ek` ended at `top`, a certificate no configured root is. */
function unanchored(
  ek: X509.X509Certificate,
  top: X509.X509Certificate,
  pool: X509.X509Certificate[],
): string {
  const where = `(the EK certificate's issuer is "${ek.issuer}")`;
  if (top === ek && pool.some((candidate) => candidate.subject === ek.issuer))
    return `signature invalid: no configured "${ek.issuer}" signed this EK certificate`;
  if (top === ek) return `issuer not among the configured TPM manufacturer CAs ${where}`;
  return top.subject === top.issuer
    ? `issuer not among the configured TPM manufacturer CAs: its path ends at "${top.subject}", which is not a configured root ${where}`
    : `issuer not among the configured TPM manufacturer CAs: its path ends at "${top.subject}", whose issuer "${top.issuer}" is neither configured nor presented ${where}`;
}

function ekIsNoCa(x509: typeof X509, ek: X509.X509Certificate): string | undefined {
  return ek.getExtension(x509.BasicConstraintsExtension)?.ca
    ? 'the EK certificate is a CA certificate, not an endorsement key'
    : undefined;
}

/** RFC 5280 §6.1.4 for each issuer on the path: a CA, allowed to sign certificates, within its path length. */
function hopProblem(x509: typeof X509, chain: X509.X509Certificate[]): string | undefined {
  for (let below = 0; below < chain.length - 1; below++) {
    const issuer = chain[below + 1] as X509.X509Certificate;
    const constraints = issuer.getExtension(x509.BasicConstraintsExtension);
    if (!constraints?.ca) return `CA "${issuer.subject}" is not a CA (its basicConstraints does not say cA)`;
    const usage = issuer.getExtension(x509.KeyUsagesExtension);
    if (!usage || (usage.usages & x509.KeyUsageFlags.keyCertSign) === 0)
      return `CA "${issuer.subject}" may not sign certificates (its keyUsage lacks keyCertSign)`;
    // The CAs between this issuer and the EK certificate: chain[1..below].
    if (constraints.pathLength !== undefined && below > constraints.pathLength)
      return `CA "${issuer.subject}" allows ${constraints.pathLength} intermediate CA(s) below it, the path has ${below}`;
  }
  return undefined;
}

function validityProblem(chain: X509.X509Certificate[], now: Date): string | undefined {
  for (const [index, cert] of chain.entries()) {
    const what = index === 0 ? 'the EK certificate' : `its manufacturer CA "${cert.subject}"`;
    if (now.getTime() > cert.notAfter.getTime())
      return `expired: ${what} was valid until ${cert.notAfter.toISOString()}`;
    if (now.getTime() < cert.notBefore.getTime())
      return `not yet valid: ${what} is valid from ${cert.notBefore.toISOString()}`;
  }
  return undefined;
}

/** Whether a configured CRL of its issuer revokes a certificate on the path (not the root). */
async function revocationProblem(
  chain: X509.X509Certificate[],
  crls: X509.X509Crl[],
  now: Date,
): Promise<string | undefined> {
  for (let index = 0; index < chain.length - 1; index++) {
    const cert = chain[index] as X509.X509Certificate;
    const issuer = chain[index + 1] as X509.X509Certificate;
    const crl = await latestCrl(issuer, crls);
    if (!crl) continue;
    const what = index === 0 ? 'the EK certificate' : `CA "${cert.subject}"`;
    if (crl.nextUpdate !== undefined && crl.nextUpdate.getTime() < now.getTime())
      return `the CRL of "${issuer.subject}" is out of date (its next update was due ${crl.nextUpdate.toISOString()}): configure a current one`;
    const revoked = crl.findRevoked(cert);
    if (revoked)
      return `revoked: ${what} (serial ${cert.serialNumber}) was revoked by "${issuer.subject}" on ${revoked.revocationDate.toISOString()}`;
  }
  return undefined;
}

/** The newest configured CRL `issuer` signed, if any. */
async function latestCrl(
  issuer: X509.X509Certificate,
  crls: X509.X509Crl[],
): Promise<X509.X509Crl | undefined> {
  let latest: X509.X509Crl | undefined;
  for (const crl of crls) {
    if (crl.issuer !== issuer.subject) continue;
    if (!(await crl.verify({ publicKey: issuer }).catch(() => false))) continue;
    if (!latest || crl.thisUpdate.getTime() > latest.thisUpdate.getTime()) latest = crl;
  }
  return latest;
}
