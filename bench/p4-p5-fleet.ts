// P4 memory: the controller's RSS once it has synced N realistic Nodes, against a naive
// full-object client-node informer in the same run. P5 restart: how long a fresh controller
// takes to sync and reconcile all N (already flavored) nodes.
//   node --import tsx bench/p4-p5-fleet.ts [--scale quick]
import { existsSync, mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ManagedProcess } from '../test/e2e/cluster/process.ts';
import { prepareOperatorIdentity } from '../test/e2e/support/chart.ts';
import { e2eEnvironment } from '../test/e2e/support/environment.ts';
import {
  ensureNamespace,
  installCrds,
  OPERATOR_NAMESPACE,
  startOperator,
} from '../test/e2e/support/nodeflavor.ts';
import { createFleet } from './fixture-nodes.ts';
import {
  benchControlPlane,
  type Figure,
  figure,
  freePort,
  log,
  printTable,
  runStandalone,
  type Scale,
  scaleFromArgs,
  waitReady,
} from './lib.ts';

function rssMiB(pid: number | undefined): number {
  if (!pid) throw new Error('process is gone');
  const match = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  return Number(match?.[1] ?? 0) / 1024;
}

async function metric(port: number, pattern: RegExp): Promise<number> {
  const text = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
  return Number(pattern.exec(text)?.[1] ?? 0);
}

/** Until the operator has reconciled every node once and both queues are empty. */
async function waitReconciled(port: number, nodes: number, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    const done = await metric(port, /nodeflavor_reconciles_total\{queue="nodes",result="ok"\} (\d+)/);
    const depth =
      (await metric(port, /nodeflavor_workqueue_depth\{queue="nodes"\} (\d+)/)) +
      (await metric(port, /nodeflavor_workqueue_depth\{queue="tokens"\} (\d+)/));
    if (done >= nodes && depth === 0) return;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  throw new Error(`the operator did not reconcile ${nodes} nodes within ${timeoutMs / 1000} s`);
}

const settle = () => new Promise((resolve) => setTimeout(resolve, 3000));

export async function runP4P5(scale: Scale): Promise<Figure[]> {
  const count = scale === 'quick' ? 1000 : 10_000;
  const env = await e2eEnvironment();
  await installCrds(env);
  await ensureNamespace(env, OPERATOR_NAMESPACE);
  // The operator runs as the Helm chart's ServiceAccount, as in a real install.
  await prepareOperatorIdentity(env);
  const logs = mkdtempSync(join(tmpdir(), 'nodeflavor-bench-p4-'));
  log(`P4/P5: creating ${count} realistic nodes and their tokens`);
  const started = Date.now();
  await createFleet(env.kubeConfig, count, (done) => log(`  ${done}/${count}`));
  log(`P4/P5: fleet ready in ${((Date.now() - started) / 1000).toFixed(0)} s`);

  // First run settles the fleet (finalizers, conditions) and is the one whose memory we read.
  const port = await freePort();
  const first = startOperator(join(logs, 'operator-1.log'), ['--no-leader-elect', '--log-level', 'warn'], {
    metricsPort: port,
  });
  await waitReady(port, 300_000);
  await waitReconciled(port, count, 600_000);
  await settle();
  const ours = rssMiB(first.componentPid());
  await first.stop();

  const naive = new ManagedProcess(
    'naive-informer',
    process.execPath,
    ['--import', 'tsx', join(import.meta.dirname, 'naive-informer.ts'), '--kubeconfig', env.kubeconfigPath],
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
  log(`P4: controller ${ours.toFixed(0)} MiB, naive informer ${theirs.toFixed(0)} MiB`);

  // P5: a fresh controller on the settled fleet.
  const port2 = await freePort();
  const restartStarted = performance.now();
  const second = startOperator(join(logs, 'operator-2.log'), ['--no-leader-elect', '--log-level', 'warn'], {
    metricsPort: port2,
  });
  await waitReady(port2, 300_000);
  await waitReconciled(port2, count, 600_000);
  const restartSeconds = (performance.now() - restartStarted) / 1000;
  await second.stop();
  log(`P5: restart to all ${count} reconciled in ${restartSeconds.toFixed(1)} s`);

  return [
    figure({
      name: `P4 controller RSS after syncing ${count} nodes`,
      value: ours,
      unit: 'MiB',
      baseline: theirs,
      baselineName: 'naive full-object informer',
      goal: '≤ 150 MiB and ≤ 0.3× naive',
      met: ours <= 150 && ours <= 0.3 * theirs,
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
        'from process start (Node.js + tsx start-up included) to every node reconciled and the queues empty',
    }),
  ];
}

if (import.meta.main) await runStandalone(runP4P5);
