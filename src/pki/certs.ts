// X.509 helpers on @peculiar/x509 + WebCrypto: a CA, leaf certificates signed by it, PEM
// encoding. Used by the webhook's self-managed TLS and by the test control plane's PKI.
import 'reflect-metadata';
import { createHash, webcrypto } from 'node:crypto';
import * as x509 from '@peculiar/x509';

type CryptoKey = webcrypto.CryptoKey;
type CryptoKeyPair = webcrypto.CryptoKeyPair;

x509.cryptoProvider.set(webcrypto as unknown as Parameters<typeof x509.cryptoProvider.set>[0]);

const EC_ALGORITHM = { name: 'ECDSA', namedCurve: 'P-256' } as const;
const SIGNING_ALGORITHM = { name: 'ECDSA', hash: 'SHA-256' } as const;

/** A certificate with its private key, both PEM-encoded. */
export interface KeyPairPem {
  certPem: string;
  keyPem: string;
}

/** An issuer able to sign further certificates. */
export interface CertificateAuthority extends KeyPairPem {
  cert: x509.X509Certificate;
  privateKey: CryptoKey;
}

interface LeafOptions {
  commonName: string;
  organizations?: string[];
  dnsNames?: string[];
  ipAddresses?: string[];
  usage: 'server' | 'client' | 'both';
  validFor: number; // milliseconds
  notBefore?: Date;
}

async function generateKeyPair(): Promise<CryptoKeyPair> {
  return (await webcrypto.subtle.generateKey(EC_ALGORITHM, true, ['sign', 'verify'])) as CryptoKeyPair;
}

async function privateKeyToPem(key: CryptoKey): Promise<string> {
  const der = await webcrypto.subtle.exportKey('pkcs8', key);
  return x509.PemConverter.encode(der, 'PRIVATE KEY');
}

async function publicKeyToPem(key: CryptoKey): Promise<string> {
  const der = await webcrypto.subtle.exportKey('spki', key);
  return x509.PemConverter.encode(der, 'PUBLIC KEY');
}

async function importPrivateKeyPem(pem: string): Promise<CryptoKey> {
  const der = x509.PemConverter.decodeFirst(pem);
  return webcrypto.subtle.importKey('pkcs8', der, EC_ALGORITHM, true, ['sign']) as Promise<CryptoKey>;
}

function distinguishedName(commonName: string, organizations: string[] = []): string {
  const escapeValue = (v: string) => v.replace(/([,+"\\<>;=])/g, '\\$1');
  return [`CN=${escapeValue(commonName)}`, ...organizations.map((o) => `O=${escapeValue(o)}`)].join(', ');
}

function randomSerial(): string {
  // Positive 127-bit serial: a leading 0 bit keeps DER INTEGER positive.
  const bytes = webcrypto.getRandomValues(new Uint8Array(16));
  bytes[0] = (bytes[0] ?? 0) & 0x7f;
  return Buffer.from(bytes).toString('hex');
}

export async function createCertificateAuthority(
  commonName: string,
  validFor: number,
): Promise<CertificateAuthority> {
  const keys = await generateKeyPair();
  const notBefore = new Date(Date.now() - 60_000); // tolerate small clock skew
  const cert = await x509.X509CertificateGenerator.createSelfSigned({
    serialNumber: randomSerial(),
    name: distinguishedName(commonName),
    notBefore,
    notAfter: new Date(notBefore.getTime() + validFor),
    keys,
    signingAlgorithm: SIGNING_ALGORITHM,
    extensions: [
      new x509.BasicConstraintsExtension(true, undefined, true),
      new x509.KeyUsagesExtension(x509.KeyUsageFlags.keyCertSign | x509.KeyUsageFlags.cRLSign, true),
      await x509.SubjectKeyIdentifierExtension.create(keys.publicKey),
    ],
  });
  return {
    cert,
    privateKey: keys.privateKey,
    certPem: cert.toString('pem'),
    keyPem: await privateKeyToPem(keys.privateKey),
  };
}

export async function loadCertificateAuthority(pair: KeyPairPem): Promise<CertificateAuthority> {
  return {
    ...pair,
    cert: new x509.X509Certificate(pair.certPem),
    privateKey: await importPrivateKeyPem(pair.keyPem),
  };
}

export async function issueCertificate(
  ca: CertificateAuthority,
  options: LeafOptions,
): Promise<KeyPairPem & { notAfter: Date }> {
  const keys = await generateKeyPair();
  const notBefore = options.notBefore ?? new Date(Date.now() - 60_000);
  const notAfter = new Date(notBefore.getTime() + options.validFor);
  const extendedUsages: string[] = [];
  if (options.usage !== 'client') extendedUsages.push(x509.ExtendedKeyUsage.serverAuth);
  if (options.usage !== 'server') extendedUsages.push(x509.ExtendedKeyUsage.clientAuth);
  const extensions: x509.Extension[] = [
    new x509.BasicConstraintsExtension(false, undefined, true),
    new x509.KeyUsagesExtension(
      x509.KeyUsageFlags.digitalSignature | x509.KeyUsageFlags.keyEncipherment,
      true,
    ),
    new x509.ExtendedKeyUsageExtension(extendedUsages),
    await x509.AuthorityKeyIdentifierExtension.create(ca.cert),
  ];
  const altNames = [
    ...(options.dnsNames ?? []).map((value) => ({ type: 'dns' as const, value })),
    ...(options.ipAddresses ?? []).map((value) => ({ type: 'ip' as const, value })),
  ];
  if (altNames.length > 0) extensions.push(new x509.SubjectAlternativeNameExtension(altNames));
  const cert = await x509.X509CertificateGenerator.create({
    serialNumber: randomSerial(),
    subject: distinguishedName(options.commonName, options.organizations),
    issuer: ca.cert.subject,
    notBefore,
    notAfter,
    publicKey: keys.publicKey,
    signingKey: ca.privateKey,
    signingAlgorithm: SIGNING_ALGORITHM,
    extensions,
  });
  return { certPem: cert.toString('pem'), keyPem: await privateKeyToPem(keys.privateKey), notAfter };
}

/** An ECDSA key pair as PEM (e.g. the service-account token signing key). */
export async function createKeyPairPem(): Promise<{ privateKeyPem: string; publicKeyPem: string }> {
  const keys = await generateKeyPair();
  return {
    privateKeyPem: await privateKeyToPem(keys.privateKey),
    publicKeyPem: await publicKeyToPem(keys.publicKey),
  };
}

/** A PKCS#10 request (PEM) and its private key, as a kubelet makes for its client certificate. */
export async function createCertificateRequest(
  commonName: string,
  organizations: string[],
): Promise<{ csrPem: string; keyPem: string }> {
  const keys = await generateKeyPair();
  const csr = await x509.Pkcs10CertificateRequestGenerator.create({
    name: distinguishedName(commonName, organizations),
    keys,
    signingAlgorithm: SIGNING_ALGORITHM,
  });
  return { csrPem: csr.toString('pem'), keyPem: await privateKeyToPem(keys.privateKey) };
}

/**
 * kubeadm's CA pin: "sha256:" + hex SHA-256 of the certificate's DER SubjectPublicKeyInfo.
 */
export function caCertHash(certPem: string): string {
  const cert = new x509.X509Certificate(certPem);
  const spki = Buffer.from(cert.publicKey.rawData);
  return `sha256:${createHash('sha256').update(spki).digest('hex')}`;
}
