// Reading a V8 .cpuprofile (node --cpu-prof) for the benchmark logs: where the server process
// spent its CPU, as the top functions by self time and the share per place (our src/, each npm
// package, Node's internals, the garbage collector). Used by P2 (webhook server) and P3 (issuer).
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

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

if (import.meta.main) {
  const file = process.argv[2];
  if (!file) throw new Error('usage: node --import tsx bench/p2-cpu-profile.ts FILE.cpuprofile');
  for (const line of profileLines(summariseProfile(file, Number(process.argv[3] ?? 20)))) console.log(line);
}
