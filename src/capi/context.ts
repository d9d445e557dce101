// What the two reconcilers of `nodeflavor capi` share during one leadership term: the caches (every
// replica keeps them warm), the term's fenced KubeConfig and Event recorder (so a replica that lost
// the Lease writes nothing more), the issuer of each workload cluster, and the queues.
import type { Logger } from 'pino';
import type { EventRecorder } from '../runtime/events.ts';
import type { KubeConfig } from '../runtime/kubeconfig.ts';
import type { CapiCaches } from './cluster-api.ts';
import type { CapiConfig } from './config.ts';
import type { IssuerClient } from './issuer-client.ts';
import type { CapiMetrics } from './metrics.ts';

export type IssuerLookup = { ok: true; client: IssuerClient } | { ok: false; message: string };

/**
 * When a Machine last asked the issuer about its token, and what the answer was judged against:
 * a read throttle (Cluster API updates a booting Machine's status many times a second; the
 * issuer's per-caller budget is 1 request a second). No decision is taken from it.
 */
export interface StatusCheck {
  at: number;
  tokenId: string;
  flavor: string;
  nodeRef: string | undefined;
}

export interface CapiContext {
  kubeConfig: KubeConfig;
  caches: CapiCaches;
  config: CapiConfig;
  events: EventRecorder;
  log: Logger;
  metrics: CapiMetrics;
  /** The issuer of the Cluster `namespace/name`, from its access Secret (or why there is none). */
  issuerFor: (clusterKey: string) => IssuerLookup;
  now: () => Date;
  /** By Machine UID; forgotten when the Machine goes. */
  statusChecks: Map<string, StatusCheck>;
  requeueConfig: (key: string, afterMs: number) => void;
  enqueueMachine: (key: string) => void;
  requeueMachine: (key: string, afterMs: number) => void;
}

/** A reconcile that failed for a reason its condition already shows: retried with backoff, logged quietly. */
export class RetryLater extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'RetryLater';
  }
}
