// What a joining node needs to trust the cluster, taken from kube-public/cluster-info exactly as
// kubeadm does: the API server endpoint and the `sha256:` pin of the cluster CA's public key.
import { parse } from 'yaml';
import { caCertHash } from '../pki/certs.ts';

export interface ClusterJoinFacts {
  /** host:port. */
  apiServerEndpoint: string;
  caCertHash: string;
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
  let hash: string;
  try {
    hash = caCertHash(Buffer.from(caData, 'base64').toString('utf8'));
  } catch {
    throw new Error('kube-public/cluster-info: certificate-authority-data is not a PEM certificate');
  }
  return { apiServerEndpoint: endpointOverride ?? endpointOf(cluster.server), caCertHash: hash };
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
