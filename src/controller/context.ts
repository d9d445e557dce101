// What every reconciler gets: caches, indexes, I/O, metrics, events, configuration and a clock.
// Nothing to enqueue with: what an event means to which reconciler is declared in wiring.ts, and
// a reconciler asks only for its own key again, later (its Requeue).

import type { Logger } from 'pino';
import type { Config } from '../config.ts';
import type { KeyRing } from '../flavor/keyring.ts';
import type { NodeNameClaim, Stored, StoredFlavoredToken } from '../flavor/resources.ts';
import type { CsrObject } from '../kube/csrs.ts';
import type { StoredFlavorClass } from '../kube/flavor-classes.ts';
import type { TrimmedNode } from '../kube/node-writes.ts';
import type { EventType, InvolvedObject } from '../runtime/events.ts';
import type { KubeConfig } from '../runtime/kubeconfig.ts';
import type { ControllerApi } from './api.ts';
import type { Indexes } from './indexes.ts';
import type { ControllerMetrics } from './metrics.ts';

/** What reconcilers read of a list/watch cache (src/runtime/listwatch.ts; a Map in unit tests). */
export interface Cache<T> {
  get(key: string): T | undefined;
  list(): T[];
  keys(): string[];
  /** Serves our own write's answer until the watch brings that version. */
  assume(raw: unknown): void;
  readonly hasSynced: boolean;
}

/** What each cache holds. */
export interface CacheObjects {
  nodes: TrimmedNode;
  csrs: CsrObject;
  tokens: StoredFlavoredToken;
  classes: StoredFlavorClass;
  /** NodeNameClaims: who holds which node name (ADR 0011). */
  claims: Stored<NodeNameClaim>;
}
export type CacheName = keyof CacheObjects;
export type CacheObject<C extends CacheName> = CacheObjects[C];
export type Caches = { [C in CacheName]: Cache<CacheObject<C>> };

/** Where reconcilers say what happened (src/runtime/events.ts, deduplicated and aggregated). */
export interface EventSink {
  emit(object: InvolvedObject, type: EventType, reason: string, message: string): void;
}

export interface ControllerContext {
  kubeConfig: KubeConfig;
  config: Config;
  caches: Caches;
  indexes: Indexes;
  metrics: ControllerMetrics;
  events: EventSink;
  /** Every write the reconcilers make, through the term's fenced KubeConfig. */
  api: ControllerApi;
  log: Logger;
  keyRing: () => Promise<KeyRing>;
  /**
   * The ring read from the API server now (not the watched copy), for a verdict that failed a
   * MAC check: the watch may not have brought a rotation yet. The same object when unchanged.
   */
  freshKeyRing: () => Promise<KeyRing>;
  now: () => Date;
}

/** A reconciler's answer: run this key again after that many milliseconds (undefined: only on events). */
export type Requeue = number | undefined;

/** The soonest of several requeues (undefined when none asks). */
export function soonest(...requeues: Requeue[]): Requeue {
  const asked = requeues.filter((ms): ms is number => ms !== undefined);
  return asked.length === 0 ? undefined : Math.max(0, Math.min(...asked));
}
