// P3 issuance: tokens/s and latency through the issuer API (POST /v1/tokens as a ServiceAccount
// allowed to `use` the flavor, TokenReview authentication) at a few concurrency levels, against
// the floor in the same run: as many raw bootstrap-token Secret creates (POST
// /api/v1/namespaces/kube-system/secrets, the same shape the issuer writes, as the same chart
// ServiceAccount the issuer runs as) at the same concurrency with the same client (an undici Pool,
// HTTP/1.1 keep-alive, one connection per concurrent request). The issuer runs in a process of its
// own (p3-issuer-server.ts: startTokenIssuer as `nodeflavor run` wires it, with the per-caller rate
// limit raised: the CLI has no flag for it). Each level runs floor and issuer in alternating halves
// so that drift hits both alike; between levels the tokens and Secrets are deleted. A third arm,
// the protocol floor, makes the issuance's own requests (a FlavoredToken, its bootstrap Secret
// owned by it, the record read back: ADR 0015) back to back from the benchmark client with no
// other work: the most any issuer that keeps this protocol could reach on the same machine. The
// controller runs throughout (as the chart's ServiceAccount, like P1), so what it spends on new
// tokens is in the API server's CPU per issuance; its own CPU is printed beside the issuer's.
//   node --import tsx bench/p3-issuance.ts [--scale quick] [--cpu-prof]   (or BENCH_CPU_PROF=1)
//        [--profile-level 1|8|32] (the level profiled; default 32)
//        [--reuse-connections]   a diagnostic what-if, not a figure of the product: the issuer's
//        Kubernetes client shares one connection pool (see p3-issuer-server.ts)
import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync } from 'node:fs';
import { cpus, loadavg } from 'node:os';
import { join } from 'node:path';
import { Pool } from 'undici';
import { randomString, TOKEN_ALPHABET } from '../src/flavor/bootstrap-token.ts';
import { ISSUED_ANNOTATION } from '../src/flavor/resources.ts';
import { rfc3339 } from '../src/flavor/rfc3339.ts';
import { kubeJson } from '../src/runtime/fetch.ts';
import {
  DEFAULT_AUTH_EXTRA_GROUP,
  DEFAULT_ISSUER_AUDIENCE,
  DEFAULT_SECRET_DESCRIPTION,
} from '../src/tokenissuer/config.ts';
import { OWNER_ANNOTATION, REQUESTED_BY_ANNOTATION, tokenRecord } from '../src/tokenissuer/issuance/issue.ts';
import { applyObjects } from '../test/e2e/cluster/apply.ts';
import type { ManagedProcess } from '../test/e2e/cluster/process.ts';
import { deleteObjects } from '../test/e2e/support/admission.ts';
import { prepareOperatorIdentity } from '../test/e2e/support/chart.ts';
import { type E2EEnvironment, e2eEnvironment } from '../test/e2e/support/environment.ts';
import { applyFlavorClass, startOperator } from '../test/e2e/support/nodeflavor.ts';
import { waitFor } from '../test/e2e/support/wait.ts';
import {
  benchDir,
  cpuProfile,
  type Figure,
  figure,
  freePort,
  imageEnv,
  log,
  mapLimit,
  runStandalone,
  type Scale,
  startBenchIssuer,
  summary,
  waitReady,
} from './lib.ts';
import { P3_RATE_LIMIT } from './p3-issuer-server.ts';
import {
  controlPlanePids,
  MetricDeltas,
  newestProfile,
  ProcessCpu,
  profileLines,
  summariseProfile,
  toggleProfile,
} from './profiling.ts';

export const FLAVOR = 'p3-bench';
const PORTAL_NAMESPACE = 'p3-portal';
const PORTAL = 'portal';
const LEVELS = [1, 8, 32];
export const BASELINE_LABEL = 'bench.nodeflavor.io/p3';
const BOOTSTRAP_TYPE = 'bootstrap.kubernetes.io/token';
/** The resources issuance touches, for the API server's request-duration breakdown. */
const ISSUANCE_RESOURCES =
  /resource="(secrets|flavoredtokens|flavorclasses|configmaps|tokenreviews|subjectaccessreviews)"/;

