// Where kube-apiserver's CPU goes during issuance's protocol (ADR 0015: a FlavoredToken create,
// its owned bootstrap Secret, the record read back) against raw Secret creates, at concurrency
// 32 from one client as the issuer's ServiceAccount, with the controller running: a Go CPU
// profile of kube-apiserver for each arm (its /debug/pprof/profile, --profiling is on by default),
// printed as the top functions by cumulative CPU and grouped by what they are for. P3's
// "kube-apiserver CPU per issuance" figure says how much; this says why.
//   node --import tsx bench/apiserver-pprof.ts [--seconds 15] [--out DIR]
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { Pool } from 'undici';
import { randomString, TOKEN_ALPHABET } from '../src/flavor/bootstrap-token.ts';
import { kubeFetch } from '../src/runtime/fetch.ts';
import { prepareOperatorIdentity } from '../test/e2e/support/chart.ts';
import { e2eEnvironment } from '../test/e2e/support/environment.ts';
import { applyFlavorClass, startOperator } from '../test/e2e/support/nodeflavor.ts';
import { benchControlPlane, benchDir, buildOperator, freePort, imageEnv, log, waitReady } from './lib.ts';
import { BASELINE_LABEL, baselineSecret, FLAVOR, post, protocolRecord, send } from './p3-issuance.ts';

const CONCURRENCY = 32;
/** --out DIR keeps the profiles (the bench's own temp dir is removed at exit). */
const outDir = (() => {
  const at = process.argv.indexOf('--out');
  return at >= 0 ? process.argv[at + 1] : undefined;
})();
const seconds = (() => {
  const at = process.argv.indexOf('--seconds');
  return at >= 0 ? Number(process.argv[at + 1]) : 15;
})();

/** Where a request's CPU goes: functions whose cumulative CPU each stands for one cost. */
const MARKERS: [string, RegExp][] = [
  ['custom resource create', /crdHandler\)\.serveResource\.CreateResource\.createHandler\.func\d+\.2$/],
  ['custom resource get', /crdHandler\)\.serveResource\.GetResource\.getResourceHandler\.func\d+$/],
  ['built-in create (the Secret)', /endpoints\/handlers\.CreateResource\.createHandler\.func1\.2$/],
  ['  of which: schema coercion of decoded custom resources', /unstructuredSchemaCoercer\)\.apply$/],
  ['  of which: schema and CEL validation', /customResourceStrategy\.Validate$/],
  ['  of which: managedFields', /fieldmanager\.\(\*FieldManager\)\.UpdateNoErrors$/],
  ['  of which: decoding what etcd returned', /etcd3\.\(\*defaultDecoder\)\.Decode$/],
  ['watch cache (every watcher)', /cacher\.\(\*watchCache\)\.processEvent$/],
  ['Go garbage collector', /runtime\.gcBgMarkWorker$/],
];

async function profile(env: Awaited<ReturnType<typeof e2eEnvironment>>, path: string): Promise<void> {
  const response = await kubeFetch(env.kubeConfig, '/debug/pprof/profile', {
    query: { seconds },
    timeoutMs: (seconds + 30) * 1000,
  });
  if (!response.ok) throw new Error(`pprof: HTTP ${response.status}: ${await response.text()}`);
  writeFileSync(path, Buffer.from(await response.arrayBuffer()));
}

/** Runs `work` from CONCURRENCY loops until `until` resolves; returns how many were done. */
async function loadUntil(until: Promise<void>, work: () => Promise<void>): Promise<number> {
  let done = false;
  let count = 0;
  void until.finally(() => {
    done = true;
  });
  await Promise.all(
    Array.from({ length: CONCURRENCY }, async () => {
      while (!done) {
        await work();
        count += 1;
      }
    }),
  );
  return count;
}

