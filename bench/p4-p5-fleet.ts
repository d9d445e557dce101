// P4 memory: the controller's RSS once it has synced N realistic Nodes, against a naive
// full-object client-node informer in the same run. P5 restart: how long a fresh controller
// takes to sync and reconcile all N (already flavored) nodes.
// The operator runs with the Node.js options the Helm chart sets (its heap cap), as deployed.
//   node --import tsx bench/p4-p5-fleet.ts [--scale quick] [--cpu-prof]   (or BENCH_CPU_PROF=1)
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { ManagedProcess } from '../test/e2e/cluster/process.ts';
import { prepareOperatorIdentity } from '../test/e2e/support/chart.ts';
import { e2eEnvironment } from '../test/e2e/support/environment.ts';
import {
  ensureNamespace,
  installCrds,
  metricValue,
  OPERATOR_NAMESPACE,
  startOperator,
  waitOperatorSettled,
} from '../test/e2e/support/nodeflavor.ts';
import { createFleet } from './fixture-nodes.ts';
import {
  benchDir,
  chartNodeOptions,
  type Figure,
  figure,
  freePort,
  log,
  logProfile,
  nodeArgsFor,
  requestCounts,
  runStandalone,
  type Scale,
  waitReady,
} from './lib.ts';

function rssMiB(pid: number | undefined): number {
  if (!pid) throw new Error('process is gone');
  const match = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  return Number(match?.[1] ?? 0) / 1024;
}

const settle = () => new Promise((resolve) => setTimeout(resolve, 3000));

export async function runP4P5(scale: Scale): Promise<Figure[]> {
  const count = scale === 'quick' ? 1000 : 10_000;
  const env = await e2eEnvironment();
  await installCrds(env);
  await ensureNamespace(env, OPERATOR_NAMESPACE);
  // The operator runs as the Helm chart's ServiceAccount, as in a real install.
  await prepareOperatorIdentity(env);
  const logs = benchDir('nodeflavor-bench-p4-');
  // What the process takes before any node: Node.js, the modules (client-node's generated API
  // alone is ~80 MiB resident), the metrics registry. The fleet's share is the rest.
  const idlePort = await freePort();
  const idle = startOperator(join(logs, 'operator-idle.log'), ['--no-leader-elect', '--log-level', 'warn'], {
    metricsPort: idlePort,
    nodeArgs: chartNodeOptions(),
    built: true,
  });
  await waitReady(idlePort, 120_000);
  await settle();
  const idleRss = rssMiB(idle.componentPid());
  const idleHeap = (await metricValue(idlePort, 'nodejs_heap_size_used_bytes')) / 2 ** 20;
  await idle.stop();
  log(
    `P4: an idle operator (no nodes yet): RSS ${idleRss.toFixed(0)} MiB, JS heap used ${idleHeap.toFixed(0)} MiB`,
  );

  log(`P4/P5: creating ${count} realistic nodes and their tokens`);
  const started = Date.now();
  await createFleet(env.kubeConfig, count, (done) => log(`  ${done}/${count}`));
  log(`P4/P5: fleet ready in ${((Date.now() - started) / 1000).toFixed(0)} s`);

  // A first run settles the fleet (finalizers, conditions: thousands of one-off writes), as an
  // operator that has run for a while would have. It is not measured.
  const settlePort = await freePort();
  const settler = startOperator(
    join(logs, 'operator-settle.log'),
    ['--no-leader-elect', '--log-level', 'warn'],
    {
      metricsPort: settlePort,
      nodeArgs: chartNodeOptions(),
      built: true,
    },
  );
  await waitReady(settlePort, 300_000);
  await waitOperatorSettled(settlePort, count, { timeoutMs: 900_000, intervalMs: 100 });
  log(`P4/P5 settling run: API requests ${await requestCounts(settlePort)}`);
  await settler.stop();

  // P5 and P4: a fresh controller (a restart, a failover) syncs and reconciles the settled fleet;
  // its memory is read once it has.
  const port = await freePort();
  const restartStarted = performance.now();
  const profiles = join(logs, 'operator-prof');
  const operator = startOperator(join(logs, 'operator.log'), ['--no-leader-elect', '--log-level', 'warn'], {
    metricsPort: port,
    nodeArgs: nodeArgsFor(profiles),
    built: true,
  });
  await waitReady(port, 300_000);
  const readyAt = performance.now();
  await waitOperatorSettled(port, count, { timeoutMs: 600_000, intervalMs: 100 });
  const restartSeconds = (performance.now() - restartStarted) / 1000;
  log(`P5 restart: API requests ${await requestCounts(port)}`);
  log(`P5: ready (caches synced) after ${((readyAt - restartStarted) / 1000).toFixed(1)} s`);
  log(`P5: restart to all ${count} reconciled in ${restartSeconds.toFixed(1)} s`);
  await settle();
  const ours = rssMiB(operator.componentPid());
  const mib = async (name: string) => (await metricValue(port, name)) / 2 ** 20;
  const heapUsed = await mib('nodejs_heap_size_used_bytes');
  log(
    `P4 memory: RSS ${ours.toFixed(0)} MiB, JS heap used ${heapUsed.toFixed(0)} MiB of ${(await mib('nodejs_heap_size_total_bytes')).toFixed(0)} MiB, external ${(await mib('nodejs_external_memory_bytes')).toFixed(0)} MiB`,
  );
  await operator.stop();
  logProfile('P5 restart', profiles);

  const naive = new ManagedProcess(
    'naive-informer',
    process.execPath,
    // Node.js strips the types itself: no tsx, like the compiled operator it is compared with.
    [join(import.meta.dirname, 'naive-informer.ts'), '--kubeconfig', env.kubeconfigPath],
    join(logs, 'naive.log'),
  );
  const deadline = Date.now() + 300_000;
  const naiveLog = join(logs, 'naive.log');
  while (
    !(existsSync(naiveLog) && readFileSync(naiveLog, 'utf8').includes('synced')) &&
    Date.now() < deadline
  ) {
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
  await settle();
  const theirs = rssMiB(naive.componentPid());
  await naive.stop();
  log(
    `P4: controller ${ours.toFixed(0)} MiB RSS (Node.js ${chartNodeOptions().join(' ')}), naive informer ${theirs.toFixed(0)} MiB`,
  );

  return [
    figure({
      name: `P4 controller RSS after syncing ${count} nodes`,
      value: ours,
      unit: 'MiB',
      baseline: theirs,
      baselineName: 'naive full-object informer',
      goal: '≤ 150 MiB and ≤ 0.3× naive',
      met: ours <= 150 && ours <= 0.3 * theirs,
      notes: `with the chart's Node.js options (${chartNodeOptions().join(' ')}); JS heap used ${heapUsed.toFixed(0)} MiB; the same operator idle before any node: RSS ${idleRss.toFixed(0)} MiB, heap ${idleHeap.toFixed(0)} MiB; the naive informer runs with Node.js defaults`,
    }),
    figure({
      name: `P5 restart: sync + reconcile ${count} nodes`,
      value: restartSeconds,
      unit: 's',
      baseline: null,
      baselineName: null,
      goal: '≤ 15 s',
      met: restartSeconds <= 15,
      notes:
        'from process start (the compiled operator, as in the image) to every node reconciled and the queues empty',
    }),
  ];
}

if (import.meta.main) await runStandalone(runP4P5);
