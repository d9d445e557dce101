// Reads the pinned versions (versions.env) and locates the cached binaries built by
// build-binaries.sh.
import { existsSync, readFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));

function readVersions(): Record<string, string> {
  const entries: Record<string, string> = {};
  for (const line of readFileSync(join(here, 'versions.env'), 'utf8').split('\n')) {
    const match = /^([A-Z_]+)=(\S+)/.exec(line.trim());
    if (match?.[1] && match[2]) entries[match[1]] = match[2];
  }
  return entries;
}

export const versions = readVersions();

export function cacheDir(): string {
  return process.env.NODEFLAVOR_CACHE ?? join(homedir(), '.cache', 'nodeflavor');
}

export interface BinaryPaths {
  etcd: string;
  kubeApiserver: string;
  kubeControllerManager: string;
  kubeScheduler: string;
  helm: string;
}

export function binaryPaths(): BinaryPaths {
  const cache = cacheDir();
  return {
    etcd: join(cache, `etcd-${versions.ETCD_VERSION}`, 'etcd'),
    kubeApiserver: join(cache, `k8s-${versions.KUBERNETES_VERSION}`, 'kube-apiserver'),
    kubeControllerManager: join(cache, `k8s-${versions.KUBERNETES_VERSION}`, 'kube-controller-manager'),
    kubeScheduler: join(cache, `k8s-${versions.KUBERNETES_VERSION}`, 'kube-scheduler'),
    helm: join(cache, `helm-${versions.HELM_VERSION}`, 'helm'),
  };
}

/** What a real node needs from the cache (see ../realnode/). */
export interface NodeBinaryPaths {
  kubeadm: string;
  kubelet: string;
  pause: string;
}

export function nodeBinaryPaths(): NodeBinaryPaths {
  const k8s = join(cacheDir(), `k8s-${versions.KUBERNETES_VERSION}`);
  return {
    kubeadm: join(k8s, 'kubeadm'),
    kubelet: join(k8s, 'kubelet'),
    pause: join(cacheDir(), 'pause-1', 'pause'),
  };
}

export function requireBinaries(): BinaryPaths {
  const paths = binaryPaths();
  for (const [name, path] of Object.entries(paths)) {
    if (name !== 'helm' && name !== 'kubeScheduler' && !existsSync(path)) {
      throw new Error(
        `${path} is missing: run 'make binaries' (builds the Kubernetes binaries from Go modules)`,
      );
    }
  }
  return paths;
}

/** Cluster API's managers and CRDs, built by build-binaries.sh (cluster-api target). */
export interface ClusterApiPaths {
  coreManager: string;
  kubeadmBootstrapManager: string;
  crdDir: string;
}

export function clusterApiPaths(): ClusterApiPaths {
  const dir = join(cacheDir(), `cluster-api-${versions.CLUSTER_API_VERSION}`);
  return {
    coreManager: join(dir, 'capi-manager'),
    kubeadmBootstrapManager: join(dir, 'kubeadm-bootstrap-manager'),
    crdDir: join(dir, 'crds'),
  };
}

/** Why Cluster API cannot run here, or undefined when its managers and CRDs are built. */
export function clusterApiMissing(): string | undefined {
  for (const path of Object.values(clusterApiPaths())) {
    if (!existsSync(path))
      return `${path} is missing: run 'make binaries' (builds Cluster API from Go modules)`;
  }
  return undefined;
}
