// Kubelet client CSRs made by hand as a bootstrap-token holder, the way an insider with one
// legitimate token would: any node name, any subject, usages, key or duration. Each is a real
// CSR created through the API server with the token's credentials, so spec.username is real.
import 'reflect-metadata';
import { webcrypto } from 'node:crypto';
import { CertificatesV1Api } from '@kubernetes/client-node';
import * as x509 from '@peculiar/x509';
import type { PlainIssuedToken } from '../../../src/tokenissuer/issuance/issue.ts';
import { KubeHttp } from '../kubelet-sim/http.ts';
import { KUBELET_SIGNER } from '../kubelet-sim/kubelet.ts';
import type { E2EEnvironment } from './environment.ts';
import { waitFor } from './wait.ts';

x509.cryptoProvider.set(webcrypto as unknown as Parameters<typeof x509.cryptoProvider.set>[0]);

export interface HandMadeCsr {
  nodeName: string;
  /** Default: exactly system:nodes. */
  organizations?: string[];
  /** DNS subject alternative names (a kubelet client request has none). */
  dnsNames?: string[];
  /** Default: digital signature + client auth, as a kubelet with an ECDSA key asks. */
  usages?: string[];
  /** Default ECDSA P-256, as a kubelet makes. */
  key?: 'ecdsa-p256' | 'rsa-1024';
  expirationSeconds?: number;
}

const KEY_ALGORITHMS = {
  'ecdsa-p256': { name: 'ECDSA', namedCurve: 'P-256', hash: 'SHA-256' },
  'rsa-1024': {
    name: 'RSASSA-PKCS1-v1_5',
    modulusLength: 1024,
    publicExponent: new Uint8Array([1, 0, 1]),
    hash: 'SHA-256',
  },
} as const;

/** The bootstrap token (id.secret) of an issued token, as its holder has it. */
export function bootstrapTokenOf(issued: PlainIssuedToken): string {
  return `${issued.tokenId}.${issued.bootstrapToken.secret.reveal()}`;
}

/** Creates the CSR as the bootstrap token's user and returns its name. */
export async function createCsrAs(
  env: E2EEnvironment,
  bootstrapToken: string,
  csr: HandMadeCsr,
): Promise<string> {
  const algorithm = KEY_ALGORITHMS[csr.key ?? 'ecdsa-p256'];
  const keys = (await webcrypto.subtle.generateKey(algorithm, false, [
    'sign',
    'verify',
  ])) as webcrypto.CryptoKeyPair;
  const name = [
    `CN=system:node:${csr.nodeName}`,
    ...(csr.organizations ?? ['system:nodes']).map((o) => `O=${o}`),
  ].join(', ');
  const request = await x509.Pkcs10CertificateRequestGenerator.create({
    name,
    keys,
    signingAlgorithm: algorithm,
    extensions: csr.dnsNames?.length
      ? [
          new x509.SubjectAlternativeNameExtension(
            csr.dnsNames.map((value) => ({ type: 'dns' as const, value })),
          ),
        ]
      : [],
  });
  const http = new KubeHttp(env.server, { ca: env.caPem, bearerToken: bootstrapToken });
  try {
    const created = await http.must<{ metadata: { name: string } }>(
      'POST',
      '/apis/certificates.k8s.io/v1/certificatesigningrequests',
      {
        apiVersion: 'certificates.k8s.io/v1',
        kind: 'CertificateSigningRequest',
        metadata: { generateName: 'csr-' },
        spec: {
          request: Buffer.from(request.toString('pem')).toString('base64'),
          signerName: KUBELET_SIGNER,
          usages: csr.usages ?? ['digital signature', 'client auth'],
          ...(csr.expirationSeconds ? { expirationSeconds: csr.expirationSeconds } : {}),
        },
      },
    );
    return created.metadata.name;
  } finally {
    http.close();
  }
}

export interface CsrDecision {
  type: 'Approved' | 'Denied';
  reason?: string;
  message?: string;
  /** Whether the signer issued a certificate (after approval). */
  certificate: boolean;
}

/** Waits until the CSR is approved (and signed) or denied; returns who decided what. */
export async function csrDecision(
  env: E2EEnvironment,
  name: string,
  timeoutMs = 30_000,
): Promise<CsrDecision> {
  return waitFor(
    async () => {
      const csr = await env.kubeConfig
        .makeApiClient(CertificatesV1Api)
        .readCertificateSigningRequest({ name });
      const condition = csr.status?.conditions?.find((c) => c.type === 'Approved' || c.type === 'Denied');
      if (!condition) return undefined;
      if (condition.type === 'Approved' && !csr.status?.certificate) return undefined;
      return {
        type: condition.type as CsrDecision['type'],
        reason: condition.reason,
        message: condition.message,
        certificate: Boolean(csr.status?.certificate),
      };
    },
    { what: `CSR ${name} to be decided`, timeoutMs },
  );
}
