// EK certificate chains made the way TPM vendors issue them (TCG EK Credential Profile): a root CA,
// one or more intermediate CAs (basicConstraints cA with a path length, keyUsage keyCertSign and
// cRLSign, key identifiers), and an EK certificate for the TPM's RSA EK (not a CA, keyUsage
// keyEncipherment, the EK certificate extended key usage 2.23.133.8.1, and the critical
// subjectAltName of directoryName form naming the TPM manufacturer, model and version, taken from
// a real swtpm EK certificate). Plus CRLs, signed like a vendor's, for revocation tests.
import 'reflect-metadata';
import { webcrypto } from 'node:crypto';
import * as x509 from '@peculiar/x509';

x509.cryptoProvider.set(webcrypto as unknown as Parameters<typeof x509.cryptoProvider.set>[0]);

const RSA = { name: 'RSASSA-PKCS1-v1_5', hash: 'SHA-256', publicExponent: new Uint8Array([1, 0, 1]) };
const EC = { name: 'ECDSA', namedCurve: 'P-256' } as const;
const EC_SIGNING = { name: 'ECDSA', hash: 'SHA-256' } as const;
const ID_TCG_KP_EK_CERTIFICATE = '2.23.133.8.1';
const ID_CE_SUBJECT_ALT_NAME = '2.5.29.17';

export interface ChainCa {
  cert: x509.X509Certificate;
  keys: webcrypto.CryptoKeyPair;
  pem: string;
}

interface CaOptions {
  /** Absent: self-signed (a root). */
  issuer?: ChainCa;
  pathLength?: number;
  /** Default: keyCertSign | cRLSign. */
  keyUsage?: number | null;
  /** Default true; false makes a certificate that claims to be no CA. */
  ca?: boolean;
  notBefore?: Date;
  notAfter?: Date;
  serialNumber?: string;
}

let serial = 0x1000;
const nextSerial = () => (serial++).toString(16).padStart(6, '0');

export async function makeCa(name: string, options: CaOptions = {}): Promise<ChainCa> {
  const keys = (await webcrypto.subtle.generateKey(EC, true, ['sign', 'verify'])) as webcrypto.CryptoKeyPair;
  const notBefore = options.notBefore ?? new Date('2020-01-01T00:00:00Z');
  const notAfter = options.notAfter ?? new Date('2049-12-31T23:59:59Z');
  const usage =
    options.keyUsage === undefined
      ? x509.KeyUsageFlags.keyCertSign | x509.KeyUsageFlags.cRLSign
      : options.keyUsage;
  const extensions: x509.Extension[] = [
    new x509.BasicConstraintsExtension(options.ca ?? true, options.pathLength, true),
    ...(usage === null ? [] : [new x509.KeyUsagesExtension(usage, true)]),
    await x509.SubjectKeyIdentifierExtension.create(keys.publicKey),
    ...(options.issuer ? [await x509.AuthorityKeyIdentifierExtension.create(options.issuer.cert)] : []),
  ];
  const common = {
    serialNumber: options.serialNumber ?? nextSerial(),
    notBefore,
    notAfter,
    signingAlgorithm: EC_SIGNING,
    extensions,
  };
  const cert = options.issuer
    ? await x509.X509CertificateGenerator.create({
        ...common,
        subject: `CN=${name}, O=Example TPM Vendor`,
        issuer: options.issuer.cert.subject,
        publicKey: keys.publicKey,
        signingKey: options.issuer.keys.privateKey,
      })
    : await x509.X509CertificateGenerator.createSelfSigned({
        ...common,
        name: `CN=${name}, O=Example TPM Vendor`,
        keys,
      });
  return { cert, keys, pem: cert.toString('pem') };
}

