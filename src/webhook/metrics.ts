// The admission webhook's Prometheus metrics. Labels are fixed, small sets (decision result and
// reason, HTTP status); never a node name, user or label value. Metrics already registered (the
// webhook restarted in the same process, as tests do) are reused rather than registered twice.
import { Counter, Gauge, Histogram, type Registry } from 'prom-client';

export class AdmissionMetrics {
  readonly decisions: Counter<'result' | 'reason'>;
  readonly duration: Histogram;
  readonly rejectedRequests: Counter<'status'>;
  readonly certificateNotAfter: Gauge;
  readonly certificateChanges: Counter;
  readonly registrationDeferred: Gauge;

  constructor(registry: Registry) {
    const registers = [registry];
    this.registrationDeferred = reuse(
      registry,
      'nodeflavor_admission_registration_deferred',
      (name) =>
        new Gauge({
          name,
          help: '1 while this replica leads but leaves the admission registration to a newer release (a rolling upgrade under way; alert if it lasts).',
          registers,
        }),
    );
    this.decisions = reuse(
      registry,
      'nodeflavor_admission_decisions_total',
      (name) =>
        new Counter({
          name,
          help: 'Admission decisions on Node writes, by result (allowed, denied) and reason.',
          labelNames: ['result', 'reason'],
          registers,
        }),
    );
    this.duration = reuse(
      registry,
      'nodeflavor_admission_review_duration_seconds',
      (name) =>
        new Histogram({
          name,
          help: 'Time to answer an AdmissionReview, from the first byte read to the last byte written.',
          buckets: [0.0002, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1],
          registers,
        }),
    );
    this.rejectedRequests = reuse(
      registry,
      'nodeflavor_admission_rejected_requests_total',
      (name) =>
        new Counter({
          name,
          help: 'Requests to the webhook answered without a decision (400 no uid, 404, 405, 413 too large, 415 not JSON).',
          labelNames: ['status'],
          registers,
        }),
    );
    this.certificateNotAfter = reuse(
      registry,
      'nodeflavor_webhook_certificate_not_after_seconds',
      (name) =>
        new Gauge({
          name,
          help: 'Expiry (Unix time) of the serving certificate the webhook presents now.',
          registers,
        }),
    );
    this.certificateChanges = reuse(
      registry,
      'nodeflavor_webhook_certificate_changes_total',
      (name) =>
        new Counter({
          name,
          help: 'Times the webhook switched to another serving certificate (renewals, first load).',
          registers,
        }),
    );
  }
}

function reuse<T>(registry: Registry, name: string, create: (name: string) => T): T {
  return (registry.getSingleMetric(name) as T | undefined) ?? create(name);
}
