// `nodeflavor capi` metrics. Labels come from small fixed sets (results, reasons, queue names):
// never a Machine, cluster, flavor or token.
import { Counter, Gauge, type Registry } from 'prom-client';

export interface CapiMetrics {
  /** Tokens put in place (a KubeadmConfig filled), and issuer calls that failed, by failure. */
  issuances: Counter<'result'>;
  revocations: Counter<'result'>;
  /** Conditions written, by the reason they now carry. */
  conditions: Counter<'kind' | 'reason'>;
  queueDepth: Gauge<'queue'>;
  reconciles: Counter<'queue' | 'result'>;
  isLeader: Gauge;
  watchRestarts: Counter<'resource' | 'reason'>;
}

export function capiMetrics(registry: Registry): CapiMetrics {
  return {
    issuances: new Counter({
      name: 'nodeflavor_capi_issuances_total',
      help: 'Token requests to workload issuers: filled (the KubeadmConfig got its token) or the failure (unreachable, forbidden, ...).',
      labelNames: ['result'],
      registers: [registry],
    }),
    revocations: new Counter({
      name: 'nodeflavor_capi_revocations_total',
      help: 'Tokens of deleted KubeadmConfigs revoked (ok) or not yet (the failure).',
      labelNames: ['result'],
      registers: [registry],
    }),
    conditions: new Counter({
      name: 'nodeflavor_capi_conditions_written_total',
      help: 'NodeFlavorToken (KubeadmConfig) and NodeFlavorVerified (Machine) conditions written, by reason.',
      labelNames: ['kind', 'reason'],
      registers: [registry],
    }),
    queueDepth: new Gauge({
      name: 'nodeflavor_capi_workqueue_depth',
      help: 'Keys waiting in each work queue.',
      labelNames: ['queue'],
      registers: [registry],
    }),
    reconciles: new Counter({
      name: 'nodeflavor_capi_reconciles_total',
      help: 'Reconciles by queue and result (ok, error).',
      labelNames: ['queue', 'result'],
      registers: [registry],
    }),
    isLeader: new Gauge({
      name: 'nodeflavor_capi_leader',
      help: '1 while this replica holds the Lease and reconciles.',
      registers: [registry],
    }),
    watchRestarts: new Counter({
      name: 'nodeflavor_capi_watch_restarts_total',
      help: 'List/watch restarts by resource and reason.',
      labelNames: ['resource', 'reason'],
      registers: [registry],
    }),
  };
}
