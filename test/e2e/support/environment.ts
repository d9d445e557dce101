// What every e2e test file needs: the cluster from E2E_KUBECONFIG (set by the global setup or
// by the caller), admin clients, and the join facts (endpoint, CA hash).
import { readFileSync } from 'node:fs';
import { CoreV1Api, KubeConfig } from '@kubernetes/client-node';
import { parse } from 'yaml';
import { caCertHash } from '../../../src/pki/certs.ts';

export interface E2EEnvironment {
  kubeconfigPath: string;
  kubeConfig: KubeConfig;
  core: CoreV1Api;
  server: string;
  /** host:port, as in a JoinConfiguration. */
  apiServerEndpoint: string;
  caPem: string;
  caCertHash: string;
}

let cached: Promise<E2EEnvironment> | undefined;

async function load(): Promise<E2EEnvironment> {
  const kubeconfigPath = process.env.E2E_KUBECONFIG;
  if (!kubeconfigPath) {
    throw new Error(
      'E2E_KUBECONFIG is not set: run the e2e suite with `make test-e2e` (it starts a control plane) or point it at a cluster',
    );
  }
  return loadEnvironment(kubeconfigPath);
}

/** The environment of the cluster an admin kubeconfig names (e.g. a test file's own control plane). */
export async function loadEnvironment(kubeconfigPath: string): Promise<E2EEnvironment> {
  const kubeConfig = new KubeConfig();
  kubeConfig.loadFromFile(kubeconfigPath);
  const core = kubeConfig.makeApiClient(CoreV1Api);
  // Join facts come from cluster-info, exactly as a node admin's kubeadm sees them.
  const clusterInfo = await core.readNamespacedConfigMap({ name: 'cluster-info', namespace: 'kube-public' });
  const info = parse(clusterInfo.data?.kubeconfig ?? '') as {
    clusters: { cluster: Record<string, string> }[];
  };
  const cluster = info.clusters[0]?.cluster ?? {};
  const caPem = Buffer.from(cluster['certificate-authority-data'] ?? '', 'base64').toString('utf8');
  // The admin kubeconfig's server is reachable from here (cluster-info may hold an in-cluster address).
  const server = kubeConfig.getCurrentCluster()?.server ?? cluster.server ?? '';
  return {
    kubeconfigPath,
    kubeConfig,
    core,
    server,
    apiServerEndpoint: new URL(server).host,
    caPem,
    caCertHash: caCertHash(caPem),
  };
}

export function e2eEnvironment(): Promise<E2EEnvironment> {
  cached ??= load();
  return cached;
}

export function readKubeconfig(path: string): string {
  return readFileSync(path, 'utf8');
}
