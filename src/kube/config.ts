// Loading a KubeConfig: an explicit file, else $KUBECONFIG / ~/.kube/config, else in-cluster.
import { existsSync } from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';
import { KubeConfig } from '@kubernetes/client-node';
import { withConnectionReuse } from './connection-reuse.ts';

export function loadKubeConfig(path?: string): KubeConfig {
  const kc = withConnectionReuse(new KubeConfig());
  if (path) {
    if (!existsSync(path)) throw new Error(`kubeconfig ${path} does not exist: check --kubeconfig`);
    kc.loadFromFile(path);
    return kc;
  }
  if (process.env.KUBERNETES_SERVICE_HOST && !process.env.KUBECONFIG) {
    kc.loadFromCluster();
    return kc;
  }
  const fallback = process.env.KUBECONFIG ?? join(homedir(), '.kube', 'config');
  if (!existsSync(fallback.split(':')[0] ?? fallback)) {
    throw new Error('no kubeconfig found: pass --kubeconfig, set KUBECONFIG, or run in a cluster');
  }
  kc.loadFromDefault();
  return kc;
}
