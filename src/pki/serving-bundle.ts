// The webhook's self-managed TLS, minus I/O: which names the serving certificate must carry, when
// it is due for renewal, whether a stored bundle can be served as it is, and issuing a new CA or
// serving certificate. The CA lives ten years and is kept across renewals, so the caBundle the API
// server trusts never changes and a renewal never fails a request; only the serving certificate
// turns over, at two thirds of its lifetime (as kubelet and cert-manager do), which leaves a third
// of it for the other replicas to pick the new one up. src/webhook/self-managed-tls.ts runs this.
import { createPrivateKey, X509Certificate } from 'node:crypto';
import { isIP } from 'node:net';
import {
  type CertificateAuthority,
  createCertificateAuthority,
  issueCertificate,
  loadCertificateAuthority,
} from './certs.ts';

const CA_LIFETIME_MS = 10 * 365 * 24 * 3_600_000;
export const DEFAULT_SERVING_LIFETIME_MS = 30 * 24 * 3_600_000;
/** Renew once this fraction of the serving certificate's lifetime has passed. */
const RENEW_AT_FRACTION = 2 / 3;
/** Even when nothing is due, look again this often (clock jumps, a suspended VM, timer limits). */
export const MAX_CHECK_INTERVAL_MS = 3_600_000;
const MIN_CHECK_INTERVAL_MS = 100;

/** The four Secret keys, PEM text. cert-manager writes the same keys (without ca.key). */
export interface TlsBundle {
  caCert: string;
  caKey: string;
  tlsCert: string;
  tlsKey: string;
}

/** What the serving certificate must be valid for. */
interface ServingNames {
  commonName: string;
  dnsNames: string[];
  ipAddresses: string[];
}

interface Validity {
  notBefore: Date;
  notAfter: Date;
}

/**
 * The webhook Service's DNS names, plus the host of a configured webhook URL (out-of-cluster runs
 * and tests register by URL); a loopback URL gets every loopback spelling, as clients differ.
 */
export function servingNames(options: { service: string; namespace: string; url?: string }): ServingNames {
  const { service, namespace } = options;
  const dnsNames = [
    service,
    `${service}.${namespace}`,
    `${service}.${namespace}.svc`,
    `${service}.${namespace}.svc.cluster.local`,
  ];
  const ipAddresses: string[] = [];
  if (options.url !== undefined) {
    const host = new URL(options.url).hostname.replace(/^\[(.*)\]$/, '$1');
    if (isIP(host) !== 0) ipAddresses.push(host);
    else dnsNames.push(host.toLowerCase());
    if (isLoopback(host)) {
      dnsNames.push('localhost');
      ipAddresses.push('127.0.0.1', '::1');
    }
  }
  return {
    commonName: `${service}.${namespace}.svc`,
    dnsNames: unique(dnsNames),
    ipAddresses: unique(ipAddresses),
  };
}

function isLoopback(host: string): boolean {
  return host === 'localhost' || host === '::1' || /^127\.\d+\.\d+\.\d+$/.test(host);
}

function unique(values: string[]): string[] {
  return [...new Set(values)];
}

/** When a certificate should be renewed: RENEW_AT_FRACTION of the way from notBefore to notAfter. */
export function renewalTime(validity: Validity): Date {
  const start = validity.notBefore.getTime();
  return new Date(start + (validity.notAfter.getTime() - start) * RENEW_AT_FRACTION);
}

export function isRenewalDue(validity: Validity, now: Date): boolean {
  return now.getTime() >= renewalTime(validity).getTime();
}

/** How long to sleep before the next look at the certificate. */
export function nextCheckDelay(validity: Validity, now: Date): number {
  const untilRenewal = renewalTime(validity).getTime() - now.getTime();
  return Math.min(MAX_CHECK_INTERVAL_MS, Math.max(MIN_CHECK_INTERVAL_MS, untilRenewal));
}

/** The facts about a stored bundle that decide what to do with it (see judgeBundle). */
export interface BundleFacts {
  ca?: Validity & { isCA: boolean; keyMatches: boolean };
  serving?: Validity & {
    serial: string;
    dnsNames: string[];
    ipAddresses: string[];
    issuedByCa: boolean;
    keyMatches: boolean;
  };
}

type BundleVerdict =
  | { action: 'serve' }
  /** Keep the CA (the caBundle stays), issue a new serving certificate. */
  | { action: 'renew'; why: string }
  /** The CA itself is missing or unusable: start over with a new CA (the caBundle changes). */
  | { action: 'recreate'; why: string };

export interface Wanted {
  names: ServingNames;
  servingLifetimeMs: number;
}

/**
 * What to do with a stored bundle. Pure, so every replica reaches the same verdict about the same
 * Secret and only a real need (never a difference of opinion) leads to a write.
 */
