// Where latency goes, from the API server's own metrics (and optionally a registry of ours): the
// _sum and _count of histogram series, read before and after each measured segment and accumulated
// per configuration, so that means are of measured requests only. By default (P2) every
// apiserver_admission_* and apiserver_validating_admission_policy_* series about Nodes or
// nodeflavor, and the webhook's own review-duration histogram; P3 picks request durations.
import type { KubeConfig } from '@kubernetes/client-node';
import type { Registry } from 'prom-client';
import { kubeFetch } from '../src/kube/fetch.ts';

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
