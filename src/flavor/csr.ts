// Reading the subject of a kubelet client CSR (PKCS#10) — untrusted bytes, so every failure is a
// reason, never a crash. @peculiar/x509 parses the ASN.1; we also check the self-signature so a
// request that was tampered with after signing is rejected.
//
// The library is loaded on the first CSR, not at start (x509-library.ts).
import type * as X509 from '@peculiar/x509';
import { isDnsSubdomain, NODE_USER_PREFIX } from './resources.ts';
import { loadX509 } from './x509-library.ts';

const MAX_CSR_BYTES = 16 * 1024;

/** The requested key, as far as an approver judges it. */
interface CsrPublicKey {
  algorithm: string;
  /** RSA modulus length. */
  bits?: number;
  /** ECDSA named curve. */
  curve?: string;
}

export type CsrSubject =
  | {
      ok: true;
      nodeName: string;
      organizations: string[];
      hasSubjectAltNames: boolean;
      publicKey: CsrPublicKey;
    }
  | { ok: false; reason: string };

function decodeRequest(x509: typeof X509, request: string): Uint8Array | undefined {
  // spec.request is base64 of a PEM block ("-----BEGIN CERTIFICATE REQUEST-----").
  const decoded = Buffer.from(request, 'base64');
  if (decoded.length === 0 || decoded.length > MAX_CSR_BYTES) return undefined;
  const text = decoded.toString('latin1');
  if (text.includes('-----BEGIN')) {
    try {
      return new Uint8Array(x509.PemConverter.decodeFirst(text));
    } catch {
      return undefined;
    }
  }
  return new Uint8Array(decoded); // DER, as some clients send
}

/** Parses a CSR's spec.request and extracts the node name from CN=system:node:<name>. */
export async function parseKubeletCsr(request: string): Promise<CsrSubject> {
  const x509 = await loadX509();
  const der = decodeRequest(x509, request);
  if (!der) return { ok: false, reason: 'the request is empty, too large or not PEM/DER' };
  let csr: X509.Pkcs10CertificateRequest;
  try {
    csr = new x509.Pkcs10CertificateRequest(der);
  } catch {
    return { ok: false, reason: 'the request is not a valid PKCS#10 certificate request' };
  }
  try {
    if (!(await csr.verify())) return { ok: false, reason: 'the request signature does not verify' };
  } catch {
    return { ok: false, reason: 'the request signature cannot be verified' };
  }
  const commonNames = csr.subjectName.getField('CN');
  if (commonNames.length !== 1 || !commonNames[0]?.startsWith(NODE_USER_PREFIX)) {
    return {
      ok: false,
      reason: `the subject must have exactly one CN of the form ${NODE_USER_PREFIX}<name>`,
    };
  }
  const nodeName = commonNames[0].slice(NODE_USER_PREFIX.length);
  if (!isDnsSubdomain(nodeName)) {
    return { ok: false, reason: 'the node name in the CN is not a valid DNS subdomain' };
  }
  const organizations = csr.subjectName.getField('O');
  const hasSubjectAltNames = csr.extensions.some((ext) => ext.type === '2.5.29.17');
  const algorithm = csr.publicKey.algorithm as { name: string; modulusLength?: number; namedCurve?: string };
  const publicKey: CsrPublicKey = { algorithm: algorithm.name };
  if (typeof algorithm.modulusLength === 'number') publicKey.bits = algorithm.modulusLength;
  if (typeof algorithm.namedCurve === 'string') publicKey.curve = algorithm.namedCurve;
  return { ok: true, nodeName, organizations, hasSubjectAltNames, publicKey };
}
