// Loading a KubeConfig: an explicit file, else $KUBECONFIG / ~/.kube/config, else in-cluster.
// Every KubeConfig the operator uses is prepared the same way: connections reused, and a
// deadline on every request. The reading itself is kubeconfig.ts's (client-node only for plugins).
import { existsSync } from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';
import { withConnectionReuse } from './connection-reuse.ts';
import { withRequestDeadlines } from './deadlines.ts';
import {
  type KubeConfig,
  kubeConfigFromDefault,
  kubeConfigFromFile,
  kubeConfigInCluster,
} from './kubeconfig.ts';

export type { KubeConfig } from './kubeconfig.ts';

/** Connection reuse and request deadlines (idempotent; `timeoutMs` replaces an earlier deadline). */
export function prepareKubeConfig<T extends KubeConfig>(kubeConfig: T, timeoutMs?: number): T {
  return withRequestDeadlines(withConnectionReuse(kubeConfig), timeoutMs);
}

export function loadKubeConfig(path?: string, options: { requestTimeoutMs?: number } = {}): KubeConfig {
  if (path) {
    if (!existsSync(path)) throw new Error(`kubeconfig ${path} does not exist: check --kubeconfig`);
    return prepareKubeConfig(kubeConfigFromFile(path), options.requestTimeoutMs);
  }
  if (process.env.KUBERNETES_SERVICE_HOST && !process.env.KUBECONFIG) {
    return prepareKubeConfig(kubeConfigInCluster(), options.requestTimeoutMs);
  }
  const fallback = join(homedir(), '.kube', 'config');
  const first = process.env.KUBECONFIG?.split(':')[0] || fallback;
  if (!existsSync(first)) {
    throw new Error('no kubeconfig found: pass --kubeconfig, set KUBECONFIG, or run in a cluster');
  }
  return prepareKubeConfig(kubeConfigFromDefault(fallback), options.requestTimeoutMs);
}