/** An EK certificate for the RSA EK whose SubjectPublicKeyInfo is `ekSpkiDer`, issued by `issuer`. */
export async function makeEkCertificate(
  issuer: ChainCa,
  ekSpkiDer: Buffer,
  options: { notBefore?: Date; notAfter?: Date; subjectAltName: ArrayBuffer },
): Promise<x509.X509Certificate> {
  const publicKey = await webcrypto.subtle.importKey('spki', ekSpkiDer, RSA, true, ['verify']);
  return x509.X509CertificateGenerator.create({
    serialNumber: nextSerial(),
    subject: '',
    issuer: issuer.cert.subject,
    notBefore: options.notBefore ?? new Date('2021-01-01T00:00:00Z'),
    notAfter: options.notAfter ?? new Date('9999-12-31T23:59:59Z'),
    publicKey,
    signingKey: issuer.keys.privateKey,
    signingAlgorithm: EC_SIGNING,
    extensions: [
      new x509.Extension(ID_CE_SUBJECT_ALT_NAME, true, options.subjectAltName),
      new x509.BasicConstraintsExtension(false, undefined, true),
      new x509.KeyUsagesExtension(x509.KeyUsageFlags.keyEncipherment, true),
      new x509.ExtendedKeyUsageExtension([ID_TCG_KP_EK_CERTIFICATE]),
      await x509.AuthorityKeyIdentifierExtension.create(issuer.cert),
    ],
  });
}

/** The subjectAltName (TPM manufacturer, model, version) of a real EK certificate. */
export function subjectAltNameOf(ekCertificateDer: Buffer): ArrayBuffer {
  const cert = new x509.X509Certificate(ekCertificateDer);
  const san = cert.getExtension(ID_CE_SUBJECT_ALT_NAME);
  if (!san) throw new Error('the EK certificate has no subjectAltName');
  return san.value;
}

/** A CRL `issuer` signs, revoking `revoked` (certificates). */
export async function makeCrl(
  issuer: ChainCa,
  revoked: x509.X509Certificate[],
  options: { thisUpdate?: Date; nextUpdate?: Date | null; signer?: ChainCa } = {},
): Promise<x509.X509Crl> {
  return x509.X509CrlGenerator.create({
    issuer: issuer.cert.subject,
    thisUpdate: options.thisUpdate ?? new Date('2024-01-01T00:00:00Z'),
    ...(options.nextUpdate !== null
      ? { nextUpdate: options.nextUpdate ?? new Date('2049-01-01T00:00:00Z') }
      : {}),
    entries: revoked.map((cert) => ({
      serialNumber: cert.serialNumber,
      revocationDate: new Date('2024-01-01T00:00:00Z'),
      reason: x509.X509CrlReason.keyCompromise,
    })),
    signingKey: (options.signer ?? issuer).keys.privateKey,
    signingAlgorithm: EC_SIGNING,
  });
}

export const pemOf = (...certs: { toString(format: 'pem'): string }[]) =>
  certs.map((c) => c.toString('pem')).join('\n');

/** A CA whose certificate and RSA private key are PEM files (swtpm_localca's CA directory). */
export async function caFromPem(certPem: string, keyText: string): Promise<ChainCa> {
  const block = /-----BEGIN (RSA )?PRIVATE KEY-----[\s\S]+?-----END (RSA )?PRIVATE KEY-----/.exec(
    keyText,
  )?.[0];
  if (!block) throw new Error('no PEM private key in the CA key file');
  const { createPrivateKey } = await import('node:crypto');
  const pkcs8 = createPrivateKey(block).export({ type: 'pkcs8', format: 'der' });
  const privateKey = await webcrypto.subtle.importKey(
    'pkcs8',
    pkcs8,
    { name: 'RSASSA-PKCS1-v1_5', hash: 'SHA-256' },
    false,
    ['sign'],
  );
  const cert = new x509.X509Certificate(certPem);
  const publicKey = await cert.publicKey.export({ name: 'RSASSA-PKCS1-v1_5', hash: 'SHA-256' }, ['verify']);
  return { cert, keys: { privateKey, publicKey } as webcrypto.CryptoKeyPair, pem: cert.toString('pem') };
}

/** A certificate from PEM, as the chain helpers take it. */
export function certificateOf(pem: string): x509.X509Certificate {
  return new x509.X509Certificate(pem);
}