const reuseConnections = () => process.argv.includes('--reuse-connections');
/** With --cpu-prof, the level whose first issuer half is profiled (--profile-level N; default the last). */
const profiledLevel = () => {
  const at = process.argv.indexOf('--profile-level');
  return at >= 0 ? Number(process.argv[at + 1]) : LEVELS.at(-1);
};

interface Batch {
  latencies: number[];
  elapsedMs: number;
}

async function batch(count: number, concurrency: number, send: () => Promise<void>): Promise<Batch> {
  const latencies: number[] = [];
  const started = performance.now();
  await mapLimit(Array.from({ length: count }), concurrency, async () => {
    const t0 = performance.now();
    await send();
    latencies.push(performance.now() - t0);
  });
  return { latencies, elapsedMs: performance.now() - started };
}

/**
 * One request, its answer's text; any status but `expected` is a benchmark failure (a throttled or
 * failing issuer is no figure).
 */
export async function send(
  pool: Pool,
  request: { method: 'POST' | 'PATCH' | 'GET'; path: string; contentType: string; expected: number },
  token: string,
  body: string | undefined,
  what: string,
): Promise<string> {
  const response = await pool.request({
    path: request.path,
    method: request.method,
    headers: {
      authorization: `Bearer ${token}`,
      'content-type': request.contentType,
      accept: 'application/json',
    },
    body,
  });
  const text = await response.body.text();
  if (response.statusCode !== request.expected) {
    throw new Error(`${what}: HTTP ${response.statusCode}: ${text.slice(0, 300)}`);
  }
  return text;
}

/** One JSON create (201). */
export function post(pool: Pool, path: string, token: string, body: string, what: string): Promise<string> {
  return send(
    pool,
    { method: 'POST', path, contentType: 'application/json', expected: 201 },
    token,
    body,
    what,
  );
}

/** A bootstrap token Secret as the issuer writes it (the owner reference only for the protocol arm), labelled for clean-up. */
export function baselineSecret(
  id = randomString(TOKEN_ALPHABET, 6, randomBytes),
  owner?: { name: string; uid: string },
): string {
  const expiration = rfc3339(new Date(Date.now() + 3_600_000));
  return JSON.stringify({
    apiVersion: 'v1',
    kind: 'Secret',
    metadata: {
      name: `bootstrap-token-${id}`,
      namespace: 'kube-system',
      labels: { [BASELINE_LABEL]: 'baseline' },
      ...(owner
        ? {
            ownerReferences: [
              {
                apiVersion: 'nodeflavor.io/v1alpha1',
                kind: 'FlavoredToken',
                name: owner.name,
                uid: owner.uid,
              },
            ],
          }
        : {}),
    },
    type: BOOTSTRAP_TYPE,
    stringData: {
      'token-id': id,
      'token-secret': randomString(TOKEN_ALPHABET, 16, randomBytes),
      expiration,
      // No usage-bootstrap-signing: the issuer's default (file discovery) asks for none.
      'usage-bootstrap-authentication': 'true',
      'auth-extra-groups': DEFAULT_AUTH_EXTRA_GROUP,
      description: DEFAULT_SECRET_DESCRIPTION,
    },
  });
}

/**
 * A FlavoredToken as the issuer writes it (tokenRecord), without the finalizer so that clean-up is
 * one delete, and labelled for it. `apiVersion` for a copy of the CRD in another group.
 */
export function protocolRecord(id: string, apiVersion?: string, keepFinalizer = false): string {
  const record = tokenRecord(
    id,
    { flavorClassName: FLAVOR, maxUses: 1, expiresAt: rfc3339(new Date(Date.now() + 3_600_000)) },
    {
      [REQUESTED_BY_ANNOTATION]: `system:serviceaccount:${PORTAL_NAMESPACE}:${PORTAL}`,
      [OWNER_ANNOTATION]: 'o'.repeat(43),
    },
  );
  // As the issuer writes it when a controller runs (which would otherwise add the finalizer).
  if (!keepFinalizer) delete record.metadata.finalizers;
  record.metadata.labels = { ...record.metadata.labels, [BASELINE_LABEL]: 'protocol' };
  return JSON.stringify(apiVersion ? { ...record, apiVersion } : record);
}

