// What the benchmarks measure besides their own figures, shared by P2 (admission), P3 (issuance)
// and the discovery cliff: where a server process spent its CPU (a V8 .cpuprofile, and a profile
// of just the measured window taken on a signal), which process of the control plane burned CPU
// in a phase, and what the API server's own metrics say each measured segment cost.
//   node --import tsx bench/profiling.ts FILE.cpuprofile [TOP]   (summarise a profile)
import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { Session } from 'node:inspector/promises';
import { dirname, join } from 'node:path';
import type { KubeConfig } from '@kubernetes/client-node';
import type { Registry } from 'prom-client';
import { kubeFetch } from '../src/runtime/fetch.ts';

// ---------------------------------------------------------------------------------------------
// Reading a V8 .cpuprofile (node --cpu-prof) for the benchmark logs: where the server process
// spent its CPU, as the top functions by self time and the share per place (our src/, each npm
// package, Node's internals, the garbage collector). Used by P2 (webhook server) and P3 (issuer).

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  hitCount?: number;
}

interface CpuProfile {
  nodes: ProfileNode[];
  startTime: number;
  endTime: number;
  samples?: number[];
  timeDeltas?: number[];
}

export interface ProfileSummary {
  file: string;
  /** Sampled time that was not idle, in ms. */
  busyMs: number;
  totalMs: number;
  topFunctions: { name: string; where: string; selfMs: number; share: number }[];
  byPlace: { place: string; selfMs: number; share: number }[];
}

/** src/…, an npm package name, node:internal, (garbage collector), (program), or the script. */
function placeOf(url: string, functionName: string): string {
  if (url === '') return functionName.startsWith('(') ? functionName : '(native)';
  const pkg = /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(url);
  if (pkg?.[1]) return pkg[1];
  if (url.startsWith('node:')) return 'node:internal';
  const src = /\/(src\/[^/]+)\//.exec(url);
  if (src?.[1]) return src[1];
  const tail = url.split('/').slice(-2).join('/');
  return tail;
}

