// The Helm chart, for real: render it with the pinned helm, apply what an out-of-cluster run needs
// (CRDs, namespace-scoped and cluster RBAC, ServiceAccount, FlavorClasses) server-side, and give
// the operator a kubeconfig holding a TokenRequest token of the chart's ServiceAccount, so a test
// or the demo proves that the chart's RBAC is enough.
import { execFile } from 'node:child_process';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { KubeConfig } from '@kubernetes/client-node';
import { parse, parseAllDocuments } from 'yaml';
import { newKeyRing } from '../../../src/flavor/keyring.ts';
import { createKeyRingSecret } from '../../../src/kube/keyring-store.ts';
import { kubeJson } from '../../../src/runtime/fetch.ts';
import { applyObjects } from '../cluster/apply.ts';
import { kubeconfigYaml } from '../cluster/controlplane.ts';
import { binaryPaths } from '../cluster/versions.ts';
import type { E2EEnvironment } from './environment.ts';
import { ensureNamespace, OPERATOR_NAMESPACE } from './nodeflavor.ts';
import { tempDirForThisProcess } from './temp-dir.ts';

const run = promisify(execFile);
const chartDir = join(import.meta.dirname, '..', '..', '..', 'deploy', 'helm', 'nodeflavor');
/** What only a Pod in the cluster needs; an out-of-cluster run skips these. */
const IN_CLUSTER_KINDS = new Set([
  'Deployment',
  'Service',
  'PodDisruptionBudget',
  'ServiceMonitor',
  'Ingress',
  'Issuer',
  'Certificate',
]);

export interface KubeObject {
  apiVersion: string;
  kind: string;
  metadata: { name: string; namespace?: string };
}

export async function renderChart(
  namespace: string,
  set: Record<string, string> = {},
  release = 'nodeflavor',
): Promise<KubeObject[]> {
  const helm = binaryPaths().helm;
  if (!existsSync(helm)) throw new Error(`${helm} is missing: run 'make binaries'`);
  const args = ['template', release, chartDir, '--namespace', namespace, '--include-crds'];
  for (const [key, value] of Object.entries(set)) args.push('--set', `${key}=${value}`);
  const { stdout } = await run(helm, args, { maxBuffer: 32 * 1024 * 1024 });
  return parseAllDocuments(stdout)
    .map((doc) => doc.toJS() as KubeObject | null)
    .filter((o): o is KubeObject => o !== null && typeof o === 'object' && 'kind' in o);
}

export interface ChartInstall {
  /** A kubeconfig authenticating as the chart's ServiceAccount. */
  kubeconfigPath: string;
  serviceAccount: string;
  namespace: string;
  objects: KubeObject[];
}

