// Loading a KubeConfig: an explicit file, else $KUBECONFIG / ~/.kube/config, else in-cluster.
// Every KubeConfig the operator uses is prepared the same way: connections reused, and a
// deadline on every request.
import { existsSync } from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';
import { KubeConfig } from '@kubernetes/client-node';
import { withConnectionReuse } from './connection-reuse.ts';
import { withRequestDeadlines } from './deadlines.ts';

/** Connection reuse and request deadlines (idempotent; `timeoutMs` replaces an earlier deadline). */
export function prepareKubeConfig(kubeConfig: KubeConfig, timeoutMs?: number): KubeConfig {
  return withRequestDeadlines(withConnectionReuse(kubeConfig), timeoutMs);
}

export function loadKubeConfig(path?: string, options: { requestTimeoutMs?: number } = {}): KubeConfig {
  const kc = prepareKubeConfig(new KubeConfig(), options.requestTimeoutMs);
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
