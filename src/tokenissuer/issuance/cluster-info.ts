// What a joining node needs to trust the cluster, taken from kube-public/cluster-info exactly as
// kubeadm does: the API server endpoint, the cluster CA (for the discovery kubeconfig) and the
// `sha256:` pin of its public key (for token discovery).
import { parse } from 'yaml';
import { caCertHash } from '../../pki/certs.ts';

export interface ClusterJoinFacts {
  /** host:port. */
  apiServerEndpoint: string;
  caCertHash: string;
  /** The CA certificate(s) as cluster-info carries them, PEM. */
  caCertPem: string;
}

/** Parses cluster-info's `kubeconfig` entry; `endpointOverride` replaces its server (host:port). */
export function clusterJoinFacts(kubeconfig: string, endpointOverride?: string): ClusterJoinFacts {
  let config: { clusters?: { cluster?: Record<string, unknown> }[] } | null;
  try {
    config = parse(kubeconfig) as typeof config;
  } catch {
    throw new Error('kube-public/cluster-info: its kubeconfig is not valid YAML');
  }
  const cluster = config?.clusters?.[0]?.cluster ?? {};
  const caData = cluster['certificate-authority-data'];
  if (typeof caData !== 'string' || caData === '') {
    throw new Error('kube-public/cluster-info: its kubeconfig has no certificate-authority-data');
  }
  const caCertPem = Buffer.from(caData, 'base64').toString('utf8');
  let hash: string;
  try {
    hash = caCertHash(caCertPem);
  } catch {
    throw new Error('kube-public/cluster-info: certificate-authority-data is not a PEM certificate');
  }
  return { apiServerEndpoint: endpointOverride ?? endpointOf(cluster.server), caCertHash: hash, caCertPem };
}

function endpointOf(server: unknown): string {
  if (typeof server !== 'string' || server === '') {
    throw new Error(
      'kube-public/cluster-info: its kubeconfig has no server (set issuance.apiServerEndpoint)',
    );
  }
  let url: URL;
  try {
    url = new URL(server);
  } catch {
    throw new Error(`kube-public/cluster-info: server '${server}' is not a URL`);
  }
  // URL drops the scheme's default port; kubeadm's endpoint always names one.
  return url.port === '' ? `${url.hostname}:443` : url.host;
}

/**
 * Token discovery adds a JWS per live token to cluster-info, a ConfigMap capped at 1 MiB: past
 * 12,325 signatures it cannot be written, and then no token-discovery join succeeds, kubeadm's own
 * included. Why issuing one more must wait, or undefined when there is room.
 */
export function clusterInfoFullReason(signatures: number, limit: number): string | undefined {
  if (signatures < limit) return undefined;
  return (
    `kube-public/cluster-info already carries ${signatures} token signatures (limit ${limit}, ` +
    'issuance.maxClusterInfoSignatures): token discovery would push it towards its 1 MiB cap, past ' +
    'which no node can join by token discovery. Retry once tokens are used, revoked or expired, or ' +
    'issue with file discovery (issuance.discovery: file, the default)'
  );
}
