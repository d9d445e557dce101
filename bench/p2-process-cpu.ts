// Which process burns the CPU of a benchmark phase: user+system CPU time (/proc/<pid>/stat) of the
// control plane's components (found by their command line naming the plane's directory, so that
// another control plane on the machine is not counted) and of named processes of ours, read before
// and after each phase and accumulated per phase. Linux only; elsewhere it reports nothing.
import { readdirSync, readFileSync } from 'node:fs';
import { dirname } from 'node:path';

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

function cpuSeconds(pid: number): number | undefined {
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
