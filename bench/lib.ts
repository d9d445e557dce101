// Shared by the benchmark scripts: statistics, the results table, results.json, bounded
// concurrency, and the control plane each figure runs against.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { cpus, tmpdir, totalmem } from 'node:os';
import { join } from 'node:path';
import { ControlPlane } from '../test/e2e/cluster/controlplane.ts';
import { ManagedProcess } from '../test/e2e/cluster/process.ts';
import { versions } from '../test/e2e/cluster/versions.ts';
import { finalStageConfig, parseDockerfile } from '../test/e2e/realnode/dockerfile.ts';
import { OPERATOR_NAMESPACE } from '../test/e2e/support/nodeflavor.ts';
import { newestProfile, profileLines, summariseProfile } from './profiling.ts';

export { freePort } from '../test/e2e/cluster/ports.ts';

export type Scale = 'quick' | 'full';

export interface Figure {
  name: string;
  value: number;
  unit: string;
  baseline: number | null;
  baselineName: string | null;
  /** value / baseline (how many times the floor); null without a baseline. */
  ratio: number | null;
  goal: string;
  met: boolean;
  /**
   * The goal this machine was shown not to reach, and why (the issue that measured it): the figure
   * is still measured and printed, its goal no longer counts as met or missed.
   */
  retired?: string;
  notes?: string;
}

export function scaleFromArgs(argv = process.argv): Scale {
  const at = argv.indexOf('--scale');
  const value = at >= 0 ? argv[at + 1] : process.env.SCALE;
  return value === 'quick' ? 'quick' : 'full';
}

export function percentile(samples: number[], p: number): number {
  if (samples.length === 0) return Number.NaN;
  const sorted = [...samples].sort((a, b) => a - b);
  const index = Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1));
  return sorted[index] as number;
}

export function summary(samples: number[]): { p50: number; p95: number; p99: number; n: number } {
  return {
    p50: percentile(samples, 50),
    p95: percentile(samples, 95),
    p99: percentile(samples, 99),
    n: samples.length,
  };
}

export function figure(f: Omit<Figure, 'ratio'>): Figure {
  const ratio = f.baseline ? Number((f.value / f.baseline).toFixed(3)) : null;
  return {
    ...f,
    value: Number(f.value.toFixed(3)),
    baseline: f.baseline === null ? null : Number(f.baseline.toFixed(3)),
    ratio,
  };
}

/** Runs `task` over `items` with at most `limit` in flight; returns results in order. */
export async function mapLimit<T, R>(
  items: T[],
  limit: number,
  task: (item: T, index: number) => Promise<R>,
): Promise<R[]> {
  const results = new Array<R>(items.length);
  let next = 0;
  const worker = async () => {
    while (next < items.length) {
      const index = next++;
      results[index] = await task(items[index] as T, index);
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
  return results;
}

export function printTable(figures: Figure[]): void {
  const rows = figures.map((f) => [
    f.name,
    `${f.value} ${f.unit}`,
    f.baseline === null ? '-' : `${f.baseline} ${f.unit} (${f.baselineName})`,
    f.ratio === null ? '-' : `${f.ratio}x`,
    f.goal,
    f.retired ? 'retired' : f.met ? 'met' : 'MISSED',
  ]);
  const header = ['figure', 'value', 'baseline', 'ratio', 'goal', ''];
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? '').length)));
  const line = (cells: string[]) => cells.map((c, i) => c.padEnd(widths[i] ?? 0)).join('  ');
  console.log(line(header));
  console.log(widths.map((w) => '-'.repeat(w)).join('  '));
  for (const row of rows) console.log(line(row));
  const judged = figures.filter((f) => !f.retired && f.goal !== '-' && f.goal !== '–');
  const missed = judged.filter((f) => !f.met).length;
  console.log(
    `\n${judged.length - missed} of ${judged.length} goals met, ${missed} missed; ${figures.filter((f) => f.retired).length} retired (shown out of this machine's reach, not counted)`,
  );
}

export function machine(): Record<string, string | number> {
  return {
    cpus: cpus().length,
    cpuModel: cpus()[0]?.model ?? 'unknown',
    memoryGiB: Math.round(totalmem() / 2 ** 30),
    node: process.version,
    kubernetes: versions.KUBERNETES_VERSION ?? '',
    etcd: versions.ETCD_VERSION ?? '',
  };
}

