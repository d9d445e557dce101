// The FlavorClass status reconciler, the one writer of FlavorClass status: how many verified
// Nodes carry each flavor (kept as an index fed by the Node cache, so a count costs nothing per
// reconcile) and whether the spec it observed can be applied. It runs on the leader only, with
// its own queue, and writes through the term's fenced KubeConfig like every other leader write;
// a status equal to the stored one is not written. Node churn is coalesced: a class's count is
// written at most about once per COALESCE_MS while nodes of it join or leave.

import type { Logger } from 'pino';
import { carriedFlavor, classStatusChanged, desiredClassStatus } from '../flavor/class-status.ts';
import type { FlavorClassStatus } from '../flavor/resources.ts';
import { writeFlavorClassStatus } from '../kube/flavor-class-writes.ts';
import type { FlavorClassCache, StoredFlavorClass } from '../kube/flavor-classes.ts';
import type { KubeConfig } from '../kube/kubeconfig.ts';
import type { WatchEventType } from '../kube/listwatch.ts';
import type { TrimmedNode } from '../kube/node-writes.ts';
import type { ControllerMetrics } from './metrics.ts';
import { WorkQueue } from './queue.ts';

const QUEUE = 'flavorclasses';
const COALESCE_MS = 1_000;

type ClassWithStatus = StoredFlavorClass & { status?: FlavorClassStatus };

interface ClassStatusOptions {
  classes: FlavorClassCache;
  metrics: ControllerMetrics;
  log: Logger;
  workers: number;
  now: () => Date;
}

export class FlavorClassStatusReconciler {
  /** Node name → the flavor it carries (only nodes that carry one). */
  private readonly flavorOf = new Map<string, string>();
  private readonly counts = new Map<string, number>();
  private readonly queue: WorkQueue;
  private kubeConfig: KubeConfig | undefined;

  private readonly options: ClassStatusOptions;

  constructor(options: ClassStatusOptions) {
    this.options = options;
    const { metrics, log } = options;
    this.queue = new WorkQueue({
      name: QUEUE,
      concurrency: Math.max(1, Math.min(2, options.workers)),
      reconcile: async (name) => {
        try {
          await this.reconcile(name);
          metrics.reconciles.inc({ queue: QUEUE, result: 'ok' });
        } catch (error) {
          metrics.reconciles.inc({ queue: QUEUE, result: 'error' });
          throw error;
        }
      },
      onError: (name, error, attempt) =>
        log.warn(
          { flavorClass: name, attempt, err: error.message },
          'FlavorClass status write failed; retrying',
        ),
      onDepthChange: (depth) => metrics.queueDepth.set({ queue: QUEUE }, depth),
      onRetry: () => metrics.retries.inc({ queue: QUEUE }),
    });
  }

  /** Verified nodes carrying the flavor, as the Node cache shows them now. */
  nodeCount(flavorClass: string): number {
    return this.counts.get(flavorClass) ?? 0;
  }

  /** A Node event (every replica keeps the index, so a new leader starts with it). */
  onNode(type: WatchEventType, node: TrimmedNode): void {
    const name = node.metadata.name;
    const before = this.flavorOf.get(name);
    const after =
      type === 'DELETED'
        ? undefined
        : carriedFlavor({ annotations: node.metadata.annotations, taints: node.spec.taints });
    if (before === after) return;
    if (before !== undefined) {
      this.counts.set(before, (this.counts.get(before) ?? 1) - 1);
      if (this.counts.get(before) === 0) this.counts.delete(before);
      this.queue.addAfter(before, COALESCE_MS);
    }
    if (after === undefined) this.flavorOf.delete(name);
    else {
      this.flavorOf.set(name, after);
      this.counts.set(after, (this.counts.get(after) ?? 0) + 1);
      this.queue.addAfter(after, COALESCE_MS);
    }
  }

  onClass(type: WatchEventType, flavorClass: StoredFlavorClass): void {
    if (type !== 'DELETED') this.queue.add(flavorClass.metadata.name);
  }

  enqueueAll(): void {
    for (const name of this.options.classes.keys()) this.queue.add(name);
  }

  /** Starts a term: writes go through its fenced KubeConfig. */
  start(kubeConfig: KubeConfig): void {
    this.kubeConfig = kubeConfig;
    this.queue.start();
  }

  stop(): void {
    this.queue.stop();
    this.kubeConfig = undefined;
  }

  whenIdle(): Promise<void> {
    return this.queue.whenIdle();
  }

  private async reconcile(name: string): Promise<void> {
    const stored = this.options.classes.get(name) as ClassWithStatus | undefined;
    if (!stored || !this.kubeConfig) return;
    const desired = desiredClassStatus({
      generation: stored.metadata.generation,
      spec: stored.spec,
      nodes: this.nodeCount(name),
      current: stored.status,
      now: this.options.now(),
    });
    if (!classStatusChanged(stored.status, desired)) return;
    // Served from the cache until the watch brings it: a reconcile in between starts from it.
    this.options.classes.assume(await writeFlavorClassStatus(this.kubeConfig, stored, desired));
  }
}
