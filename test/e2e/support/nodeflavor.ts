// nodeflavor-specific e2e helpers: install the CRDs, create FlavorClasses, issue tokens with the
// real issuance library, run the operator as a real subprocess (so it can be SIGKILLed).
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import {
  ApiextensionsV1Api,
  type CoreV1Api,
  CustomObjectsApi,
  type KubeConfig,
} from '@kubernetes/client-node';
import { parse } from 'yaml';
import { loadKeyRing } from '../../../src/kube/keyring-store.ts';
import { KubeTokenStore } from '../../../src/kube/tokens.ts';
import { IssuanceSettingsSchema } from '../../../src/tokenissuer/config.ts';
import { issueToken, type PlainIssuedToken } from '../../../src/tokenissuer/issuance/issue.ts';
import { applyObjects } from '../cluster/apply.ts';
import { ManagedProcess } from '../cluster/process.ts';
import { parseJoinConfiguration } from '../kubelet-sim/join-config.ts';
import { SimulatedKubelet } from '../kubelet-sim/kubelet.ts';
import { operatorIdentity } from './chart.ts';
import type { E2EEnvironment } from './environment.ts';
import { waitFor } from './wait.ts';

export const OPERATOR_NAMESPACE = 'nodeflavor';
const repoRoot = join(import.meta.dirname, '..', '..', '..');

export async function installCrds(env: E2EEnvironment): Promise<void> {
  const dir = join(repoRoot, 'deploy', 'crds');
  const crds = readdirSync(dir)
    .filter((f) => f.endsWith('.yaml'))
    .map((f) => parse(readFileSync(join(dir, f), 'utf8')) as { metadata: { name: string } });
  await applyObjects(env.kubeconfigPath, crds);
  await waitEstablished(
    env.kubeConfig,
    crds.map((crd) => crd.metadata.name),
  );
}

/** Waits until each named CRD is Established (its resources can be created). */
export async function waitEstablished(kubeConfig: KubeConfig, names: string[]): Promise<void> {
  const api = kubeConfig.makeApiClient(ApiextensionsV1Api);
  for (const name of names) {
    await waitFor(
      async () => {
        const current = await api.readCustomResourceDefinition({ name });
        return current.status?.conditions?.some((c) => c.type === 'Established' && c.status === 'True');
      },
      { what: `CRD ${name} to be Established`, timeoutMs: 30_000 },
    );
  }
}

/** `nodeflavor <args>` from the sources (tsx), as a subprocess the guard kills if the test dies. */
export function nodeflavorProcess(
  name: string,
  args: string[],
  logPath: string,
  options: { nodeArgs?: string[]; built?: boolean; env?: NodeJS.ProcessEnv } = {},
): ManagedProcess {
  const entry = options.built
    ? [join(repoRoot, 'dist', 'src', 'cli', 'nodeflavor.js')]
    : ['--import', 'tsx', join(repoRoot, 'src', 'cli', 'nodeflavor.ts')];
  return new ManagedProcess(
    name,
    process.execPath,
    [...(options.nodeArgs ?? []), ...entry, ...args],
    logPath,
    options.env,
  );
}

export async function ensureNamespace(env: E2EEnvironment, name: string): Promise<void> {
  await applyObjects(env.kubeconfigPath, [{ apiVersion: 'v1', kind: 'Namespace', metadata: { name } }]);
}

export interface FlavorClassSpecInput {
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
  taints?: { key: string; value?: string; effect: string }[];
  description?: string;
  measuredBoot?: { pcrs: { index: number; sha256: string }[] };
}

export async function applyFlavorClass(
  env: E2EEnvironment,
  name: string,
  spec: FlavorClassSpecInput,
): Promise<void> {
  await applyObjects(env.kubeconfigPath, [
    { apiVersion: 'nodeflavor.io/v1alpha1', kind: 'FlavorClass', metadata: { name }, spec },
  ]);
}

/** Deletes a FlavorClass; one already gone is fine (clean-up after a test or a benchmark). */
export async function deleteFlavorClass(env: E2EEnvironment, name: string): Promise<void> {
  await customObjects(env.kubeConfig)
    .deleteClusterCustomObject({ group: 'nodeflavor.io', version: 'v1alpha1', plural: 'flavorclasses', name })
    .catch(() => undefined);
}

export function customObjects(kubeConfig: KubeConfig): CustomObjectsApi {
  return kubeConfig.makeApiClient(CustomObjectsApi);
}

