// `make cluster-up` / `make cluster-down`: a local control plane that outlives the command.
// `up` starts a detached supervisor (`serve`) and waits until it reports ready; the admin
// kubeconfig lands in .cluster/kubeconfig. The chart's CRDs, RBAC and ServiceAccount are applied
// and .cluster/operator.kubeconfig holds a token of that ServiceAccount, the identity
// `nodeflavor run` must have (ADR 0003). `down` signals the supervisor, which stops every
// component and removes its temp dir.
import { spawn } from 'node:child_process';
import { closeSync, existsSync, mkdirSync, openSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { setTimeout as delay } from 'node:timers/promises';
import { ControlPlane } from './controlplane.ts';

const stateDir = join(process.cwd(), '.cluster');
const pidFile = join(stateDir, 'pid');
const readyFile = join(stateDir, 'ready');
const logFile = join(stateDir, 'cluster.log');
const kubeconfigFile = join(stateDir, 'kubeconfig');
const operatorKubeconfigFile = join(stateDir, 'operator.kubeconfig');

function runningPid(): number | undefined {
  if (!existsSync(pidFile)) return undefined;
  const pid = Number(readFileSync(pidFile, 'utf8'));
  try {
    process.kill(pid, 0);
    return pid;
  } catch {
    return undefined;
  }
}

async function up(): Promise<number> {
  mkdirSync(stateDir, { recursive: true });
  if (runningPid()) {
    console.log(`control plane already running; kubeconfig: ${kubeconfigFile}`);
    return 0;
  }
  rmSync(readyFile, { force: true });
  const log = openSync(logFile, 'w');
  const child = spawn(process.execPath, [...process.execArgv, process.argv[1] ?? '', 'serve'], {
    detached: true,
    stdio: ['ignore', log, log],
  });
  closeSync(log);
  writeFileSync(pidFile, String(child.pid));
  child.unref();
  const deadline = Date.now() + 120_000;
  while (Date.now() < deadline) {
    if (existsSync(readyFile)) {
      console.log(readFileSync(readyFile, 'utf8').trim());
      console.log(`kubeconfig: ${kubeconfigFile}   (stop with: make cluster-down)`);
      console.log(`the chart's ServiceAccount (run nodeflavor with this one): ${operatorKubeconfigFile}`);
      return 0;
    }
    if (!runningPid()) break;
    await delay(200);
  }
  console.error(
    `control plane did not start; log ${logFile}:\n${readFileSync(logFile, 'utf8').split('\n').slice(-30).join('\n')}`,
  );
  return 1;
}

async function serve(): Promise<void> {
  const plane = await ControlPlane.start({ log: (line) => console.log(`[control-plane] ${line}`) });
  writeFileSync(kubeconfigFile, readFileSync(plane.kubeconfigPath), { mode: 0o600 });
  const version = await plane.serverVersion();
  const stop = async () => {
    await plane.stop();
    rmSync(pidFile, { force: true });
    rmSync(readyFile, { force: true });
    rmSync(kubeconfigFile, { force: true });
    rmSync(operatorKubeconfigFile, { force: true });
    process.exit(0);
  };
  await writeOperatorKubeconfig(plane);
  process.on('SIGTERM', stop);
  process.on('SIGINT', stop);
  writeFileSync(readyFile, `control plane ${version} ready at ${plane.server} (logs in ${plane.dir})\n`);
  setInterval(() => {}, 1 << 30); // stay alive until signalled
}

/** The chart applied as `make demo` applies it (out of cluster); its ServiceAccount's kubeconfig. */
async function writeOperatorKubeconfig(plane: ControlPlane): Promise<void> {
  process.env.E2E_KUBECONFIG = plane.kubeconfigPath;
  const { e2eEnvironment } = await import('../support/environment.ts');
  const { installChartOutOfCluster } = await import('../support/chart.ts');
  const install = await installChartOutOfCluster(await e2eEnvironment(), {
    namespace: 'nodeflavor',
    dir: plane.dir,
  });
  writeFileSync(operatorKubeconfigFile, readFileSync(install.kubeconfigPath), { mode: 0o600 });
}

async function down(): Promise<number> {
  const pid = runningPid();
  if (!pid) {
    console.log('no control plane running');
    rmSync(pidFile, { force: true });
    return 0;
  }
  process.kill(pid, 'SIGTERM');
  const deadline = Date.now() + 30_000;
  while (Date.now() < deadline && runningPid()) await delay(100);
  if (runningPid()) {
    process.kill(pid, 'SIGKILL');
    console.error('control plane did not stop in 30 s; killed its supervisor');
    return 1;
  }
  console.log('control plane stopped');
  return 0;
}

const command = process.argv[2];
if (command === 'serve') {
  serve().catch((error: Error) => {
    console.error(`control plane failed: ${error.message}`);
    process.exit(1);
  });
} else if (command === 'up' || command === 'down') {
  (command === 'up' ? up() : down()).then((code) => process.exit(code));
} else {
  console.error('usage: cli.ts up|down');
  process.exit(2);
}
