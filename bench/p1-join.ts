import { join } from 'node:path';
import type { KubeConfig } from '@kubernetes/client-node';
import { ManagedProcess } from '../test/e2e/cluster/process.ts';
import { parseJoinConfiguration } from '../test/e2e/kubelet-sim/join-config.ts';
import { SimulatedKubelet } from '../test/e2e/kubelet-sim/kubelet.ts';
import { createBootstrapToken, joinConfiguration } from '../test/e2e/support/bootstrap.ts';
import { prepareOperatorIdentity } from '../test/e2e/support/chart.ts';
import { e2eEnvironment } from '../test/e2e/support/environment.ts';
import {
  applyFlavorClass,
  customObjects,
  ensureNamespace,
  installCrds,
  issue,
  type JoinFiles,
  nodeFiles,
  OPERATOR_NAMESPACE,
  startOperator,
} from '../test/e2e/support/nodeflavor.ts';
import { SEEN_LABEL } from './bare-watcher-label.ts';
import {
  benchDir,
  describeRequests,
  type Figure,
  figure,
  freePort,
  imageEnv,
  log,
  logProfile,
  mapLimit,
  nodeArgsFor,
  requestCounts,
  requestSeries,
  requestsBetween,
  runStandalone,
  type Scale,
  summary,
  waitReady,
} from './lib.ts';
import { LabelObserver } from './observer.ts';
import { controlPlanePids, ProcessCpu } from './profiling.ts';

const FLAVOR_LABEL = 'nodeflavor.io/flavor';

interface Burst {
  latencies: number[];
  nodesPerSecond: number;
}

/** CPU seconds per join of every measured process together, in ms. */
function machineCpuPerJoin(cpu: ProcessCpu, names: string[]): number {
  return names.reduce((ms, name) => ms + (cpu.perUnitOf('burst', name) || 0) * 1000, 0);
}

async function burst(
  kubeConfig: KubeConfig,
  prefix: string,
  label: string,
  materials: JoinFiles[],
  concurrency: number,
  cpu: ProcessCpu,
): Promise<Burst> {
  const observer = new LabelObserver(kubeConfig, prefix, label);
  await observer.start();
  const cpuBefore = cpu.snapshot();
  const createdAt = new Map<string, number>();
  const kubelets: SimulatedKubelet[] = [];
  const started = performance.timeOrigin + performance.now();
  await mapLimit(materials, concurrency, async (material, i) => {
    const name = `${prefix}${i}`;
    const config = typeof material === 'string' ? material : material.joinConfiguration;
    const kubelet = new SimulatedKubelet(name, parseJoinConfiguration(config), {
      timeoutMs: 120_000,
      readFile: nodeFiles(material),
    });
    kubelets.push(kubelet);
    await kubelet.join();
    createdAt.set(name, performance.timeOrigin + performance.now());
    kubelet.stop();
  });
  await observer.waitForCount(materials.length, 300_000);
  cpu.add('burst', cpuBefore, cpu.snapshot(), materials.length);
  observer.stop();
  const latencies = [...createdAt].map(([name, at]) => Math.max(0, (observer.seenAt.get(name) ?? at) - at));
  const last = Math.max(...observer.seenAt.values());
  return { latencies, nodesPerSecond: materials.length / ((last - started) / 1000) };
}

interface TokenState {
  metadata: { name: string; finalizers?: string[] };
  status?: {
    tokenID?: string;
    bindings?: { verifiedAt?: string }[];
    conditions?: { type: string; status: string }[];
  };
}

/** Waits until every named FlavoredToken is in the state `done` describes. */
async function waitTokens(
  kubeConfig: KubeConfig,
  names: string[],
  done: (token: TokenState) => boolean,
  what: string,
): Promise<void> {
  const wanted = new Set(names);
  const deadline = Date.now() + 300_000;
  while (Date.now() < deadline) {
    const list = (await customObjects(kubeConfig).listClusterCustomObject({
      group: 'nodeflavor.io',
      version: 'v1alpha1',
      plural: 'flavoredtokens',
    })) as { items: TokenState[] };
    if (list.items.filter((t) => wanted.has(t.metadata.name) && done(t)).length === wanted.size) return;
    await new Promise((resolve) => setTimeout(resolve, 250));
  }
  throw new Error(`the operator did not ${what} within 300 s`);
}

