// P2 admission: what the guard adds to Node writes, as the webhook and as the
// ValidatingAdmissionPolicy, against no guard at all, in one run; and the webhook server alone
// under load.
//   P2  a real joined kubelet PATCHes a NON-protected label of its own (~15 KB) Node, sequentially;
//       "added" latency = p50/p99 with the guard minus p50/p99 with neither registered. The
//       registrations' matchConditions send only writes touching protected keys on, so this write
//       never reaches the webhook (nor the policy's validations): it measures the matchConditions.
//   P2b the same for the one write of every join that the guard does judge: a kubelet
//       registering its Node (CREATE) with the token label and the quarantine taint (allowed;
//       the webhook is called, the policy's validations run). Between two registrations the
//       Node is deleted by an admin (not timed).
//   The three configurations are interleaved in rounds (registration switched between rounds,
//   and a probe waits until the API server enforces it) so that drift on a shared machine hits
//   all three alike. The webhook runs in this process, as in the e2e suite, behind startAdmission
//   (webhook mode, registered by URL on 127.0.0.1); the load below uses separate processes.
//   Webhook server alone: p2-webhook.ts server (startWebhookServer) in one process, the undici
//   load generator p2-webhook.ts load in another; reviews/s.
//   node --import tsx bench/p2-admission.ts [--scale quick] [--cpu-prof]   (or BENCH_CPU_PROF=1)
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { cpus, loadavg } from 'node:os';
import { join } from 'node:path';
import { type Logger, pino } from 'pino';
import { Registry } from 'prom-client';
import { type Config, parseConfig } from '../src/config.ts';
import { QUARANTINE_TAINT_KEY, TOKEN_LABEL_KEY } from '../src/flavor/admission.ts';
import { watchProtectedKeys } from '../src/kube/protected-keys-source.ts';
import { removeAdmissionRegistration } from '../src/webhook/admission-registration.ts';
import { type RunningAdmission, startAdmission } from '../src/webhook/index.ts';
import { ManagedProcess } from '../test/e2e/cluster/process.ts';
import type { HttpResult, KubeHttp } from '../test/e2e/kubelet-sim/http.ts';
import { parseJoinConfiguration } from '../test/e2e/kubelet-sim/join-config.ts';
import { SimulatedKubelet } from '../test/e2e/kubelet-sim/kubelet.ts';
import {
  deleteObjects,
  type Identity,
  messageOf,
  NODE_EDITOR_RULES,
  operatorClusterRules,
  operatorNamespaceRules,
  serviceAccountIdentity,
} from '../test/e2e/support/admission.ts';
import { createBootstrapToken, joinConfiguration, tokenKubeConfig } from '../test/e2e/support/bootstrap.ts';
import { type E2EEnvironment, e2eEnvironment } from '../test/e2e/support/environment.ts';
import { applyFlavorClass, deleteFlavorClass, installCrds } from '../test/e2e/support/nodeflavor.ts';
import { uniqueName, waitFor } from '../test/e2e/support/wait.ts';
import { realisticNode } from './fixture-nodes.ts';
import {
  benchDir,
  chartNodeOptions,
  cpuProfile,
  type Figure,
  figure,
  freePort,
  log,
  runStandalone,
  type Scale,
  summary,
} from './lib.ts';
import {
  type LoadResult,
  P2_ADMIN_GROUP,
  P2_ADMIN_NAMESPACE,
  P2_FLAVOR,
  P2_FLAVOR_KEYS,
  P2_TIER_LABEL,
} from './p2-webhook.ts';
import {
  controlPlanePids,
  MetricDeltas,
  newestProfile,
  ProcessCpu,
  profileLines,
  summariseProfile,
} from './profiling.ts';

const NAME = 'nodeflavor-p2';
const OPERATOR_NAMESPACE = 'p2-operator';
const MERGE = 'application/merge-patch+json';
const REV_LABEL = 'example.com/rev';
const PROBE_LABEL = 'nodeflavor.io/flavor';
const ROUNDS = 5;
const WARMUP = 20;

type Mode = 'none' | 'webhook' | 'policy';
const MODES: Mode[] = ['none', 'webhook', 'policy'];
type Kind = 'kubelet' | 'register';
type Samples = Record<Kind, Record<Mode, number[]>>;

const REFUSED_BY: Record<Exclude<Mode, 'none'>, RegExp> = {
  webhook: /admission webhook "nodes\.nodeflavor\.io" denied the request/,
  policy: /ValidatingAdmissionPolicy/,
};