/** Issues a token through the same library the API and CLI use (as the admin). */
export async function issue(
  env: E2EEnvironment,
  flavor: string,
  options: {
    ttl?: string;
    expiresAt?: string;
    maxUses?: number;
    nodeName?: string;
    nodeNamePattern?: string;
    /** The bootstrap group the token carries (default: nodeflavor's own). */
    authExtraGroups?: string;
  } = {},
): Promise<PlainIssuedToken> {
  const { authExtraGroups, ...request } = options;
  return issueToken(
    {
      kube: new KubeTokenStore(env.kubeConfig),
      keyRing: () =>
        loadKeyRing(env.kubeConfig, {
          namespace: OPERATOR_NAMESPACE,
          name: 'nodeflavor-hmac-keys',
          createIfMissing: true,
        }),
      settings: IssuanceSettingsSchema.parse({
        apiServerEndpoint: env.apiServerEndpoint,
        ...(authExtraGroups ? { authExtraGroups } : {}),
      }),
    },
    { flavorClassName: flavor, ...request },
  );
}

/**
 * What a node admin puts on the machine: the JoinConfiguration and, with file discovery, the
 * discovery kubeconfig at the path it names. Issued material (IssuedToken.material, the API's
 * answer) has these fields; a plain string is a JoinConfiguration alone (token discovery).
 */
export type JoinFiles =
  | string
  | { joinConfiguration: string; discoveryKubeconfig?: string; discoveryKubeconfigPath?: string };

/** The node's files for the simulated kubelet: only what the material supplies, never the host's disk. */
export function nodeFiles(material: JoinFiles): (path: string) => string | undefined {
  if (typeof material === 'string') return () => undefined;
  const { discoveryKubeconfig, discoveryKubeconfigPath } = material;
  return (path) => (path === discoveryKubeconfigPath ? discoveryKubeconfig : undefined);
}

/** Joins a simulated kubelet with issued join material, exactly as a node admin would. */
export async function joinWith(
  material: JoinFiles,
  nodeName: string,
  options: {
    extraLabels?: Record<string, string>;
    timeoutMs?: number;
    beforeRegister?: () => Promise<void>;
    /** A new connection per request (behind a load balancer: requests alternate API servers). */
    connectionPerRequest?: boolean;
  } = {},
): Promise<SimulatedKubelet> {
  const joinConfiguration = typeof material === 'string' ? material : material.joinConfiguration;
  const kubelet = new SimulatedKubelet(nodeName, parseJoinConfiguration(joinConfiguration), {
    extraLabels: options.extraLabels,
    timeoutMs: options.timeoutMs ?? 30_000,
    beforeRegister: options.beforeRegister,
    ...(options.connectionPerRequest ? { connectionPerRequest: true } : {}),
    readFile: nodeFiles(material),
  });
  await kubelet.join();
  return kubelet;
}

/** `nodeflavor run` as a subprocess (the guard kills it if the test process dies). */
export function startOperator(
  logPath: string,
  extraArgs: string[] = [],
  options: {
    failpoints?: string[];
    metricsPort?: number;
    /** Node.js flags such as the chart's heap cap or --cpu-prof (benchmarks). */
    nodeArgs?: string[];
    /** Run the compiled dist/ as the image does (benchmarks build it first), not the sources via tsx. */
    built?: boolean;
    /** Environment variables besides this process's own (the image's MALLOC_ARENA_MAX, say). */
    env?: Record<string, string>;
    /** Another identity than the chart's ServiceAccount (a kubeconfig file). */
    kubeconfigPath?: string;
    /**
     * Pass --allow-unguarded-nodes (default): these operators run --no-webhook, and most tests
     * register no guard, so the controller would otherwise refuse to start.
     */
    allowUnguarded?: boolean;
  } = {},
): ManagedProcess {
  return nodeflavorProcess(
    'nodeflavor',
    [
      'run',
      // As the Helm chart's ServiceAccount: the suite proves the chart's RBAC is enough.
      '--kubeconfig',
      options.kubeconfigPath ?? operatorIdentity().install.kubeconfigPath,
      '--service-account',
      operatorIdentity().install.serviceAccount,
      '--namespace',
      OPERATOR_NAMESPACE,
      '--no-webhook',
      '--no-issuer',
      '--metrics-address',
      `127.0.0.1:${options.metricsPort ?? 0}`,
      '--binding-grace',
      '5s',
      ...(options.allowUnguarded === false ? [] : ['--allow-unguarded-nodes']),
      ...extraArgs,
    ],
    logPath,
    {
      ...(options.nodeArgs ? { nodeArgs: options.nodeArgs } : {}),
      ...(options.built ? { built: true } : {}),
      env: { ...process.env, ...options.env, NODEFLAVOR_FAILPOINTS: (options.failpoints ?? []).join(',') },
    },
  );
}

