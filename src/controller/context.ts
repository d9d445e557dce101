// What every reconciler gets: caches, indexes, I/O, metrics, events, configuration and a clock.

import type { Logger } from 'pino';
import type { Config } from '../config.ts';
import type { KeyRing } from '../flavor/keyring.ts';
import type { EventRecorder } from '../kube/events.ts';
import type { KubeConfig } from '../kube/kubeconfig.ts';
import type { ListWatch } from '../kube/listwatch.ts';
import type { TrimmedNode } from '../kube/node-writes.ts';
import type { CsrObject, StoredToken } from '../kube/token-writes.ts';
import type { ControllerMetrics } from './metrics.ts';
import type { Indexes, StoredFlavorClass } from './state.ts';

export interface Caches {
  nodes: ListWatch<TrimmedNode>;
  csrs: ListWatch<CsrObject>;
  tokens: ListWatch<StoredToken>;
  classes: ListWatch<StoredFlavorClass>;
}

export interface ControllerContext {
  kubeConfig: KubeConfig;
  config: Config;
  caches: Caches;
  indexes: Indexes;
  metrics: ControllerMetrics;
  events: EventRecorder;
  log: Logger;
  keyRing: () => Promise<KeyRing>;
  /**
   * The ring read from the API server now (not the watched copy), for a verdict that failed a
   * MAC check: the watch may not have brought a rotation yet. The same object when unchanged.
   */
  freshKeyRing: () => Promise<KeyRing>;
  now: () => Date;
  enqueueNode: (name: string) => void;
  requeueNode: (name: string, afterMs: number) => void;
  enqueueToken: (name: string) => void;
  requeueToken: (name: string, afterMs: number) => void;
  /** Hands a decision on a CSR (recorded first on its token) to the CSR reconciler. */
  enqueueCsr: (csrName: string) => void;
  requeueCsr: (csrName: string, afterMs: number) => void;
}