export function judgeBundle(facts: BundleFacts, wanted: Wanted, now: Date): BundleVerdict {
  const { ca, serving } = facts;
  if (ca === undefined) return { action: 'recreate', why: 'no readable CA certificate and key' };
  if (!ca.isCA) return { action: 'recreate', why: 'ca.crt is not a CA certificate' };
  if (!ca.keyMatches) return { action: 'recreate', why: 'ca.key does not belong to ca.crt' };
  // A CA that cannot outlive one more serving certificate is replaced outright; at ten years this
  // is a once-a-decade event (and the only one that changes the caBundle).
  if (ca.notAfter.getTime() - now.getTime() < 2 * wanted.servingLifetimeMs) {
    return { action: 'recreate', why: 'the CA expires too soon' };
  }
  if (serving === undefined) return { action: 'renew', why: 'no readable serving certificate and key' };
  if (!serving.issuedByCa)
    return { action: 'renew', why: 'the serving certificate was not issued by the CA' };
  if (!serving.keyMatches) return { action: 'renew', why: 'tls.key does not belong to tls.crt' };
  const missing = [
    ...wanted.names.dnsNames.filter((n) => !serving.dnsNames.includes(n)),
    ...wanted.names.ipAddresses.filter((ip) => !serving.ipAddresses.includes(ip)),
  ];
  if (missing.length > 0) {
    return { action: 'renew', why: `the serving certificate lacks ${missing.join(', ')}` };
  }
  if (isRenewalDue(serving, now)) return { action: 'renew', why: 'two thirds of its lifetime have passed' };
  // A shortened lifetime (configuration change) takes effect now rather than in up to 30 days.
  // Two seconds of slack: X.509 times have whole seconds, and issuing back-dates notBefore.
  const lifetime = serving.notAfter.getTime() - serving.notBefore.getTime();
  if (lifetime > backdate(wanted.servingLifetimeMs) + wanted.servingLifetimeMs + 2_000) {
    return { action: 'renew', why: 'it lives longer than the configured serving lifetime' };
  }
  return { action: 'serve' };
}

/** Reads the facts judgeBundle needs; unreadable parts come back absent. */
export function bundleFacts(bundle: Partial<TlsBundle>): BundleFacts {
  const facts: BundleFacts = {};
  const ca = parseCertificate(bundle.caCert);
  if (ca !== undefined) {
    facts.ca = { ...validityOf(ca), isCA: ca.ca, keyMatches: keyMatches(ca, bundle.caKey) };
  }
  const serving = parseCertificate(bundle.tlsCert);
  if (serving !== undefined) {
    const sans = subjectAltNames(serving);
    facts.serving = {
      ...validityOf(serving),
      serial: serving.serialNumber,
      dnsNames: sans.dnsNames,
      ipAddresses: sans.ipAddresses,
      issuedByCa: ca !== undefined && serving.checkIssued(ca) && serving.verify(ca.publicKey),
      keyMatches: keyMatches(serving, bundle.tlsKey),
    };
  }
  return facts;
}

function parseCertificate(pem: string | undefined): X509Certificate | undefined {
  if (pem === undefined || pem === '') return undefined;
  try {
    return new X509Certificate(pem);
  } catch {
    return undefined;
  }
}

function validityOf(cert: X509Certificate): Validity {
  return { notBefore: cert.validFromDate, notAfter: cert.validToDate };
}

function keyMatches(cert: X509Certificate, keyPem: string | undefined): boolean {
  if (keyPem === undefined || keyPem === '') return false;
  try {
    return cert.checkPrivateKey(createPrivateKey(keyPem));
  } catch {
    return false;
  }
}

function subjectAltNames(cert: X509Certificate): { dnsNames: string[]; ipAddresses: string[] } {
  const dnsNames: string[] = [];
  const ipAddresses: string[] = [];
  // "DNS:a, DNS:b, IP Address:127.0.0.1" (names that need quoting come quoted; ours never do).
  for (const entry of (cert.subjectAltName ?? '').split(', ')) {
    if (entry.startsWith('DNS:')) dnsNames.push(entry.slice(4));
    else if (entry.startsWith('IP Address:')) ipAddresses.push(normalizeIp(entry.slice(11)));
  }
  return { dnsNames, ipAddresses };
}

/** OpenSSL prints IPv6 SANs in full ("0:0:0:0:0:0:0:1"); compare them in a canonical form. */
function normalizeIp(ip: string): string {
  if (isIP(ip) !== 6) return ip;
  return new URL(`http://[${ip}]/`).hostname.replace(/^\[(.*)\]$/, '$1');
}

/** Back-dating notBefore tolerates clock skew between us and the API server; capped for short lifetimes. */
function backdate(lifetimeMs: number): number {
  return Math.min(60_000, Math.floor(lifetimeMs / 10));
}

/** A CA and a first serving certificate. */
export async function createBundle(wanted: Wanted, now: Date): Promise<TlsBundle> {
  const ca = await createCertificateAuthority(
    `nodeflavor-webhook-ca@${Math.floor(now.getTime() / 1000)}`,
    CA_LIFETIME_MS,
  );
  return { caCert: ca.certPem, caKey: ca.keyPem, ...(await issueServing(ca, wanted, now)) };
}

/** The same CA, a fresh serving certificate (and key). */
export async function renewServing(
  authority: Pick<TlsBundle, 'caCert' | 'caKey'>,
  wanted: Wanted,
  now: Date,
): Promise<TlsBundle> {
  const { caCert, caKey } = authority;
  const ca = await loadCertificateAuthority({ certPem: caCert, keyPem: caKey });
  return { caCert, caKey, ...(await issueServing(ca, wanted, now)) };
}

async function issueServing(
  ca: CertificateAuthority,
  wanted: Wanted,
  now: Date,
): Promise<{ tlsCert: string; tlsKey: string }> {
  const skew = backdate(wanted.servingLifetimeMs);
  const notBefore = new Date(now.getTime() - skew);
  // Never outlive the CA: the API server would reject the chain.
  const validFor = Math.min(
    wanted.servingLifetimeMs + skew,
    ca.cert.notAfter.getTime() - notBefore.getTime(),
  );
  const leaf = await issueCertificate(ca, {
    commonName: wanted.names.commonName,
    dnsNames: wanted.names.dnsNames,
    ipAddresses: wanted.names.ipAddresses,
    usage: 'server',
    validFor,
    notBefore,
  });
  return { tlsCert: leaf.certPem, tlsKey: leaf.keyPem };
}
