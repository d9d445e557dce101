// The context of one leadership term: every write (and Event) the reconcilers make goes through
// the term's fenced KubeConfig, so when the term ends the work in flight is cut off with it.

import type { Logger } from 'pino';
import type { Config } from '../config.ts';
import type { KeyRingWatch } from '../kube/keyring-watch.ts';
import { EventRecorder, termWriters } from '../runtime/events.ts';
import type { KubeConfig } from '../runtime/kubeconfig.ts';
import { kubeControllerApi } from './api.ts';
import type { Caches, ControllerContext } from './context.ts';
import type { Indexes } from './indexes.ts';
import type { ControllerMetrics } from './metrics.ts';

/** Makes each term's context; the parts that outlive terms are given once. */
export function termContexts(shared: {
  kubeConfig: KubeConfig;
  config: Config;
  caches: Caches;
  indexes: Indexes;
  metrics: ControllerMetrics;
  log: Logger;
  keyRing: KeyRingWatch;
}): (term: AbortSignal) => ControllerContext {
  const { kubeConfig, config, caches, indexes, metrics, log, keyRing } = shared;
  const recorder = new EventRecorder(kubeConfig, { component: 'nodeflavor-controller' });
  return (term) => {
    const { kubeConfig: termKubeConfig, events } = termWriters(kubeConfig, recorder, term, log);
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
    };
  };
}
