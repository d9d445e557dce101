// Controller metrics. Labels are reasons and results from small fixed sets: never a node name,
// token ID or anything secret.
import { Counter, Gauge, Histogram, type Registry } from 'prom-client';

export interface ControllerMetrics {
  verifications: Counter<'result' | 'reason'>;
  joinToFlavored: Histogram;
  queueDepth: Gauge<'queue'>;
  queueActive: Gauge<'queue'>;
  retries: Counter<'queue'>;
  watchRestarts: Counter<'resource' | 'reason'>;
  bindings: Counter<'result' | 'reason'>;
  isLeader: Gauge;
  bootstrapGroupAutoApproved: Gauge;
  reconciles: Counter<'queue' | 'result'>;
}

export function controllerMetrics(registry: Registry): ControllerMetrics {
  return {
    verifications: new Counter({
      name: 'nodeflavor_verifications_total',
      help: 'Node verifications by result (verified, rejected) and reason.',
      labelNames: ['result', 'reason'],
      registers: [registry],
    }),
    joinToFlavored: new Histogram({
      name: 'nodeflavor_join_to_flavored_seconds',
      help: 'Seconds from Node creation to its flavor labels being applied.',
      buckets: [0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60, 120],
      registers: [registry],
    }),
    queueDepth: new Gauge({
      name: 'nodeflavor_workqueue_depth',
      help: 'Keys waiting in each work queue.',
      labelNames: ['queue'],
      registers: [registry],
    }),
    queueActive: new Gauge({
      name: 'nodeflavor_workqueue_active',
      help: 'Keys being reconciled now, in each work queue.',
      labelNames: ['queue'],
      registers: [registry],
    }),
    retries: new Counter({
      name: 'nodeflavor_workqueue_retries_total',
      help: 'Reconciles that failed and were retried with backoff.',
      labelNames: ['queue'],
      registers: [registry],
    }),
    watchRestarts: new Counter({
      name: 'nodeflavor_watch_restarts_total',
      help: 'Watch restarts by resource and reason (relist after 410, ended, error, stalled).',
      labelNames: ['resource', 'reason'],
      registers: [registry],
    }),
    bindings: new Counter({
      name: 'nodeflavor_csr_bindings_total',
      help: 'Kubelet client CSRs judged by the binding checks, by result (bound, rejected) and reason.',
      labelNames: ['result', 'reason'],
      registers: [registry],
    }),
    reconciles: new Counter({
      name: 'nodeflavor_reconciles_total',
      help: 'Reconciles run, by queue and result (ok, error).',
      labelNames: ['queue', 'result'],
      registers: [registry],
    }),
    isLeader: new Gauge({
      name: 'nodeflavor_leader',
      help: '1 while this replica is the leader.',
      registers: [registry],
    }),
    bootstrapGroupAutoApproved: new Gauge({
      name: 'nodeflavor_bootstrap_group_auto_approved',
      help: "1 if kube-controller-manager auto-approves the kubelet CSRs of the tokens' bootstrap group (any node name: name squatting possible).",
      registers: [registry],
    }),
  };
}