/** Applies the chart's cluster objects and returns a kubeconfig for its ServiceAccount. */
export async function installChartOutOfCluster(
  env: E2EEnvironment,
  options: {
    namespace: string;
    dir: string;
    set?: Record<string, string>;
    release?: string;
    /**
     * Create the release's HMAC key ring if it is missing, as the operator did on the suite's
     * first install. The e2e files share one cluster: a later file finds FlavoredTokens and
     * verified nodes of earlier ones, where the operator rightly refuses to make a new ring.
     */
    keyRing?: boolean;
  },
): Promise<ChartInstall> {
  await ensureNamespace(env, options.namespace);
  const objects = await renderChart(
    options.namespace,
    { replicaCount: '1', ...options.set },
    options.release,
  );
  const wanted = objects.filter((o) => !IN_CLUSTER_KINDS.has(o.kind));
  // CRDs first: FlavorClasses from values need them established.
  const crds = wanted.filter((o) => o.kind === 'CustomResourceDefinition');
  await applyObjects(env.kubeconfigPath, crds);
  const { installCrds } = await import('./nodeflavor.ts');
  await installCrds(env);
  await applyObjects(
    env.kubeconfigPath,
    wanted.filter((o) => o.kind !== 'CustomResourceDefinition'),
  );
  const serviceAccount = wanted.find((o) => o.kind === 'ServiceAccount')?.metadata.name;
  if (!serviceAccount) throw new Error('the chart rendered no ServiceAccount');
  if (options.keyRing) {
    const location = { namespace: options.namespace, name: `${options.release ?? 'nodeflavor'}-hmac-keys` };
    await createKeyRingSecret(env.kubeConfig, location, newKeyRing()); // false: it exists already
  }
  const token = await kubeJson<{ status: { token: string } }>(
    env.kubeConfig,
    'POST',
    `/api/v1/namespaces/${options.namespace}/serviceaccounts/${serviceAccount}/token`,
    {
      body: {
        apiVersion: 'authentication.k8s.io/v1',
        kind: 'TokenRequest',
        spec: { expirationSeconds: 24 * 3600 },
      },
    },
  );
  const kubeconfigPath = join(options.dir, 'operator.kubeconfig');
  writeFileSync(
    kubeconfigPath,
    kubeconfigYaml(env.server, env.caPem, { token: token.status.token }, 'nodeflavor-operator'),
    { mode: 0o600 },
  );
  return { kubeconfigPath, serviceAccount, namespace: options.namespace, objects };
}

/**
 * The args of the chart's operator container, as a process out of the cluster runs them: without
 * `--node-name=$(NODE_NAME)`, which only the kubelet expands (the pod's spec.nodeName). Out of the
 * cluster the process has no Node of its own to check; the real-node suite runs the check in Pods.
 */
export function chartOperatorArgs(install: ChartInstall): string[] {
  const deployment = install.objects.find((o) => o.kind === 'Deployment') as
    | (KubeObject & { spec: { template: { spec: { containers: { args: string[] }[] } } } })
    | undefined;
  const args = deployment?.spec.template.spec.containers[0]?.args ?? [];
  return args.filter((arg) => !arg.startsWith('--node-name='));
}

let prepared: { install: ChartInstall; kubeConfig: KubeConfig } | undefined;

/**
 * Installs the chart (out of cluster) into the operator namespace once per test process and
 * returns the identity every operator in the e2e suite runs as: the chart's ServiceAccount.
 */
export async function prepareOperatorIdentity(
  env: E2EEnvironment,
  set: Record<string, string> = {},
): Promise<{ install: ChartInstall; kubeConfig: KubeConfig }> {
  if (prepared && Object.keys(set).length === 0) return prepared;
  const dir = tempDirForThisProcess('nodeflavor-operator-');
  const install = await installChartOutOfCluster(env, {
    namespace: OPERATOR_NAMESPACE,
    dir,
    set,
    keyRing: true,
  });
  const kubeConfig = new KubeConfig();
  kubeConfig.loadFromFile(install.kubeconfigPath);
  prepared = { install, kubeConfig };
  return prepared;
}

/** The prepared operator identity (prepareOperatorIdentity must have run in a before hook). */
export function operatorIdentity(): { install: ChartInstall; kubeConfig: KubeConfig } {
  if (!prepared) throw new Error('call prepareOperatorIdentity(env) in a before() hook first');
  return prepared;
}

/**
 * A kubeconfig file with the operator identity's credentials and another server (a fault
 * proxy in front of the API server), written into `dir`.
 */
export function operatorKubeconfigVia(server: string, dir: string, caPem: string): string {
  const original = parse(readFileSync(operatorIdentity().install.kubeconfigPath, 'utf8')) as {
    users: { user: { token: string } }[];
  };
  const path = join(dir, `operator-via-${new URL(server).port}.kubeconfig`);
  writeFileSync(
    path,
    kubeconfigYaml(server, caPem, { token: original.users[0]?.user.token ?? '' }, 'nodeflavor-operator'),
    { mode: 0o600 },
  );
  return path;
}