export function writeResults(
  figures: Figure[],
  scale: Scale,
  path = join(import.meta.dirname, 'results.json'),
): void {
  writeFileSync(
    path,
    `${JSON.stringify({ date: new Date().toISOString(), scale, machine: machine(), figures }, null, 2)}\n`,
  );
}

/** A control plane for one benchmark script (or the one E2E_KUBECONFIG names). */
export async function benchControlPlane(
  options: { profiling?: boolean } = {},
): Promise<{ kubeconfigPath: string; stop: () => Promise<void> }> {
  if (process.env.E2E_KUBECONFIG) return { kubeconfigPath: process.env.E2E_KUBECONFIG, stop: async () => {} };
  const plane = await ControlPlane.start({
    log: (line) => console.error(`[control-plane] ${line}`),
    ...(options.profiling ? { profiling: true } : {}),
  });
  process.env.E2E_KUBECONFIG = plane.kubeconfigPath;
  return { kubeconfigPath: plane.kubeconfigPath, stop: () => plane.stop() };
}

/** The chart's default `nodeOptions` (deploy/helm/nodeflavor/values.yaml), split into flags. */
export function chartNodeOptions(): string[] {
  // To compare settings: BENCH_NODE_OPTIONS='--max-old-space-size=256 ...' make bench
  if (process.env.BENCH_NODE_OPTIONS !== undefined)
    return process.env.BENCH_NODE_OPTIONS.split(/\s+/).filter(Boolean);
  const values = readFileSync(
    join(import.meta.dirname, '..', 'deploy', 'helm', 'nodeflavor', 'values.yaml'),
    'utf8',
  );
  const match = /^nodeOptions:\s*"([^"]*)"/m.exec(values);
  if (!match) throw new Error('values.yaml has no nodeOptions');
  return (match[1] ?? '').split(/\s+/).filter(Boolean);
}

/**
 * The environment the image sets for the operator besides NODE_ENV (the Dockerfile's final stage,
 * read as the real-node tests read it: MALLOC_ARENA_MAX), so benchmarks run it as the image does.
 */
export function imageEnv(): Record<string, string> {
  const dockerfile = readFileSync(join(import.meta.dirname, '..', 'Dockerfile'), 'utf8');
  const pairs = finalStageConfig(parseDockerfile(dockerfile)).env.map((pair) => pair.split(/=(.*)/s, 2));
  return Object.fromEntries(pairs.filter(([name]) => name !== 'NODE_ENV'));
}

export const cpuProfile = (): boolean =>
  process.argv.includes('--cpu-prof') || process.env.BENCH_CPU_PROF === '1';

/** The chart's Node.js options, plus --cpu-prof into `profileDir` when the bench was asked for profiles. */
export function nodeArgsFor(profileDir: string): string[] {
  return [...chartNodeOptions(), ...(cpuProfile() ? ['--cpu-prof', '--cpu-prof-dir', profileDir] : [])];
}

/**
 * A temp dir for a benchmark's logs, removed when the process exits; kept (and named) only when
 * profiling, so the raw profiles can be opened after the run.
 */
export function benchDir(prefix: string): string {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  process.once('exit', () => {
    if (cpuProfile()) log(`profiles and logs kept in ${dir}`);
    else rmSync(dir, { recursive: true, force: true });
  });
  return dir;
}

/** Logs the summary of the newest profile in `dir` (when profiling). */
export function logProfile(label: string, dir: string): void {
  const file = cpuProfile() ? newestProfile(dir) : undefined;
  if (!file) return;
  for (const line of profileLines(summariseProfile(file, 25))) log(`${label} ${line}`);
}

/**
 * Compiles the operator to dist/ (as the image runs it: no tsx, no on-the-fly transpiling), once
 * per `make bench` (bench/run.ts builds and tells its children) or per standalone script.
 */
export function buildOperator(): void {
  if (process.env.NODEFLAVOR_BENCH_BUILT === '1') return;
  const root = join(import.meta.dirname, '..');
  log('compiling the operator to dist/ (npm run build)');
  execFileSync(
    process.execPath,
    [join(root, 'node_modules', 'typescript', 'bin', 'tsc'), '-p', 'tsconfig.build.json'],
    {
      cwd: root,
      stdio: 'inherit',
    },
  );
  process.env.NODEFLAVOR_BENCH_BUILT = '1';
}

export function log(line: string): void {
  console.error(`[bench ${new Date().toISOString().slice(11, 19)}] ${line}`);
}