/** The issued mark as the issuer writes it: a merge patch of one annotation. */
export const issuedMark = (): string =>
  JSON.stringify({ metadata: { annotations: { [ISSUED_ANNOTATION]: rfc3339(new Date()) } } });

async function bootstrapSecretCount(env: E2EEnvironment): Promise<number> {
  const list = await kubeJson<{ items: unknown[] }>(
    env.kubeConfig,
    'GET',
    '/api/v1/namespaces/kube-system/secrets',
    {
      query: { fieldSelector: `type=${BOOTSTRAP_TYPE}` },
    },
  );
  return list.items.length;
}

/** JWS signatures in cluster-info: the bootstrap signer adds one per live signing token. */
async function clusterInfoSignatures(env: E2EEnvironment): Promise<number> {
  const info = await kubeJson<{ data?: Record<string, string> }>(
    env.kubeConfig,
    'GET',
    '/api/v1/namespaces/kube-public/configmaps/cluster-info',
  );
  return Object.keys(info.data ?? {}).filter((key) => key.startsWith('jws-kubeconfig-')).length;
}

/**
 * Deletes the level's Secrets: the floor's by label, and each issued token's FlavoredToken and
 * bootstrap Secret by name (rather than waiting for the garbage collector, which only notices a
 * new CRD's objects at its next discovery pass, about 30 s after the CRD appears).
 */
async function cleanUp(
  env: E2EEnvironment,
  issued: { id: string; tokenID: string }[],
  secretsBefore: number,
): Promise<void> {
  await kubeJson(env.kubeConfig, 'DELETE', '/api/v1/namespaces/kube-system/secrets', {
    query: { labelSelector: `${BASELINE_LABEL}=baseline` },
  });
  await kubeJson(env.kubeConfig, 'DELETE', '/apis/nodeflavor.io/v1alpha1/flavoredtokens', {
    query: { labelSelector: `${BASELINE_LABEL}=protocol` },
  });
  await mapLimit(issued.splice(0), 8, async (token) => {
    await kubeJson(env.kubeConfig, 'DELETE', `/apis/nodeflavor.io/v1alpha1/flavoredtokens/${token.id}`).catch(
      () => undefined,
    );
    await kubeJson(
      env.kubeConfig,
      'DELETE',
      `/api/v1/namespaces/kube-system/secrets/bootstrap-token-${token.tokenID}`,
    ).catch(() => undefined);
  });
  await waitFor(async () => (await bootstrapSecretCount(env)) <= secretsBefore, {
    what: 'the issued bootstrap Secrets to be gone',
    timeoutMs: 180_000,
    intervalMs: 500,
  });
  // The controller finishes each deletion (Secret, SecretDeleted, finalizer) before the next level.
  await waitFor(async () => (await flavoredTokenCount(env)) === 0, {
    what: 'the controller to let the deleted FlavoredTokens go',
    timeoutMs: 300_000,
    intervalMs: 500,
  });
}

async function flavoredTokenCount(env: E2EEnvironment): Promise<number> {
  const list = await kubeJson<{ items: unknown[] }>(
    env.kubeConfig,
    'GET',
    '/apis/nodeflavor.io/v1alpha1/flavoredtokens',
  );
  return list.items.length;
}