function shortWhere(url: string, line: number): string {
  if (url === '') return '';
  const pkg = /node_modules\/(.*)$/.exec(url);
  const path = pkg?.[1] ?? url.replace(/^file:\/\/.*?\/(src|bench|test)\//, '$1/');
  return `${path}:${line + 1}`;
}

export function summariseProfile(file: string, top = 15): ProfileSummary {
  const profile = JSON.parse(readFileSync(file, 'utf8')) as CpuProfile;
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  const selfUs = new Map<number, number>();
  if (profile.samples && profile.timeDeltas) {
    // The delta before sample i is time spent in the previous sample's node.
    for (let i = 1; i < profile.samples.length; i++) {
      const id = profile.samples[i - 1] as number;
      selfUs.set(id, (selfUs.get(id) ?? 0) + (profile.timeDeltas[i] ?? 0));
    }
  } else {
    const total = profile.endTime - profile.startTime;
    const hits = profile.nodes.reduce((sum, n) => sum + (n.hitCount ?? 0), 0) || 1;
    for (const n of profile.nodes) selfUs.set(n.id, ((n.hitCount ?? 0) / hits) * total);
  }
  const functions = new Map<string, { name: string; where: string; us: number }>();
  const places = new Map<string, number>();
  let idleUs = 0;
  let totalUs = 0;
  for (const [id, us] of selfUs) {
    const node = byId.get(id);
    if (!node) continue;
    totalUs += us;
    const { functionName, url, lineNumber } = node.callFrame;
    if (functionName === '(idle)') {
      idleUs += us;
      continue;
    }
    const name = functionName || '(anonymous)';
    const key = `${name}@${url}:${lineNumber}`;
    const entry = functions.get(key) ?? { name, where: shortWhere(url, lineNumber), us: 0 };
    entry.us += us;
    functions.set(key, entry);
    const place = placeOf(url, name);
    places.set(place, (places.get(place) ?? 0) + us);
  }
  const busyUs = totalUs - idleUs || 1;
  return {
    file,
    busyMs: busyUs / 1000,
    totalMs: totalUs / 1000,
    topFunctions: [...functions.values()]
      .sort((a, b) => b.us - a.us)
      .slice(0, top)
      .map((f) => ({ name: f.name, where: f.where, selfMs: f.us / 1000, share: f.us / busyUs })),
    byPlace: [...places]
      .sort((a, b) => b[1] - a[1])
      .slice(0, top)
      .map(([place, us]) => ({ place, selfMs: us / 1000, share: us / busyUs })),
  };
}

/** The newest .cpuprofile in `dir`, or undefined. */
export function newestProfile(dir: string): string | undefined {
  const files = readdirSync(dir)
    .filter((f) => f.endsWith('.cpuprofile'))
    .sort();
  const last = files.at(-1);
  return last === undefined ? undefined : join(dir, last);
}

/** The summary as log lines. */
export function profileLines(summary: ProfileSummary): string[] {
  const pct = (share: number) => `${(share * 100).toFixed(1).padStart(5)}%`;
  return [
    `profile ${summary.file}: ${summary.busyMs.toFixed(0)} ms busy of ${summary.totalMs.toFixed(0)} ms sampled`,
    'self time by place:',
    ...summary.byPlace.map((p) => `  ${pct(p.share)}  ${p.place}`),
    'top functions by self time:',
    ...summary.topFunctions.map((f) => `  ${pct(f.share)}  ${f.name}  ${f.where}`),
  ];
}

// ---------------------------------------------------------------------------------------------
// A CPU profile of just the measured window of a server process (not its start-up, which under
// tsx is mostly compiling TypeScript): SIGUSR2 starts the V8 sampling profiler, the next SIGUSR2
// stops it and writes <dir>/<name>-<n>.cpuprofile (the format `node --cpu-prof` writes).
// Used by the P2 webhook server and the P3 issuer.

export interface SignalProfiler {
  /** Stops a running profile and writes it (call before exiting). */
  flush(): Promise<void>;
}

export function profileOnSignal(dir: string, name: string): SignalProfiler {
  const session = new Session();
  session.connect();
  let running = false;
  let count = 0;
  let chain: Promise<void> = session.post('Profiler.enable').then(() => undefined);

  const stop = async () => {
    if (!running) return;
    running = false;
    const { profile } = await session.post('Profiler.stop');
    count += 1;
    writeFileSync(join(dir, `${name}-${count}.cpuprofile`), JSON.stringify(profile));
  };
  const toggle = async () => {
    if (running) {
      await stop();
      return;
    }
    await session.post('Profiler.start');
    running = true;
  };
  process.on('SIGUSR2', () => {
    chain = chain.then(toggle, toggle);
  });
  return {
    flush: async () => {
      chain = chain.then(stop, stop);
      await chain;
    },
  };
}

/** The pid a profiled child wrote to its ready file, signalled to start or stop its profile. */
export function toggleProfile(pid: number | undefined): void {
  if (pid !== undefined) process.kill(pid, 'SIGUSR2');
}

// ---------------------------------------------------------------------------------------------
// Which process burns the CPU of a benchmark phase: user+system CPU time (/proc/<pid>/stat) of the
// control plane's components (found by their command line naming the plane's directory, so that
// another control plane on the machine is not counted) and of named processes of ours, read before
// and after each phase and accumulated per phase. Linux only; elsewhere it reports nothing.

const COMPONENTS: Record<string, string> = {
  'kube-apiserver': 'kube-apiserver',
  etcd: 'etcd',
  // comm is cut at 15 characters
  'kube-controller': 'kube-controller-manager',
};
const TICKS_PER_SECOND = 100;

function read(path: string): string | undefined {
  try {
    return readFileSync(path, 'utf8');
  } catch {
    return undefined;
  }
}

/** The control plane's etcd, kube-apiserver and kube-controller-manager pids, by name. */
export function controlPlanePids(kubeconfigPath: string): Record<string, number> {
  const dir = dirname(kubeconfigPath);
  const found: Record<string, number> = {};
  let entries: string[] = [];
  try {
    entries = readdirSync('/proc').filter((e) => /^\d+$/.test(e));
  } catch {
    return found;
  }
  for (const entry of entries) {
    const name = COMPONENTS[(read(`/proc/${entry}/comm`) ?? '').trim()];
    if (!name) continue;
    const cmdline = (read(`/proc/${entry}/cmdline`) ?? '').replaceAll('\0', ' ');
    if (cmdline.includes(`${dir}/`)) found[name] = Number(entry);
  }
  return found;
}

/** A process's CPU time so far (user + system), from /proc; undefined once it is gone. */
export function cpuSeconds(pid: number): number | undefined {
  const stat = read(`/proc/${pid}/stat`);
  if (!stat) return undefined;
  // Fields after "(comm)": state is field 3, utime 14 and stime 15.
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return (Number(fields[11]) + Number(fields[12])) / TICKS_PER_SECOND;
}

export class ProcessCpu {
  private readonly pids: Record<string, number>;
  private readonly totals = new Map<string, Map<string, number>>();
  private readonly units = new Map<string, number>();

  constructor(pids: Record<string, number>) {
    this.pids = pids;
  }

  snapshot(): Map<string, number> {
    const snapshot = new Map<string, number>();
    for (const [name, pid] of Object.entries(this.pids)) {
      const seconds = cpuSeconds(pid);
      if (seconds !== undefined) snapshot.set(name, seconds);
    }
    return snapshot;
  }

  /** Adds the CPU spent between the snapshots to `phase`, which did `units` operations. */
  add(phase: string, before: Map<string, number>, after: Map<string, number>, units: number): void {
    const totals = this.totals.get(phase) ?? new Map<string, number>();
    for (const [name, seconds] of after) {
      totals.set(name, (totals.get(name) ?? 0) + seconds - (before.get(name) ?? seconds));
    }
    this.totals.set(phase, totals);
    this.units.set(phase, (this.units.get(phase) ?? 0) + units);
  }

  /** One process's CPU seconds per operation in `phase` (NaN when it was not measured). */
  perUnitOf(phase: string, name: string): number {
    const seconds = this.totals.get(phase)?.get(name);
    const units = this.units.get(phase) ?? 0;
    return seconds === undefined || units === 0 ? Number.NaN : seconds / units;
  }

  /** "kube-apiserver 4.1 ms, issuer 2.0 ms, ..." of CPU per operation, largest first. */
  perUnit(phase: string): string {
    const totals = this.totals.get(phase);
    const units = this.units.get(phase) ?? 0;
    if (!totals || units === 0) return 'n/a';
    return [...totals]
      .sort((a, b) => b[1] - a[1])
      .map(([name, seconds]) => `${name} ${((seconds * 1000) / units).toFixed(2)} ms`)
      .join(', ');
  }
}

// ---------------------------------------------------------------------------------------------
// Where latency goes, from the API server's own metrics (and optionally a registry of ours): the
// _sum and _count of histogram series, read before and after each measured segment and accumulated
// per configuration, so that means are of measured requests only. By default (P2) every
// apiserver_admission_* and apiserver_validating_admission_policy_* series about Nodes or
// nodeflavor, and the webhook's own review-duration histogram; P3 picks request durations.

type Snapshot = Map<string, number>;

const ADMISSION_SERIES =
  /^(apiserver_(?:admission|validating_admission_policy)\w*|nodeflavor_admission_review_duration_seconds)_(?:sum|count)(?:\{|\s)/;
const ABOUT_NODES = /nodes|nodeflavor/;

function parse(text: string, into: Snapshot, series: RegExp, about: RegExp): void {
  for (const line of text.split('\n')) {
    if (!series.test(line) || !about.test(line)) continue;
    const space = line.lastIndexOf(' ');
    into.set(line.slice(0, space), Number(line.slice(space + 1)));
  }
}

export class MetricDeltas {
  private readonly totals = new Map<string, Snapshot>();
  private readonly kubeConfig: KubeConfig;
  private readonly registry: Registry | undefined;
  private readonly series: RegExp;
  private readonly about: RegExp;

  constructor(
    kubeConfig: KubeConfig,
    registry?: Registry,
    filter: { series: RegExp; about: RegExp } = { series: ADMISSION_SERIES, about: ABOUT_NODES },
  ) {
    this.kubeConfig = kubeConfig;
    this.registry = registry;
    this.series = filter.series;
    this.about = filter.about;
  }

  async snapshot(): Promise<Snapshot> {
    const snapshot: Snapshot = new Map();
    const text = await (await kubeFetch(this.kubeConfig, '/metrics')).text();
    parse(text, snapshot, this.series, this.about);
    if (this.registry) parse(await this.registry.metrics(), snapshot, this.series, this.about);
    return snapshot;
  }

  /** Adds after − before to the totals of `configuration`. */
  add(configuration: string, before: Snapshot, after: Snapshot): void {
    const totals = this.totals.get(configuration) ?? new Map<string, number>();
    for (const [key, value] of after) {
      totals.set(key, (totals.get(key) ?? 0) + value - (before.get(key) ?? 0));
    }
    this.totals.set(configuration, totals);
  }

  /** Mean (ms) and count of every series that saw observations under `configuration`. */
  means(configuration: string): { series: string; meanMs: number; count: number }[] {
    const totals = this.totals.get(configuration) ?? new Map<string, number>();
    const rows: { series: string; meanMs: number; count: number }[] = [];
    for (const [key, sum] of totals) {
      if (!/_sum(\{|$)/.test(key)) continue;
      const count = totals.get(key.replace(/_sum(\{|$)/, '_count$1')) ?? 0;
      if (count <= 0) continue;
      rows.push({ series: key.replace(/_sum(\{|$)/, '$1'), meanMs: (sum / count) * 1000, count });
    }
    return rows.sort((a, b) => a.series.localeCompare(b.series));
  }

  /** The mean of the first series matching `pattern`, or undefined. */
  mean(configuration: string, pattern: RegExp): number | undefined {
    return this.means(configuration).find((row) => pattern.test(row.series))?.meanMs;
  }
}

if (import.meta.main) {
  const file = process.argv[2];
  if (!file) throw new Error('usage: node --import tsx bench/profiling.ts FILE.cpuprofile');
  for (const line of profileLines(summariseProfile(file, Number(process.argv[3] ?? 20)))) console.log(line);
}

// ---------------------------------------------------------------------------------------------
// What a process's JS heap holds, from a V8 heap snapshot (node --heapsnapshot-signal): the
// self size of every object, summed by kind (strings, arrays, Maps' tables...) and by
// constructor name. Self sizes, not retained sizes: enough to see which structures the bytes
// are in. Used by P4 (BENCH_HEAP_SNAPSHOT=1).

interface HeapSnapshot {
  snapshot: { meta: { node_fields: string[]; node_types: [string[], ...unknown[]] } };
  nodes: number[];
  strings: string[];
}

export interface HeapSummary {
  file: string;
  totalBytes: number;
  byType: { type: string; bytes: number; count: number }[];
  byName: { name: string; bytes: number; count: number }[];
}

export function summariseHeapSnapshot(file: string, top = 25): HeapSummary {
  const snapshot = JSON.parse(readFileSync(file, 'utf8')) as HeapSnapshot;
  const fields = snapshot.snapshot.meta.node_fields;
  const types = snapshot.snapshot.meta.node_types[0];
  const [typeAt, nameAt, sizeAt] = ['type', 'name', 'self_size'].map((f) => fields.indexOf(f)) as [
    number,
    number,
    number,
  ];
  const byType = new Map<string, { bytes: number; count: number }>();
  const byName = new Map<string, { bytes: number; count: number }>();
  const add = (map: typeof byType, key: string, bytes: number) => {
    const entry = map.get(key) ?? { bytes: 0, count: 0 };
    entry.bytes += bytes;
    entry.count += 1;
    map.set(key, entry);
  };
  let totalBytes = 0;
  for (let i = 0; i < snapshot.nodes.length; i += fields.length) {
    const type = types[snapshot.nodes[i + typeAt] as number] ?? '?';
    const bytes = snapshot.nodes[i + sizeAt] as number;
    totalBytes += bytes;
    add(byType, type, bytes);
    // Strings are named by their content: one bucket for all of them.
    const name =
      type === 'string' || type === 'concatenated string' || type === 'sliced string'
        ? '(strings)'
        : `${type}:${(snapshot.strings[snapshot.nodes[i + nameAt] as number] ?? '').slice(0, 60)}`;
    add(byName, name, bytes);
  }
  const sorted = (map: typeof byType) => [...map].sort((a, b) => b[1].bytes - a[1].bytes).slice(0, top);
  return {
    file,
    totalBytes,
    byType: sorted(byType).map(([type, e]) => ({ type, ...e })),
    byName: sorted(byName).map(([name, e]) => ({ name, ...e })),
  };
}

export function heapSummaryLines(summary: HeapSummary): string[] {
  const mib = (bytes: number) => `${(bytes / 2 ** 20).toFixed(2).padStart(7)} MiB`;
  return [
    `heap snapshot ${summary.file}: ${mib(summary.totalBytes)} in objects`,
    'self size by kind:',
    ...summary.byType.map((t) => `  ${mib(t.bytes)}  ${String(t.count).padStart(8)}  ${t.type}`),
    'self size by constructor:',
    ...summary.byName.map((n) => `  ${mib(n.bytes)}  ${String(n.count).padStart(8)}  ${n.name}`),
  ];
}