/** The operator's API requests so far, by verb and code, as one log line. */
export async function requestCounts(port: number): Promise<string> {
  return describeRequests(await requestSeries(port));
}

/** An operator's API requests so far by series, keyed `METHOD code resource`. */
export async function requestSeries(port: number): Promise<Map<string, number>> {
  const text = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
  const series = new Map<string, number>();
  // An operator before the resource label (to compare with an older version) counts by verb and code.
  for (const [, method, code, resource, n] of text.matchAll(
    /^nodeflavor_kube_api_requests_total\{method="(\w+)",code="(\d+)"(?:,resource="([^"]+)")?\} (\d+)/gm,
  ))
    series.set(resource ? `${method} ${code} ${resource}` : `${method} ${code}`, Number(n));
  return series;
}

/** What was requested between two `requestSeries` readings, divided by `per` (e.g. per join). */
export function requestsBetween(
  before: Map<string, number>,
  after: Map<string, number>,
  per = 1,
): Map<string, number> {
  const delta = new Map<string, number>();
  for (const [key, n] of after) {
    const d = (n - (before.get(key) ?? 0)) / per;
    if (d > 0) delta.set(key, d);
  }
  return delta;
}

/** `PUT 200 nodes: 3, …`, largest first, numbers to two decimals at most. */
export function describeRequests(series: Map<string, number>): string {
  return (
    [...series]
      .sort((a, b) => b[1] - a[1])
      .map(([key, n]) => `${key}: ${Number(n.toFixed(2))}`)
      .join(', ') || 'none'
  );
}

/** The sum of every labelled series of `metric` on an operator's /metrics. */
export async function metricSum(port: number, metric: string): Promise<number> {
  const text = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
  const prefix = `${metric}{`;
  return text
    .split('\n')
    .filter((line) => line.startsWith(prefix))
    .reduce((sum, line) => sum + Number(line.slice(line.lastIndexOf(' ') + 1)), 0);
}

/** Waits until an operator's /readyz answers 200 (its caches are synced). */
export async function waitReady(metricsPort: number, timeoutMs = 120_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    const ok = await fetch(`http://127.0.0.1:${metricsPort}/readyz`).then(
      (r) => r.ok,
      () => false,
    );
    if (ok) return;
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
  throw new Error(`operator on port ${metricsPort} not ready within ${timeoutMs / 1000} s`);
}

/**
 * The `if (import.meta.main)` body of every figure script: its own control plane, the figures
 * printed as a table, and written as JSON when `--json PATH` is given (bench/run.ts collects them).
 */
export async function runStandalone(run: (scale: Scale) => Promise<Figure[]>): Promise<void> {
  buildOperator();
  const plane = await benchControlPlane();
  try {
    const figures = await run(scaleFromArgs());
    printTable(figures);
    const at = process.argv.indexOf('--json');
    const path = at >= 0 ? process.argv[at + 1] : undefined;
    if (path) writeFileSync(path, JSON.stringify(figures));
  } finally {
    await plane.stop();
  }
}

/**
 * The token issuer of bench/p3-issuer-server.ts in a process of its own, as the chart's
 * ServiceAccount (`kubeconfigPath`), logging into `logs` as `<tag>.log`/`.out`. It writes its
 * URL, CA and pid to `readyFile` once it serves (wait with waitForFile).
 */
export function startBenchIssuer(options: {
  name: string;
  logs: string;
  tag: string;
  kubeconfigPath: string;
  apiServerEndpoint: string;
  /** Node.js flags before the script (the chart's heap settings, say). */
  nodeArgs?: string[];
  /** The server's own flags after the common ones (--settings, --profile-dir, …). */
  args?: string[];
}): { process: ManagedProcess; readyFile: string } {
  const readyFile = join(options.logs, `${options.tag}.ready.json`);
  const issuer = new ManagedProcess(
    options.name,
    process.execPath,
    [
      ...(options.nodeArgs ?? []),
      '--import',
      'tsx',
      join(import.meta.dirname, 'p3-issuer-server.ts'),
      '--kubeconfig',
      options.kubeconfigPath,
      '--api-server-endpoint',
      options.apiServerEndpoint,
      '--namespace',
      OPERATOR_NAMESPACE,
      '--ready-file',
      readyFile,
      '--log-file',
      join(options.logs, `${options.tag}.log`),
      ...(options.args ?? []),
    ],
    join(options.logs, `${options.tag}.out`),
  );
  return { process: issuer, readyFile };
}