function labelsOf(series: string): Record<string, string> {
  return Object.fromEntries([...series.matchAll(/(\w+)="([^"]*)"/g)].map((m) => [m[1] ?? '', m[2] ?? '']));
}

/** "POST flavoredtokens 4.1 ms ×150, ..." from the API server's request durations of one phase. */
function requestBreakdown(deltas: MetricDeltas, phase: string): string {
  return deltas
    .means(phase)
    .map((row) => ({ ...row, labels: labelsOf(row.series) }))
    .filter((row) => row.labels.verb !== 'WATCH' && row.labels.verb !== 'LIST')
    .sort((a, b) => b.count - a.count)
    .map((row) => {
      const resource = row.labels.subresource
        ? `${row.labels.resource}/${row.labels.subresource}`
        : row.labels.resource;
      return `${row.labels.verb} ${resource} ${row.meanMs.toFixed(2)} ms ×${row.count}`;
    })
    .join(', ');
}

/** Waits for a child process to write its ready file (and fails at once if it exits). */
export async function waitForFile(path: string, child: ManagedProcess, timeoutMs = 120_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!existsSync(path)) {
    if (!child.running) throw new Error(`${child.name} exited:\n${child.lastLines()}`);
    if (Date.now() > deadline) throw new Error(`${child.name} did not start:\n${child.lastLines()}`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

interface Level {
  concurrency: number;
  issuer: Batch;
  floor: Batch;
  /** The protocol's requests (two writes, one read) from the benchmark client, nothing else. */
  protocol: Batch;
  issuerBreakdown: string;
  floorBreakdown: string;
  /** CPU per token (issuer) and per Secret create (floor), by process. */
  issuerCpu: string;
  floorCpu: string;
  /** kube-apiserver CPU per issuance over its CPU per raw Secret create. */
  apiServerCpuRatio: number;
  /** New connections the issuer opened to the API server per issued token. */
  connectionsPerToken: number;
  /** The issuer's own API requests per issued token, by kind ("POST flavoredtokens 1.00, …"). */
  requestsPerToken: string;
  requestsPerTokenTotal: number;
  /** JWS signatures in cluster-info at the end of the level (one per live signing token). */
  signatures: number;
}

const rate = (b: Batch) => b.latencies.length / (b.elapsedMs / 1000);
const merge = (a: Batch, b: Batch): Batch => ({
  latencies: [...a.latencies, ...b.latencies],
  elapsedMs: a.elapsedMs + b.elapsedMs,
});

export async function runP3(scale: Scale): Promise<Figure[]> {
  const perLevel = scale === 'quick' ? 150 : 1000;
  const env = await e2eEnvironment();
  const logs = benchDir('nodeflavor-bench-p3-');
  const loadBefore = loadavg()[0] ?? 0;
  log(`P3: logs in ${logs}; 1-min load average ${loadBefore.toFixed(2)} on ${cpus().length} cores`);
  // The chart's CRDs, RBAC and ServiceAccount; the issuer runs as that ServiceAccount.
  const { install, kubeConfig: operatorKubeConfig } = await prepareOperatorIdentity(env);
  const operatorToken = operatorKubeConfig.getCurrentUser()?.token;
  if (!operatorToken) throw new Error('the operator kubeconfig carries no token');
  await applyFlavorClass(env, FLAVOR, { description: 'P3 benchmark nodes' });
  const portalObjects = [
    { apiVersion: 'v1', kind: 'Namespace', metadata: { name: PORTAL_NAMESPACE } },
    { apiVersion: 'v1', kind: 'ServiceAccount', metadata: { name: PORTAL, namespace: PORTAL_NAMESPACE } },
    {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'ClusterRole',
      metadata: { name: 'p3-bench-use' },
      rules: [
        {
          apiGroups: ['nodeflavor.io'],
          resources: ['flavorclasses'],
          verbs: ['use'],
          resourceNames: [FLAVOR],
        },
      ],
    },
    {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'ClusterRoleBinding',
      metadata: { name: 'p3-bench-use' },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: 'p3-bench-use' },
      subjects: [{ kind: 'ServiceAccount', name: PORTAL, namespace: PORTAL_NAMESPACE }],
    },
  ];
  await applyObjects(env.kubeconfigPath, portalObjects, 'nodeflavor-bench');
  const portalToken =
    (
      await env.core.createNamespacedServiceAccountToken({
        name: PORTAL,
        namespace: PORTAL_NAMESPACE,
        // For the issuer's audience (as `kubectl create token --audience`): it refuses API-server tokens.
        body: { spec: { expirationSeconds: 3600, audiences: [DEFAULT_ISSUER_AUDIENCE] } },
      })
    ).status?.token ?? '';

  // The controller, as in production: whatever it does for a new token counts in the API server.
  const controllerMetrics = await freePort();
  const controller = startOperator(join(logs, 'operator.log'), ['--no-leader-elect', '--log-level', 'warn'], {
    metricsPort: controllerMetrics,
    env: imageEnv(),
    built: true,
  });
  await waitReady(controllerMetrics);
  const profDir = join(logs, 'issuer-prof');
  mkdirSync(profDir, { recursive: true });
  const { process: issuerProcess, readyFile } = startBenchIssuer({
    name: 'p3-issuer',
    logs,
    tag: 'issuer',
    kubeconfigPath: install.kubeconfigPath,
    apiServerEndpoint: env.apiServerEndpoint,
    args: [
      ...(cpuProfile() ? ['--profile-dir', profDir] : []),
      ...(reuseConnections() ? ['--reuse-connections'] : []),
    ],
  });
  let stopped = false;
  const stopIssuer = async () => {
    if (stopped) return;
    stopped = true;
    await issuerProcess.stop();
  };
  try {
    await waitForFile(readyFile, issuerProcess);
    const ready = JSON.parse(readFileSync(readyFile, 'utf8')) as {
      url: string;
      caPem: string;
      pid: number;
      statsUrl: string;
    };
    /** Connections the issuer's HTTP clients have opened so far, and its API requests by kind (its stats endpoint). */
    const issuerStats = async () =>
      (await (await fetch(ready.statsUrl)).json()) as {
        connections: number;
        requests: Record<string, number>;
      };
    const secretsBefore = await bootstrapSecretCount(env);
    const signaturesBefore = await clusterInfoSignatures(env);
    const deltas = new MetricDeltas(env.kubeConfig, undefined, {
      series: /^apiserver_request_duration_seconds_(?:sum|count)\{/,
      about: ISSUANCE_RESOURCES,
    });
    const issueBody = JSON.stringify({ flavorClassName: FLAVOR, ttl: '1h' });
    let profiled = false;
    const cpu = new ProcessCpu({
      ...controlPlanePids(env.kubeconfigPath),
      issuer: ready.pid,
      controller: controller.componentPid() ?? controller.pid ?? 0,
      'benchmark client': process.pid,
    });
    const connectionsPerToken: number[] = [];
    /** What the current level issued, for its clean-up. */
    const issued: { id: string; tokenID: string }[] = [];

    const levels: Level[] = [];
    for (const concurrency of LEVELS) {
      const pools = {
        issuer: new Pool(ready.url, {
          connections: concurrency,
          pipelining: 1,
          allowH2: false,
          connect: { ca: ready.caPem },
        }),
        api: new Pool(new URL(env.server).origin, {
          connections: concurrency,
          pipelining: 1,
          allowH2: false,
          connect: { ca: env.caPem },
        }),
      };
      const issue = async () => {
        const answer = await post(pools.issuer, '/v1/tokens', portalToken, issueBody, 'POST /v1/tokens');
        const { id, tokenID } = JSON.parse(answer) as { id: string; tokenID: string };
        issued.push({ id, tokenID });
      };
      const protocolWrites = async () => {
        const id = randomString(TOKEN_ALPHABET, 6, randomBytes);
        const record = JSON.parse(
          await post(
            pools.api,
            '/apis/nodeflavor.io/v1alpha1/flavoredtokens',
            operatorToken,
            protocolRecord(id, undefined, true),
            'record create',
          ),
        ) as { metadata: { name: string; uid: string } };
        await post(
          pools.api,
          '/api/v1/namespaces/kube-system/secrets',
          operatorToken,
          baselineSecret(id, record.metadata),
          'owned Secret create',
        );
        await send(
          pools.api,
          {
            method: 'GET',
            path: `/apis/nodeflavor.io/v1alpha1/flavoredtokens/${record.metadata.name}`,
            contentType: 'application/json',
            expected: 200,
          },
          operatorToken,
          undefined,
          'record read back',
        );
      };
      const create = async () => {
        await post(
          pools.api,
          '/api/v1/namespaces/kube-system/secrets',
          operatorToken,
          baselineSecret(),
          'Secret create',
        );
      };
      try {
        const warmup = Math.max(10, 2 * concurrency);
        await batch(warmup, concurrency, create);
        await batch(warmup, concurrency, issue);
        await batch(warmup, concurrency, protocolWrites);
        const halves = { issuer: [] as Batch[], floor: [] as Batch[], protocol: [] as Batch[] };
        const requestCounts = new Map<string, number>();
        let issuedThisLevel = 0;
        for (const half of [0, 1]) {
          const count = half === 0 ? Math.floor(perLevel / 2) : perLevel - Math.floor(perLevel / 2);
          let before = await deltas.snapshot();
          let cpuBefore = cpu.snapshot();
          halves.floor.push(await batch(count, concurrency, create));
          cpu.add(`floor-${concurrency}`, cpuBefore, cpu.snapshot(), count);
          deltas.add(`floor-${concurrency}`, before, await deltas.snapshot());
          halves.protocol.push(await batch(count, concurrency, protocolWrites));
          const profile = cpuProfile() && !profiled && concurrency === profiledLevel();
          if (profile) toggleProfile(ready.pid);
          before = await deltas.snapshot();
          const statsBefore = await issuerStats();
          cpuBefore = cpu.snapshot();
          halves.issuer.push(await batch(count, concurrency, issue));
          cpu.add(`issuer-${concurrency}`, cpuBefore, cpu.snapshot(), count);
          const statsAfter = await issuerStats();
          connectionsPerToken.push((statsAfter.connections - statsBefore.connections) / count);
          for (const [kind, n] of Object.entries(statsAfter.requests)) {
            if (kind.startsWith('WATCH ')) continue;
            requestCounts.set(kind, (requestCounts.get(kind) ?? 0) + n - (statsBefore.requests[kind] ?? 0));
          }
          issuedThisLevel += count;
          deltas.add(`issuer-${concurrency}`, before, await deltas.snapshot());
          if (profile) {
            toggleProfile(ready.pid);
            profiled = true;
          }
        }
        const level: Level = {
          concurrency,
          issuer: merge(halves.issuer[0] as Batch, halves.issuer[1] as Batch),
          floor: merge(halves.floor[0] as Batch, halves.floor[1] as Batch),
          protocol: merge(halves.protocol[0] as Batch, halves.protocol[1] as Batch),
          issuerBreakdown: requestBreakdown(deltas, `issuer-${concurrency}`),
          floorBreakdown: requestBreakdown(deltas, `floor-${concurrency}`),
          issuerCpu: cpu.perUnit(`issuer-${concurrency}`),
          floorCpu: cpu.perUnit(`floor-${concurrency}`),
          apiServerCpuRatio:
            cpu.perUnitOf(`issuer-${concurrency}`, 'kube-apiserver') /
            cpu.perUnitOf(`floor-${concurrency}`, 'kube-apiserver'),
          connectionsPerToken: ((connectionsPerToken.at(-1) ?? 0) + (connectionsPerToken.at(-2) ?? 0)) / 2,
          requestsPerToken: [...requestCounts]
            .filter(([, n]) => n > 0)
            .sort((a, b) => b[1] - a[1])
            .map(([kind, n]) => `${kind} ${(n / issuedThisLevel).toFixed(2)}`)
            .join(', '),
          requestsPerTokenTotal: [...requestCounts.values()].reduce((a, b) => a + b, 0) / issuedThisLevel,
          signatures: await clusterInfoSignatures(env),
        };
        levels.push(level);
        const i = summary(level.issuer.latencies);
        const f = summary(level.floor.latencies);
        log(
          `P3 concurrency ${concurrency}: issuer ${rate(level.issuer).toFixed(0)} tokens/s p50/p99 ${i.p50.toFixed(1)}/${i.p99.toFixed(1)} ms; Secret creates ${rate(level.floor).toFixed(0)}/s p50/p99 ${f.p50.toFixed(1)}/${f.p99.toFixed(1)} ms; cluster-info carries ${level.signatures} signatures`,
        );
        const pr = summary(level.protocol.latencies);
        log(
          `P3   protocol floor (its two writes and read from the benchmark client): ${rate(level.protocol).toFixed(0)} tokens/s (${(rate(level.protocol) / rate(level.floor)).toFixed(2)}x the Secret creates) p50/p99 ${pr.p50.toFixed(1)}/${pr.p99.toFixed(1)} ms`,
        );
        log(
          `P3   the issuer's API requests per issuance: ${level.requestsPerTokenTotal.toFixed(2)} (${level.requestsPerToken}); a raw Secret create is 1`,
        );
        log(
          `P3   CPU per token: ${level.issuerCpu}; per Secret create: ${level.floorCpu}; kube-apiserver ${level.apiServerCpuRatio.toFixed(2)}x`,
        );
        log(`P3   API server during issuance: ${level.issuerBreakdown}`);
        log(
          `P3   the issuer opened ${level.connectionsPerToken.toFixed(2)} new connections to the API server per token`,
        );
        log(`P3   API server during Secret creates: ${level.floorBreakdown}`);
      } finally {
        await pools.issuer.close();
        await pools.api.close();
      }
      const cleaning = performance.now();
      await cleanUp(env, issued, secretsBefore);
      await waitFor(async () => (await clusterInfoSignatures(env)) <= signaturesBefore + 5, {
        what: 'the bootstrap signer to drop the deleted tokens from cluster-info',
        timeoutMs: 120_000,
        intervalMs: 1000,
      }).catch((error: Error) => log(`P3: ${error.message}; carrying on`));
      log(`P3: cleaned up in ${((performance.now() - cleaning) / 1000).toFixed(1)} s`);
    }

    await stopIssuer();
    const profile = cpuProfile() ? newestProfile(profDir) : undefined;
    const profileSummary = profile ? summariseProfile(profile) : undefined;
    if (profileSummary) for (const line of profileLines(profileSummary)) log(`P3 issuer ${line}`);

    /** Why issue 27's P3 throughput and latency goals are retired (issue 33, bench/RESULTS.md). */
    const RETIRED_PROTOCOL =
      "issue 27 showed the issuance's own requests (two writes and the read-back, no issuer) reach only 0.26–0.36x the raw Secret creates at 32 and 2.8–7.7x their p99 on this machine: out of reach of any issuer keeping the protocol";
    const prefix = reuseConnections() ? 'P3 what-if (issuer reuses connections):' : 'P3';
    const best = levels.reduce((a, b) => (rate(b.issuer) > rate(a.issuer) ? b : a));
    const common = `undici Pool (HTTP/1.1 keep-alive, connections = concurrency) from the benchmark process for both; issuer in its own process (p3-issuer-server.ts: startTokenIssuer with the chart ServiceAccount's kubeconfig, rate limit raised to ${P3_RATE_LIMIT.capacity} burst, ${P3_RATE_LIMIT.refillPerSecond}/s, since \`nodeflavor run\` has no flag for it); caller authenticated by TokenReview and authorised by SubjectAccessReview, answers cached 10 s; Secret creates as the same ServiceAccount, same Secret shape; ${perLevel} of each per level in alternating halves after a warm-up; 1-min load average ${loadBefore.toFixed(1)} at the start, ${(loadavg()[0] ?? 0).toFixed(1)} at the end`;
    const figures: Figure[] = [];
    for (const level of levels) {
      const i = summary(level.issuer.latencies);
      const f = summary(level.floor.latencies);
      const pr = summary(level.protocol.latencies);
      figures.push(
        figure({
          name: `${prefix} tokens issued per second, concurrency ${level.concurrency}`,
          value: rate(level.issuer),
          unit: '/s',
          baseline: rate(level.floor),
          baselineName: 'raw Secret creates',
          // Issue 27: at concurrency 32, at least 0.3× the raw Secret creates of the same run.
          goal: level.concurrency === 32 ? '≥ 0.3× baseline' : '-',
          met: level.concurrency === 32 ? rate(level.issuer) >= 0.3 * rate(level.floor) : true,
          ...(level.concurrency === 32 ? { retired: RETIRED_PROTOCOL } : {}),
          notes: `p50 issuer ${i.p50.toFixed(1)} ms, Secret create ${f.p50.toFixed(1)} ms; ${common}`,
        }),
        figure({
          name: `${prefix} protocol floor tokens/s (two writes and a read, no issuer), concurrency ${level.concurrency}`,
          value: rate(level.protocol),
          unit: '/s',
          baseline: rate(level.floor),
          baselineName: 'raw Secret creates',
          goal: '-',
          met: true,
          notes: `the issuance's requests (a FlavoredToken as the issuer writes it; its bootstrap Secret, owned by it; the record read back) back to back from the benchmark client, as the chart ServiceAccount, in the same alternating halves: the ceiling of any issuer that keeps this protocol on this machine; p50/p99 ${pr.p50.toFixed(1)}/${pr.p99.toFixed(1)} ms; the issuer reached ${(rate(level.issuer) / rate(level.protocol)).toFixed(2)}x of it`,
        }),
        figure({
          name: `${prefix} issuance p99, concurrency ${level.concurrency}`,
          value: i.p99,
          unit: 'ms',
          baseline: f.p99,
          baselineName: 'raw Secret create p99',
          // Issue 27: at most 3× the raw Secret create's p99 at concurrency 1 and 8.
          goal: level.concurrency === 32 ? '-' : '≤ 3× baseline',
          met: level.concurrency === 32 || i.p99 <= 3 * f.p99,
          ...(level.concurrency === 32 ? {} : { retired: RETIRED_PROTOCOL }),
          notes: `the issuer's API requests per issuance: ${level.requestsPerTokenTotal.toFixed(2)} (${level.requestsPerToken}), in sequence (POST FlavoredToken, POST Secret, GET the record back), against the floor's 1; CPU per token by process: ${level.issuerCpu} (per Secret create: ${level.floorCpu}); the issuer opened ${level.connectionsPerToken.toFixed(1)} new TLS connections to the API server per token (${reuseConnections() ? 'what-if: its KubeConfig shares one undici Agent across requests' : 'src/runtime/connection-reuse.ts keeps one dispatcher per TLS identity, so the connection is reused'}); cluster-info held ${level.signatures} JWS signatures at the end of the level (the issuer reads it at most every 10 s; with file discovery, the default, issued tokens add none); API server request durations (mean) during issuance: ${level.issuerBreakdown}; during Secret creates: ${level.floorBreakdown}`,
        }),
        figure({
          name: `${prefix} kube-apiserver CPU per issuance, concurrency ${level.concurrency}`,
          value: level.apiServerCpuRatio,
          unit: '× a Secret create',
          baseline: 1,
          baselineName: 'raw Secret create',
          // Issue 33: what a sound issuance can reach: a custom-resource record costs at least 3.5
          // Secret creates of API server CPU (decoding and schema coercion at every read), and the
          // read-back that keeps a revocation final costs the rest (ADR 0015).
          goal: '≤ 5× baseline',
          met: level.apiServerCpuRatio <= 5,
          notes: `with the controller running; CPU per issuance by process: ${level.issuerCpu}; per Secret create: ${level.floorCpu}`,
        }),
      );
    }
    figures.push(
      figure({
        name: `${prefix} tokens issued per second, best level (concurrency ${best.concurrency})`,
        value: rate(best.issuer),
        unit: '/s',
        baseline: rate(best.floor),
        baselineName: 'raw Secret creates',
        goal: '≥ 200 tokens/s',
        met: rate(best.issuer) >= 200,
        notes: `${common}${
          profileSummary
            ? `; issuer CPU profile (concurrency ${profiledLevel()}, first half): ${profileSummary.byPlace
                .slice(0, 6)
                .map((p) => `${p.place} ${(p.share * 100).toFixed(0)}%`)
                .join(', ')}`
            : ''
        }`,
      }),
    );
    return figures;
  } finally {
    await stopIssuer();
    await controller.stop();
    await deleteObjects(env, [
      ...portalObjects,
      { apiVersion: 'nodeflavor.io/v1alpha1', kind: 'FlavorClass', metadata: { name: FLAVOR } },
    ]);
  }
}

if (import.meta.main) await runStandalone(runP3);