function ok(result: HttpResult, what: string): void {
  if (result.status < 200 || result.status > 299) {
    throw new Error(`${what}: HTTP ${result.status}: ${messageOf(result)}`);
  }
}

interface GuardSwitchOptions {
  env: E2EEnvironment;
  operator: Identity;
  keys: ReturnType<typeof watchProtectedKeys>;
  port: number;
  logFile: string;
  /** A kubelet's dry-run write of a protected label: 200 unguarded, 403 from a guard in force. */
  probe: () => Promise<HttpResult>;
}

/** Switches the cluster between no guard, the webhook and the policy, and waits until it is in force. */
class GuardSwitch {
  private admission: RunningAdmission | undefined;
  /** The webhook's metrics (its review-duration histogram). */
  readonly registry = new Registry();
  private readonly env: E2EEnvironment;
  private readonly operator: Identity;
  private readonly keys: ReturnType<typeof watchProtectedKeys>;
  private readonly port: number;
  private readonly logger: Logger;
  private readonly probe: () => Promise<HttpResult>;

  constructor(options: GuardSwitchOptions) {
    this.env = options.env;
    this.operator = options.operator;
    this.keys = options.keys;
    this.port = options.port;
    this.logger = pino({ level: 'info' }, pino.destination({ dest: options.logFile, sync: true }));
    this.probe = options.probe;
  }

  private config(mode: Exclude<Mode, 'none'>): Config {
    return parseConfig({
      namespace: this.operator.namespace,
      serviceAccount: this.operator.name,
      admissionMode: mode,
      webhookAddress: `127.0.0.1:${this.port}`,
      webhookUrl: `https://127.0.0.1:${this.port}/validate-nodes`,
      webhookConfigName: NAME,
      tlsSecret: `${NAME}-tls`,
      adminGroups: [P2_ADMIN_GROUP],
      resync: '10m',
    });
  }

  async switchTo(mode: Mode): Promise<void> {
    await this.off();
    // Removed registrations leave the API server's caches a little later: wait until a protected
    // write passes (a stopped webhook still registered would fail it instead).
    await waitFor(async () => (await this.probe()).status === 200, {
      what: 'no admission guard in force',
      timeoutMs: 60_000,
    });
    if (mode === 'none') return;
    this.admission = startAdmission({
      kubeConfig: tokenKubeConfig(this.env, this.operator.token),
      config: this.config(mode),
      registry: this.registry,
      logger: this.logger,
      protectedKeys: this.keys,
    });
    await this.admission.ready;
    await waitFor(
      async () => {
        const result = await this.probe();
        return result.status === 403 && REFUSED_BY[mode].test(messageOf(result));
      },
      { what: `the ${mode} to be enforced`, timeoutMs: 60_000 },
    );
  }

  async off(): Promise<void> {
    await this.admission?.stop();
    this.admission = undefined;
    await removeAdmissionRegistration(this.env.kubeConfig, NAME);
  }
}

function stdev(values: number[]): number {
  if (values.length < 2) return 0;
  const mean = values.reduce((a, b) => a + b, 0) / values.length;
  return Math.sqrt(values.reduce((a, b) => a + (b - mean) ** 2, 0) / (values.length - 1));
}

