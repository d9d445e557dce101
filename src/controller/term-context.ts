// The context of one leadership term: every write (and Event) the reconcilers make goes through
// the term's fenced KubeConfig, so when the term ends the work in flight is cut off with it.

import type { Logger } from 'pino';
import type { Config } from '../config.ts';
import { fencedKubeConfig } from '../kube/deadlines.ts';
import { EventRecorder } from '../kube/events.ts';
import type { KeyRingWatch } from '../kube/keyring-watch.ts';
import type { KubeConfig } from '../kube/kubeconfig.ts';
import { kubeControllerApi } from './api.ts';
import type { Caches, ControllerContext } from './context.ts';
import type { ControllerMetrics } from './metrics.ts';
import type { WorkQueue } from './queue.ts';
import type { Indexes } from './state.ts';
import type { QueueName } from './wiring.ts';

/**
 * How long a token's record of its Node waits, so that the Node's registration, flavor and first
 * status land in one status write, and the bindings of other joins go first.
 */
const TOKEN_RECORD_COALESCE_MS = 500;

/** Makes each term's context; the parts that outlive terms are given once. */
export function termContexts(shared: {
  kubeConfig: KubeConfig;
  config: Config;
  caches: Caches;
  indexes: Indexes;
  metrics: ControllerMetrics;
  log: Logger;
  keyRing: KeyRingWatch;
  queues: Record<QueueName, WorkQueue>;
}): (term: AbortSignal) => ControllerContext {
  const { kubeConfig, config, caches, indexes, metrics, log, keyRing, queues } = shared;
  const recorder = new EventRecorder(kubeConfig, { component: 'nodeflavor-controller' });
  return (term) => {
    const termKubeConfig = fencedKubeConfig(kubeConfig, term);
    const events = recorder.through(termKubeConfig);
    events.onError = (error) => {
      if (!term.aborted) log.warn({ err: error.message }, 'could not record an Event');
    };
    return {
      kubeConfig: termKubeConfig,
      api: kubeControllerApi(termKubeConfig),
      config,
      caches,
      indexes,
      metrics,
      events,
      log,
      keyRing: () => keyRing.get(),
      freshKeyRing: () => keyRing.refresh(),
      now: () => new Date(),
      enqueueNode: (name) => queues.nodes.add(name),
      requeueNode: (name, afterMs) => queues.nodes.addAfter(name, afterMs),
      enqueueToken: (name) => queues.tokens.add(name),
      recordOnToken: (name) => queues.tokens.addLowPriority(name, TOKEN_RECORD_COALESCE_MS),
      requeueToken: (name, afterMs) => queues.tokens.addAfter(name, Math.min(afterMs, 2 ** 31 - 1)),
      enqueueCsr: (name) => queues.csrs.add(name),
      requeueCsr: (name, afterMs) => queues.csrs.addAfter(name, afterMs),
    };
  };
}