/** The issuer writes a record in its final state (ADR 0015): the controller writes nothing to it. */
const takenIn = (t: TokenState) => Boolean(t.metadata.finalizers?.length && !t.status);

interface RecordState {
  metadata: { name: string };
  status?: { join?: { verifiedAt?: string; secretDeleted?: boolean } };
}

/** Until `count` join records (of the burst's `p1-nf-` nodes) say verified with the Secret deleted. */
async function waitRecords(kubeConfig: KubeConfig, count: number, what: string): Promise<void> {
  const deadline = Date.now() + 300_000;
  while (Date.now() < deadline) {
    const list = (await customObjects(kubeConfig).listClusterCustomObject({
      group: 'nodeflavor.io',
      version: 'v1alpha1',
      plural: 'nodenameclaims',
    })) as { items: RecordState[] };
    const done = list.items.filter(
      (r) =>
        r.metadata.name.startsWith('p1-nf-') && r.status?.join?.verifiedAt && r.status.join.secretDeleted,
    ).length;
    if (done >= count) return;
    await new Promise((resolve) => setTimeout(resolve, 250));
  }
  throw new Error(`timed out: ${what}`);
}

export async function runP1(scale: Scale): Promise<Figure[]> {
  const nodes = scale === 'quick' ? 100 : 1000;
  const concurrency = 50;
  const env = await e2eEnvironment();
  await installCrds(env);
  await ensureNamespace(env, OPERATOR_NAMESPACE);
  // The operator runs as the Helm chart's ServiceAccount, as in a real install.
  await prepareOperatorIdentity(env);
  await applyFlavorClass(env, 'bench', { labels: { [FLAVOR_LABEL]: 'bench' } });
  const logs = benchDir('nodeflavor-bench-p1-');

  // Both bursts join under the same conditions: one token per node for each, all made before
  // either burst. The plain tokens (token discovery) each add a signature the bootstrap signer
  // keeps in cluster-info; nodeflavor's (file discovery, the default) add none. Every joining node
  // reads cluster-info in both bursts (kubeadm's file discovery reads it to check the TLS).
  log(`P1: issuing ${nodes} nodeflavor tokens and creating ${nodes} plain bootstrap tokens`);
  const issued = await mapLimit(Array.from({ length: nodes }), 16, () => issue(env, 'bench', { ttl: '1h' }));
  const plain = await mapLimit(Array.from({ length: nodes }), 16, () => createBootstrapToken(env));

  log(`P1 floor: ${nodes} joins watched by a bare watcher`);
  const bare = new ManagedProcess(
    'bare-watcher',
    process.execPath,
    [
      // Node.js strips the types itself: no tsx, like the compiled operator it is compared with.
      join(import.meta.dirname, 'bare-watcher.ts'),
      '--kubeconfig',
      env.kubeconfigPath,
      '--prefix',
      'p1-floor-',
    ],
    join(logs, 'bare-watcher.log'),
  );
  // Where each burst's CPU goes (2 cores serve the control plane, the kubelets and the watcher).
  const plane = controlPlanePids(env.kubeconfigPath);
  const kubelets = 'kubelets (this process)';
  const floorCpu = new ProcessCpu({ ...plane, [kubelets]: process.pid, watcher: bare.pid ?? 0 });
  const floor = await burst(
    env.kubeConfig,
    'p1-floor-',
    SEEN_LABEL,
    plain.map((token) => joinConfiguration(env, token.token)),
    concurrency,
    floorCpu,
  );
  await bare.stop();
  // The floor's tokens have served. Left in place, every Secret the operator deletes in its burst
  // (a consumed token's) would have kube-controller-manager's bootstrap signer sign cluster-info
  // again for each of these thousand signing tokens (bench/discovery-cliff.ts): a cost of the
  // bench's set-up, not of a join. A cluster holds a handful of signing tokens, not a thousand.
  await mapLimit(plain, 16, (token) =>
    env.core.deleteNamespacedSecret({ namespace: 'kube-system', name: `bootstrap-token-${token.id}` }),
  );

  const metricsPort = await freePort();
  const operator = startOperator(join(logs, 'operator.log'), ['--no-leader-elect', '--log-level', 'warn'], {
    metricsPort,
    nodeArgs: nodeArgsFor(join(logs, 'operator-prof')),
    env: imageEnv(),
    built: true,
  });
  await waitReady(metricsPort);
  // Tokens are issued ahead of a real burst while the operator runs: let it take them in (status,
  // finalizer) before the joins start, so the burst measures joins alone.
  await waitTokens(
    env.kubeConfig,
    issued.map((t) => t.name),
    takenIn,
    'take in the issued tokens',
  );
  log(`P1 nodeflavor: tokens taken in; API requests so far ${await requestCounts(metricsPort)}`);
  const before = await requestSeries(metricsPort);
  log(`P1 nodeflavor: ${nodes} joins`);
  const ourCpu = new ProcessCpu({
    ...plane,
    [kubelets]: process.pid,
    watcher: operator.componentPid() ?? operator.pid ?? 0,
  });
  const measured = await burst(
    env.kubeConfig,
    'p1-nf-',
    FLAVOR_LABEL,
    issued.map((t) => t.material),
    concurrency,
    ourCpu,
  );
  const whenFlavored = await requestSeries(metricsPort);
  // Everything a join costs, the writes after the node shows its flavor included: its record says
  // verified, and that the consumed token's Secret was deleted (ADR 0016).
  await waitRecords(env.kubeConfig, nodes, 'record every join verified, its Secret deleted');
  const perJoin = requestsBetween(before, await requestSeries(metricsPort), nodes);
  const sum = (keys: (key: string) => boolean) =>
    [...perJoin].filter(([key]) => keys(key)).reduce((n, [, v]) => n + v, 0);
  // A FlavorClass's status (how many Nodes it flavors) is written at most about once a second
  // whatever the rate of joins (CLASS_COALESCE_MS): a figure of its own, not a join's request.
  const CLASS_STATUS = 'PUT 200 flavorclasses/status';
  const classStatusWrites = (perJoin.get(CLASS_STATUS) ?? 0) * nodes;
  const burstSeconds = nodes / measured.nodesPerSecond;
  const ofTheJoin = (key: string) => key !== CLASS_STATUS;
  const requestsPerJoin = sum(ofTheJoin);
  // A join's requests in the order the code makes them: its one pass (the record's create, the
  // Node read, the use counted, the approval) and the Node write come before its flavor shows;
  // its record's outcome and the consumed token's Secret deletion come after, once the Node's
  // outcome is seen (join-follow.ts). By kind, since many joins overlap in a burst.
  const AFTER_FLAVOR = ['PUT 200 nodenameclaims', 'DELETE 200 secrets'];
  const requestsBeforeFlavor = sum((key) => ofTheJoin(key) && !AFTER_FLAVOR.includes(key));
  const conflicts = sum((key) => key.includes(' 409 '));
  log(
    `P1 nodeflavor: API requests when the last node showed its flavor: ${describeRequests(requestsBetween(before, whenFlavored))}`,
  );
  log(`P1 nodeflavor: API requests per join, in all: ${describeRequests(perJoin)}`);
  await operator.stop();
  logProfile('P1 operator', join(logs, 'operator-prof'));
  const measuredNames = [...Object.keys(plane), kubelets, 'watcher'];
  const floorMachine = machineCpuPerJoin(floorCpu, measuredNames);
  const ourMachine = machineCpuPerJoin(ourCpu, measuredNames);
  log(`P1 floor: CPU per join: ${floorCpu.perUnit('burst')} (${floorMachine.toFixed(2)} ms in all)`);
  log(
    `P1 nodeflavor: CPU per join: ${ourCpu.perUnit('burst')} (${ourMachine.toFixed(2)} ms in all; the watcher is the operator)`,
  );

  const ours = summary(measured.latencies);
  const base = summary(floor.latencies);
  log(
    `P1 nodeflavor p50/p95/p99 ${ours.p50.toFixed(0)}/${ours.p95.toFixed(0)}/${ours.p99.toFixed(0)} ms; floor ${base.p50.toFixed(0)}/${base.p95.toFixed(0)}/${base.p99.toFixed(0)} ms`,
  );
  const latency = (p: 'p50' | 'p95' | 'p99', goal: string, met: (v: number, b: number) => boolean) =>
    figure({
      name: `P1 join→flavored ${p}`,
      value: ours[p],
      unit: 'ms',
      baseline: base[p],
      baselineName: 'bare watcher',
      goal,
      met: met(ours[p], base[p]),
    });
  return [
    latency('p50', '-', () => true),
    latency('p95', '-', () => true),
    latency('p99', '≤ 2× floor', (v, b) => v <= 2 * b),
    figure({
      name: 'P1 nodes flavored per second',
      value: measured.nodesPerSecond,
      unit: 'nodes/s',
      baseline: floor.nodesPerSecond,
      baselineName: 'bare watcher',
      goal: '≥ 0.7× floor',
      met: measured.nodesPerSecond >= 0.7 * floor.nodesPerSecond,
      notes: `${nodes} joins at concurrency ${concurrency}; the machine's CPU per join (control plane, kubelets, watcher): ${ourMachine.toFixed(1)} ms against the floor's ${floorMachine.toFixed(1)} ms (${(floorMachine / ourMachine).toFixed(2)}×: the rate a CPU-bound machine allows); kube-apiserver ${(ourCpu.perUnitOf('burst', 'kube-apiserver') * 1000).toFixed(1)} ms against ${(floorCpu.perUnitOf('burst', 'kube-apiserver') * 1000).toFixed(1)} ms`,
    }),
    figure({
      name: 'P1 operator API requests per join, before its node shows its flavor',
      value: requestsBeforeFlavor,
      unit: 'requests',
      baseline: 1,
      baselineName: 'bare watcher (one label write)',
      goal: '≤ 5',
      met: requestsBeforeFlavor <= 5,
      notes: `the join's one pass (the record's create, the Node read, the use counted, the approval) and the Node write, counted by kind: every request of the join but the record's outcome (${AFTER_FLAVOR[0]}) and the Secret's deletion (${AFTER_FLAVOR[1]}), which follow the Node's`,
    }),
    figure({
      name: 'P1 operator API requests per join',
      value: requestsPerJoin,
      unit: 'requests',
      baseline: 1,
      baselineName: 'bare watcher (one label write)',
      goal: '≤ 7, 0 conflicts',
      met: requestsPerJoin <= 7 && conflicts === 0,
      notes: `from the first CSR to the last record write; ${conflicts} conflicts (409); no Normal Verified Event (--verified-events is off by default); per join by method, code and resource: ${describeRequests(perJoin)} (the FlavorClass status writes are the next figure's)`,
    }),
    figure({
      name: 'P1 FlavorClass status writes per second of the burst',
      value: classStatusWrites / burstSeconds,
      unit: 'writes/s',
      baseline: null,
      baselineName: null,
      goal: '≤ 1 (one class, coalesced)',
      met: classStatusWrites / burstSeconds <= 1,
      notes: `${Math.round(classStatusWrites)} writes over ${burstSeconds.toFixed(1)} s (${(classStatusWrites / nodes).toFixed(3)} per join in this burst; a slow trickle of joins costs one each)`,
    }),
  ];
}

if (import.meta.main) await runStandalone(runP1);