/** The added-latency figures of one kind of write: p50 (informative) and p99 (the goal). */
function addedFigures(
  label: string,
  samples: Record<Mode, number[]>,
  roundP99s: number[],
  note: string,
  load: string,
) {
  const s = {
    none: summary(samples.none),
    webhook: summary(samples.webhook),
    policy: summary(samples.policy),
  };
  const added = (mode: 'webhook' | 'policy', p: 'p50' | 'p99') => s[mode][p] - s.none[p];
  // Per-round p99 of the unguarded writes: how far p99 moves on its own on this machine.
  const noise = stdev(roundP99s);
  const raw = (p: 'p50' | 'p99') =>
    `${p} none ${s.none[p].toFixed(2)} / webhook ${s.webhook[p].toFixed(2)} / policy ${s.policy[p].toFixed(2)} ms`;
  const detail = `${raw('p50')}; ${raw('p99')}; added webhook ${added('webhook', 'p50').toFixed(2)}/${added('webhook', 'p99').toFixed(2)}, policy ${added('policy', 'p50').toFixed(2)}/${added('policy', 'p99').toFixed(2)} ms (p50/p99, negative = noise, shown as 0); noise (stdev of per-round unguarded p99) ${noise.toFixed(2)} ms; n=${s.none.n} per configuration; 1-min load average ${load}`;
  const webhook99 = added('webhook', 'p99');
  const policy99 = added('policy', 'p99');
  const withinNoise = webhook99 <= noise;
  return [
    figure({
      name: `${label} added p50, webhook`,
      value: Math.max(0, added('webhook', 'p50')),
      unit: 'ms',
      baseline: Math.max(0, added('policy', 'p50')),
      baselineName: 'policy added p50',
      goal: '-',
      met: true,
    }),
    figure({
      name: `${label} added p99, webhook`,
      value: Math.max(0, webhook99),
      unit: 'ms',
      baseline: Math.max(0, policy99),
      baselineName: 'policy added p99',
      goal: '≤ 1.5× policy',
      met: webhook99 <= 1.5 * Math.max(0, policy99) || withinNoise,
      notes: `${note}; ${detail}${withinNoise && webhook99 > 1.5 * Math.max(0, policy99) ? '; met because the webhook adds less than the noise' : ''}`,
    }),
  ];
}