/** A ClusterRole `name` granting verb `use` on these FlavorClasses, bound to a ServiceAccount. */
export function flavorUseRbac(
  name: string,
  serviceAccount: { name: string; namespace: string },
  flavors: string[],
) {
  return [
    {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'ClusterRole',
      metadata: { name },
      rules: [
        {
          apiGroups: ['nodeflavor.io'],
          resources: ['flavorclasses'],
          resourceNames: flavors,
          verbs: ['use'],
        },
      ],
    },
    {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'ClusterRoleBinding',
      metadata: { name },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name },
      subjects: [{ kind: 'ServiceAccount', ...serviceAccount }],
    },
  ];
}

/** A token of a ServiceAccount (TokenRequest), for `audiences` (the API server's when empty). */
export async function serviceAccountToken(
  env: E2EEnvironment,
  namespace: string,
  name: string,
  options: { audiences?: string[]; expirationSeconds?: number } = {},
): Promise<string> {
  const request = await env.core.createNamespacedServiceAccountToken({
    name,
    namespace,
    body: {
      spec: { expirationSeconds: options.expirationSeconds ?? 24 * 3600, audiences: options.audiences ?? [] },
    },
  });
  const token = request.status?.token;
  if (!token) throw new Error(`no token for ServiceAccount ${namespace}/${name}`);
  return token;
}

export function core(env: E2EEnvironment): CoreV1Api {
  return env.core;
}

/** GET a path of an operator's metrics endpoint: [status, body], or [0, ''] when it does not answer. */
export async function opsGet(port: number, path: string): Promise<[number, string]> {
  try {
    const response = await fetch(`http://127.0.0.1:${port}${path}`, { signal: AbortSignal.timeout(2000) });
    return [response.status, await response.text()];
  } catch {
    return [0, ''];
  }
}

/** One series of an operator's /metrics (e.g. `name{label="x"}`), 0 when absent or unreachable. */
export async function metricValue(port: number, series: string): Promise<number> {
  return (await metricsSnapshot(port))(series);
}

/** An operator's /metrics read once: every series from one moment; 0 when absent or unreachable. */
export async function metricsSnapshot(port: number): Promise<(series: string) => number> {
  const [, text] = await opsGet(port, '/metrics');
  const lines = text.split('\n');
  return (series) => Number(lines.find((l) => l.startsWith(`${series} `))?.split(' ')[1] ?? 0);
}

export interface ApiRequestCount {
  method: string;
  code: string;
  resource: string;
  count: number;
}

/** An operator's requests to the API so far (nodeflavor_kube_api_requests_total), by series. */
export async function apiRequestCounts(port: number): Promise<ApiRequestCount[]> {
  const [, text] = await opsGet(port, '/metrics');
  return [
    ...text.matchAll(
      /^nodeflavor_kube_api_requests_total\{method="(\w+)",code="(\d+)",resource="([^"]+)"\} (\d+)/gm,
    ),
  ].map(([, method = '', code = '', resource = '', count = '0']) => ({
    method,
    code,
    resource,
    count: Number(count),
  }));
}

/** Until an operator has reconciled at least `nodes` Nodes and every work queue is idle. */
export async function waitOperatorSettled(
  port: number,
  nodes: number,
  options: { timeoutMs: number; intervalMs?: number },
): Promise<void> {
  await waitFor(
    async () => {
      const metric = await metricsSnapshot(port);
      return (
        metric('nodeflavor_reconciles_total{queue="nodes",result="ok"}') >= nodes &&
        ['joins', 'nodes', 'tokens', 'flavorclasses'].every(
          (queue) =>
            metric(`nodeflavor_workqueue_depth{queue="${queue}"}`) === 0 &&
            metric(`nodeflavor_workqueue_active{queue="${queue}"}`) === 0,
        )
      );
    },
    {
      what: `the operator on port ${port} to reconcile ${nodes} nodes with every queue idle`,
      timeoutMs: options.timeoutMs,
      intervalMs: options.intervalMs ?? 200,
    },
  );
}
