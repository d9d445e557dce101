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
  helm: string;
}

export function binaryPaths(): BinaryPaths {
  const cache = cacheDir();
  return {
    etcd: join(cache, `etcd-${versions.ETCD_VERSION}`, 'etcd'),
    kubeApiserver: join(cache, `k8s-${versions.KUBERNETES_VERSION}`, 'kube-apiserver'),
    kubeControllerManager: join(cache, `k8s-${versions.KUBERNETES_VERSION}`, 'kube-controller-manager'),
    helm: join(cache, `helm-${versions.HELM_VERSION}`, 'helm'),
  };
}

export function requireBinaries(): BinaryPaths {
  const paths = binaryPaths();
  for (const [name, path] of Object.entries(paths)) {
    if (name !== 'helm' && !existsSync(path)) {
      throw new Error(
        `${path} is missing: run 'make binaries' (builds the Kubernetes binaries from Go modules)`,
      );
    }
  }
  return paths;
}