/** CPU per operation in all, and for each marker (`go tool pprof -top -cum`). */
function costs(binary: string, path: string, count: number): string[] {
  const text = execFileSync('go', ['tool', 'pprof', '-top', '-cum', '-nodecount=100000', binary, path], {
    encoding: 'utf8',
    maxBuffer: 64 * 1024 * 1024,
    stdio: ['ignore', 'pipe', 'ignore'],
  });
  const ms = (value: string, unit: string) => Number(value) * (unit === 's' ? 1000 : 1);
  const total = /Total samples = ([\d.]+)(ms|s)/.exec(text);
  const lines = [
    `in all: ${(ms(total?.[1] ?? '0', total?.[2] ?? 'ms') / count).toFixed(2)} ms CPU per operation`,
  ];
  const rows = text.split('\n').map((line) => /([\d.]+)(ms|s)\s+[\d.]+%\s+(\S+)$/.exec(line.trim()));
  for (const [label, pattern] of MARKERS) {
    const cum = rows
      .filter((row): row is RegExpExecArray => row !== null && pattern.test(row[3] ?? ''))
      .reduce((max, row) => Math.max(max, ms(row[1] ?? '0', row[2] ?? 'ms')), 0);
    if (cum > 0) lines.push(`${label}: ${(cum / count).toFixed(2)} ms`);
  }
  return lines;
}

async function main(): Promise<void> {
  buildOperator();
  const plane = await benchControlPlane({ profiling: true });
  const env = await e2eEnvironment();
  const logs = benchDir('nodeflavor-bench-pprof-');
  const { kubeConfig: operatorKubeConfig } = await prepareOperatorIdentity(env);
  const token = operatorKubeConfig.getCurrentUser()?.token ?? '';
  await applyFlavorClass(env, FLAVOR, { description: 'pprof' });
  const metricsPort = await freePort();
  const controller = startOperator(join(logs, 'operator.log'), ['--no-leader-elect', '--log-level', 'warn'], {
    metricsPort,
    env: imageEnv(),
    built: true,
  });
  const pool = new Pool(new URL(env.server).origin, {
    connections: CONCURRENCY,
    pipelining: 1,
    allowH2: false,
    connect: { ca: env.caPem },
  });
  try {
    await waitReady(metricsPort);
    const binary = execFileSync(
      'bash',
      ['-c', `readlink -f /proc/$(pgrep -f -n 'kube-apiserver.*${logsOf(env.kubeconfigPath)}')/exe`],
      {
        encoding: 'utf8',
      },
    ).trim();
    const RECORDS = '/apis/nodeflavor.io/v1alpha1/flavoredtokens';
    const SECRETS = '/api/v1/namespaces/kube-system/secrets';
    /** The issuance's two writes; `readBack`: and the record read back (ADR 0015). */
    const issuance = (readBack: boolean) => async () => {
      const id = randomString(TOKEN_ALPHABET, 6, randomBytes);
      const body = protocolRecord(id, undefined, true);
      const record = JSON.parse(await post(pool, RECORDS, token, body, 'record')) as {
        metadata: { name: string; uid: string };
      };
      await post(pool, SECRETS, token, baselineSecret(id, record.metadata), 'owned Secret');
      if (!readBack) return;
      const read = {
        method: 'GET',
        path: `${RECORDS}/${record.metadata.name}`,
        contentType: 'application/json',
        expected: 200,
      } as const;
      await send(pool, read, token, undefined, 'read back');
    };
    const arms: [string, () => Promise<void>][] = [
      ['raw Secret creates', async () => void (await post(pool, SECRETS, token, baselineSecret(), 'Secret'))],
      ['issuance (FlavoredToken create, owned Secret create, the record read back)', issuance(true)],
      ['two-writes (the same without the read)', issuance(false)],
    ];
    for (const [arm, work] of arms) {
      const path = join(outDir ?? logs, `${arm.split(' ')[0]}.pprof`);
      const profiled = profile(env, path);
      const count = await loadUntil(profiled, work);
      log(`pprof ${arm}: ${count} in ${seconds} s (${(count / seconds).toFixed(0)}/s); profile ${path}`);
      for (const line of costs(binary, path, count)) log(`pprof   ${line}`);
    }
  } finally {
    await pool.close();
    await controller.stop();
    await kubeFetch(env.kubeConfig, '/api/v1/namespaces/kube-system/secrets', {
      method: 'DELETE',
      query: { labelSelector: `${BASELINE_LABEL}=baseline` },
    }).catch(() => undefined);
    await plane.stop();
  }
}

/** The control plane's directory (its kube-apiserver's command line names files in it). */
function logsOf(kubeconfigPath: string): string {
  return kubeconfigPath.slice(0, kubeconfigPath.lastIndexOf('/'));
}

await main();