async function waitForFile(path: string, child: ManagedProcess, timeoutMs = 60_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!existsSync(path)) {
    if (!child.running) throw new Error(`${child.name} exited:\n${child.lastLines()}`);
    if (Date.now() > deadline) throw new Error(`${child.name} did not start:\n${child.lastLines()}`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

/** The webhook server alone: server and load generator in two processes of their own. */
/**
 * The webhook server alone: server and load generator in two processes of their own. First one
 * connection (the round trip of a single review), then 32 (throughput; the one profiled).
 */
async function webhookUnderLoad(
  scale: Scale,
  logs: string,
): Promise<{ single: LoadResult; loaded: LoadResult }> {
  const readyFile = join(logs, 'webhook-server.ready.json');
  const profDir = join(logs, 'webhook-server-prof');
  mkdirSync(profDir, { recursive: true });
  const server = new ManagedProcess(
    'p2-webhook-server',
    process.execPath,
    [
      // In a cluster the webhook serves from the operator's process, with the chart's Node.js options.
      ...chartNodeOptions(),
      '--import',
      'tsx',
      join(import.meta.dirname, 'p2-webhook.ts'),
      'server',
      '--ready-file',
      readyFile,
      '--log-file',
      join(logs, 'webhook-server.log'),
      ...(cpuProfile() ? ['--profile-dir', profDir] : []),
    ],
    join(logs, 'webhook-server.out'),
  );
  try {
    await waitForFile(readyFile, server);
    const { port, caPem, pid } = JSON.parse(readFileSync(readyFile, 'utf8')) as {
      port: number;
      caPem: string;
      pid: number;
    };
    const caFile = join(logs, 'webhook-ca.pem');
    writeFileSync(caFile, caPem);
    const load = async (connections: number, durationMs: number, profile: boolean) => {
      const out = join(logs, `webhook-load-${connections}.json`);
      const generator = new ManagedProcess(
        'p2-webhook-load',
        process.execPath,
        [
          '--import',
          'tsx',
          join(import.meta.dirname, 'p2-webhook.ts'),
          'load',
          '--port',
          String(port),
          '--ca-file',
          caFile,
          '--out',
          out,
          '--connections',
          String(connections),
          '--duration-ms',
          String(durationMs),
          '--warmup-ms',
          '1000',
          ...(profile ? ['--profile-pid', String(pid)] : []),
        ],
        join(logs, `webhook-load-${connections}.out`),
      );
      const code = await generator.exited;
      await generator.stop();
      if (code !== 0 || !existsSync(out)) {
        throw new Error(`the load generator failed:\n${generator.lastLines()}`);
      }
      return JSON.parse(readFileSync(out, 'utf8')) as LoadResult;
    };
    const single = await load(1, scale === 'quick' ? 1_500 : 3_000, false);
    const loaded = await load(32, scale === 'quick' ? 3_000 : 10_000, cpuProfile());
    return { single, loaded };
  } finally {
    await server.stop();
  }
}

export async function runP2(scale: Scale): Promise<Figure[]> {
  const perConfiguration = scale === 'quick' ? 300 : 2000;
  const perRound = Math.ceil(perConfiguration / ROUNDS);
  const env = await e2eEnvironment();
  const logs = benchDir('nodeflavor-bench-p2-');
  const loadBefore = loadavg()[0] ?? 0;
  log(`P2: logs in ${logs}; 1-min load average ${loadBefore.toFixed(2)} on ${cpus().length} cores`);
  await installCrds(env);
  await applyFlavorClass(env, P2_FLAVOR, P2_FLAVOR_KEYS);
  const created: object[] = [];
  let keys: ReturnType<typeof watchProtectedKeys> | undefined;
  let kubelet: SimulatedKubelet | undefined;
  let guard: GuardSwitch | undefined;
  let bootstrapSecret: string | undefined;
  let registrant: SimulatedKubelet | undefined;
  let registrantSecret: string | undefined;
  const identities: Identity[] = [];
  try {
    const operator = await serviceAccountIdentity(
      env,
      {
        namespace: OPERATOR_NAMESPACE,
        name: 'nodeflavor',
        clusterRules: operatorClusterRules([NAME]),
        namespaceRules: operatorNamespaceRules([`${NAME}-tls`]),
      },
      created,
    );
    const admin = await serviceAccountIdentity(
      env,
      { namespace: P2_ADMIN_NAMESPACE, name: 'admin', clusterRules: NODE_EDITOR_RULES },
      created,
    );
    identities.push(operator, admin);
    keys = watchProtectedKeys(tokenKubeConfig(env, operator.token));
    await keys.ready;
    const watched = keys;
    await waitFor(() => watched.protectedKeys().labels.has(P2_TIER_LABEL), { what: 'the FlavorClass keys' });

    // A real kubelet: TLS bootstrap with a bootstrap token, its own client certificate, its Node
    // made realistic (~15 KB of status) by a status update of its own.
    const token = await createBootstrapToken(env);
    bootstrapSecret = `bootstrap-token-${token.id}`;
    kubelet = new SimulatedKubelet(
      uniqueName('p2-kubelet'),
      parseJoinConfiguration(joinConfiguration(env, token.token)),
      {
        timeoutMs: 60_000,
      },
    );
    await kubelet.join();
    const node = kubelet.nodeName;
    const client: KubeHttp = kubelet.client();
    const status = realisticNode(node, 'p2node', new Date().toISOString()).status;
    ok(await client.request('PATCH', `/api/v1/nodes/${node}/status`, { status }, MERGE), 'kubelet status');
    const nodeBytes = (await client.request('GET', `/api/v1/nodes/${node}`)).text.length;
    log(`P2: kubelet ${node} joined; its Node is ${(nodeBytes / 1024).toFixed(1)} KiB`);

    const probe = () =>
      client.request(
        'PATCH',
        `/api/v1/nodes/${node}?dryRun=All`,
        { metadata: { labels: { [PROBE_LABEL]: 'probe' } } },
        MERGE,
      );
    guard = new GuardSwitch({
      env,
      operator,
      keys,
      port: await freePort(),
      logFile: join(logs, 'admission.log'),
      probe,
    });

    let rev = 0;
    const kubeletWrite = async () => {
      const body = { metadata: { labels: { [REV_LABEL]: String(rev++) } } };
      const started = performance.now();
      const result = await client.request('PATCH', `/api/v1/nodes/${node}`, body, MERGE);
      const ms = performance.now() - started;
      ok(result, 'kubelet PATCH of a non-protected label');
      return ms;
    };
    // P2b: a second real kubelet that registers its Node again and again.
    const registrantToken = await createBootstrapToken(env);
    registrantSecret = `bootstrap-token-${registrantToken.id}`;
    registrant = new SimulatedKubelet(
      uniqueName('p2-registrant'),
      parseJoinConfiguration(joinConfiguration(env, registrantToken.token)),
      { timeoutMs: 60_000 },
    );
    await registrant.join();
    const registrantNode = registrant.nodeName;
    const registrantClient = registrant.client();
    const registration = {
      apiVersion: 'v1',
      kind: 'Node',
      metadata: {
        name: registrantNode,
        labels: {
          'kubernetes.io/hostname': registrantNode,
          'kubernetes.io/os': 'linux',
          'kubernetes.io/arch': 'amd64',
          [TOKEN_LABEL_KEY]: 'a'.repeat(52),
        },
      },
      spec: { taints: [{ key: QUARANTINE_TAINT_KEY, effect: 'NoSchedule' }] },
    };
    const registerWrite = async () => {
      await env.core.deleteNode({ name: registrantNode }).catch(() => undefined);
      const started = performance.now();
      const result = await registrantClient.request('POST', '/api/v1/nodes', registration);
      const ms = performance.now() - started;
      ok(result, 'kubelet registration (Node CREATE with the token label and the quarantine taint)');
      return ms;
    };

    const samples: Samples = {
      kubelet: { none: [], webhook: [], policy: [] },
      register: { none: [], webhook: [], policy: [] },
    };
    const unguardedRoundP99: Record<Kind, number[]> = { kubelet: [], register: [] };
    const metrics = new MetricDeltas(env.kubeConfig, guard.registry);
    const cpu = new ProcessCpu({
      ...controlPlanePids(env.kubeconfigPath),
      'benchmark (clients, in-process webhook)': process.pid,
    });
    for (let round = 0; round < ROUNDS; round++) {
      const order = MODES.map((_, i) => MODES[(i + round) % MODES.length] as Mode);
      for (const mode of order) {
        const switched = performance.now();
        await guard.switchTo(mode);
        for (let i = 0; i < WARMUP; i++) {
          await kubeletWrite();
          await registerWrite();
        }
        const segment: Record<Kind, number[]> = { kubelet: [], register: [] };
        const before = await metrics.snapshot();
        const cpuBefore = cpu.snapshot();
        for (let i = 0; i < perRound; i++) {
          segment.kubelet.push(await kubeletWrite());
          segment.register.push(await registerWrite());
        }
        cpu.add(mode, cpuBefore, cpu.snapshot(), 2 * perRound);
        metrics.add(mode, before, await metrics.snapshot());
        samples.kubelet[mode].push(...segment.kubelet);
        samples.register[mode].push(...segment.register);
        const k = summary(segment.kubelet);
        const a = summary(segment.register);
        if (mode === 'none') {
          unguardedRoundP99.kubelet.push(k.p99);
          unguardedRoundP99.register.push(a.p99);
        }
        log(
          `P2 round ${round + 1}/${ROUNDS} ${mode.padEnd(7)} kubelet p50/p99 ${k.p50.toFixed(2)}/${k.p99.toFixed(2)} ms, registration ${a.p50.toFixed(2)}/${a.p99.toFixed(2)} ms (${((performance.now() - switched) / 1000).toFixed(1)} s with the switch)`,
        );
      }
    }
    await guard.off();
    for (const mode of MODES) {
      log(
        `P2 CPU per write (kubelet PATCHes and registrations alike) ${mode.padEnd(7)}: ${cpu.perUnit(mode)}`,
      );
      for (const row of metrics.means(mode)) {
        log(`P2 metrics ${mode.padEnd(7)} mean ${row.meanMs.toFixed(3)} ms × ${row.count}  ${row.series}`);
      }
    }

    const loadMeasured = loadavg()[0] ?? 0;
    log('P2: webhook server alone under load');
    const { single, loaded: load } = await webhookUnderLoad(scale, logs);
    const profile = cpuProfile() ? newestProfile(join(logs, 'webhook-server-prof')) : undefined;
    const profileSummary = profile ? summariseProfile(profile) : undefined;
    if (profileSummary) for (const line of profileLines(profileSummary)) log(`P2 webhook ${line}`);
    for (const result of [single, load]) {
      log(
        `P2 webhook alone: ${result.reviewsPerSecond.toFixed(0)} reviews/s over ${result.connections} connection(s), p50/p99 ${result.p50Ms.toFixed(2)}/${result.p99Ms.toFixed(2)} ms, ${result.failures} failures`,
      );
      if (result.failures > 0) {
        throw new Error(`${result.failures} reviews failed, first: ${result.firstFailure}`);
      }
    }
    // Where the webhook's added latency goes, from the API server's and the webhook's metrics.
    const ms = (value: number | undefined) => (value === undefined ? 'n/a' : `${value.toFixed(2)} ms`);
    const breakdown = [
      `API server's webhook call (apiserver_admission_webhook_admission_duration_seconds) mean ${ms(metrics.mean('webhook', /^apiserver_admission_webhook_admission_duration_seconds\{.*rejected="false"/))}`,
      `of which the webhook's handler, first body byte read to answer written (nodeflavor_admission_review_duration_seconds) mean ${ms(metrics.mean('webhook', /^nodeflavor_admission_review_duration_seconds/))}`,
      `the same reviews from another process over one undici connection: round trip p50/p99 ${single.p50Ms.toFixed(2)}/${single.p99Ms.toFixed(2)} ms`,
      `matchConditions evaluation mean: webhook ${ms(metrics.mean('webhook', /^apiserver_admission_match_condition_evaluation_seconds\{kind="webhook"/))}, policy ${ms(metrics.mean('policy', /^apiserver_admission_match_condition_evaluation_seconds\{kind="policy"/))} (the API server records no duration for allowed policy validations)`,
      `CPU per write (half kubelet PATCHes, half registrations; the registrations' untimed deletes included) by process: none ${cpu.perUnit('none')}; webhook ${cpu.perUnit('webhook')}; policy ${cpu.perUnit('policy')}`,
    ].join('; ');
    log(`P2 breakdown: ${breakdown}`);

    return [
      ...addedFigures(
        'P2 kubelet PATCH (non-protected label)',
        samples.kubelet,
        unguardedRoundP99.kubelet,
        `a joined kubelet's merge PATCH of ${REV_LABEL} on its own ${(nodeBytes / 1024).toFixed(0)} KiB Node, sequential, ${ROUNDS} interleaved rounds; the registrations' matchConditions send only writes touching protected keys on, so this write never reaches the webhook server: both add only CEL matchConditions`,
        `${loadBefore.toFixed(1)} before, ${loadMeasured.toFixed(1)} after the writes`,
      ),
      ...addedFigures(
        'P2b kubelet registration (Node CREATE with token label + quarantine taint, allowed)',
        samples.register,
        unguardedRoundP99.register,
        `a second joined kubelet's POST of its own Node with ${TOKEN_LABEL_KEY} and the ${QUARANTINE_TAINT_KEY} taint, as every joining node does (the Node deleted by an admin before each, not timed), interleaved with the first kubelet's PATCHes; it touches protected keys, so the API server calls the webhook (in-process, HTTPS on 127.0.0.1, registered by URL) or runs the policy's validations; ${breakdown}`,
        `${loadBefore.toFixed(1)} before, ${loadMeasured.toFixed(1)} after the writes`,
      ),
      figure({
        name: 'P2 webhook server alone',
        value: load.reviewsPerSecond,
        unit: 'reviews/s',
        baseline: null,
        baselineName: null,
        goal: '≥ 3,000 reviews/s',
        met: load.reviewsPerSecond >= 3000,
        notes: `startWebhookServer in its own process (pino info logging to a file, as nodeflavor run logs), load generator (undici Pool, ${load.connections} keep-alive HTTP/1.1 connections, one review in flight each) in another process, ${(load.durationMs / 1000).toFixed(1)} s after 1 s warm-up; AdmissionReviews of ${(load.bodyBytes.min / 1024).toFixed(0)}-${(load.bodyBytes.max / 1024).toFixed(0)} KiB (~15 KB Nodes as object and oldObject), a third each kubelet UPDATE of a protected label (denied), kubelet CREATE with token label + quarantine taint (allowed), admin-group UPDATE (allowed); review latency p50/p99 ${load.p50Ms.toFixed(2)}/${load.p99Ms.toFixed(2)} ms; both processes share the machine's ${cpus().length} cores (1-min load average ${(loadavg()[0] ?? 0).toFixed(1)} after the load)${
          profileSummary
            ? `; profile: ${profileSummary.byPlace
                .slice(0, 5)
                .map((p) => `${p.place} ${(p.share * 100).toFixed(0)}%`)
                .join(', ')}`
            : ''
        }`,
      }),
    ];
  } finally {
    await guard?.off().catch(() => undefined);
    keys?.stop();
    if (kubelet) {
      kubelet.stop();
      await env.core.deleteNode({ name: kubelet.nodeName }).catch(() => undefined);
    }
    await env.core
      .deleteNamespacedSecret({ name: `${NAME}-tls`, namespace: OPERATOR_NAMESPACE })
      .catch(() => undefined);
    if (registrant) {
      registrant.stop();
      await env.core.deleteNode({ name: registrant.nodeName }).catch(() => undefined);
    }
    for (const secret of [bootstrapSecret, registrantSecret]) {
      if (!secret) continue;
      await env.core
        .deleteNamespacedSecret({ name: secret, namespace: 'kube-system' })
        .catch(() => undefined);
    }
    await deleteFlavorClass(env, P2_FLAVOR);
    await deleteObjects(env, created);
    for (const identity of identities) identity.http.close();
  }
}

if (import.meta.main) await runStandalone(runP2);
