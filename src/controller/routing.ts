// The wiring table (wiring.ts) made real: one work queue per reconciler, each cache's events
// routed through the table (indexes first, then every watching reconciler's keys into its
// queue), and the resync that enqueues every reconciler's keys.

import type { Logger } from 'pino';
import type { EventHandler } from '../runtime/listwatch.ts';
import { WorkQueue } from '../runtime/queue.ts';
import type { CacheName, CacheObject, ControllerContext } from './context.ts';
import type { Reads } from './event-keys.ts';
import type { ControllerMetrics } from './metrics.ts';
import { INDEXERS, type QueueName, type ReconcilerWiring } from './wiring.ts';

/** What routing needs of a queue (a WorkQueue; a recorder in unit tests). */
export type Enqueue = Pick<WorkQueue, 'add' | 'addAfter'>;

/** One WorkQueue per reconciler, counting its reconciles and logging its retries. */
export function reconcilerQueues(options: {
  reconcilers: readonly ReconcilerWiring[];
  /** The current term's context (read at each reconcile). */
  context: () => ControllerContext;
  /** Whether the key ring is usable (the gate of reconcilers that need it). */
  keyRingAvailable: () => boolean;
  workers: number;
  metrics: ControllerMetrics;
  log: Logger;
}): Record<QueueName, WorkQueue> {
  const { metrics, log } = options;
  const queues = {} as Record<QueueName, WorkQueue>;
  for (const wiring of options.reconcilers) {
    const { queue: name, retryLog } = wiring;
    const counted = async (key: string): Promise<void> => {
      try {
        const requeue = await wiring.reconcile(options.context(), key);
        metrics.reconciles.inc({ queue: name, result: 'ok' });
        // Its own key again, later: the one enqueue a reconciler makes itself.
        if (requeue !== undefined) queues[name].addAfter(key, Math.min(requeue, 2 ** 31 - 1));
      } catch (error) {
        metrics.reconciles.inc({ queue: name, result: 'error' });
        throw error;
      }
    };
    queues[name] = new WorkQueue({
      name,
      concurrency: wiring.workers?.(options.workers) ?? options.workers,
      // Fail closed without a usable key ring: nothing is judged (nodes keep what they have); the
      // key is dropped, and everything is enqueued again when the ring is back (manager.ts), so
      // nothing waits out a retry backoff.
      reconcile: wiring.needsKeyRing
        ? (key) => (options.keyRingAvailable() ? counted(key) : Promise.resolve())
        : counted,
      onError: (key, error, attempt) =>
        log.warn({ [retryLog.field]: key, attempt, err: error.message }, retryLog.message),
      onDepthChange: (depth) => metrics.queueDepth.set({ queue: name }, depth),
      onActiveChange: (active) => metrics.queueActive.set({ queue: name }, active),
      onRetry: () => metrics.retries.inc({ queue: name }),
    });
  }
  return queues;
}

/** The handler of one cache's events: its indexes first, then each watching reconciler's keys. */
export function routeEvents<C extends CacheName>(
  cache: C,
  reconcilers: readonly ReconcilerWiring[],
  queues: Record<QueueName, Enqueue>,
  read: Reads,
): EventHandler<CacheObject<C>> {
  const indexer = INDEXERS[cache];
  const routes = reconcilers.flatMap((wiring) => {
    const watch = wiring.watches[cache];
    return watch ? [{ queue: queues[wiring.queue], watch }] : [];
  });
  return (type, object, previous) => {
    const event = { type, object, previous };
    indexer?.(event, read.indexes);
    for (const { queue, watch } of routes) {
      for (const key of watch.keys(event, read)) {
        if (watch.afterMs === undefined) queue.add(key);
        else queue.addAfter(key, watch.afterMs);
      }
    }
  };
}

/** Every reconciler's resync keys, into its queue. */
export function enqueueAll(
  reconcilers: readonly ReconcilerWiring[],
  queues: Record<QueueName, Enqueue>,
  read: Reads,
): void {
  for (const wiring of reconcilers) for (const key of wiring.resync(read)) queues[wiring.queue].add(key);
}
