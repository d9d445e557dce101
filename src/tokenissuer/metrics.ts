// The issuer's Prometheus metrics. No metric carries the flavor as a label: a node can reach the
// operator's pod network, and a per-flavor counter that ticks when a token is issued would tell
// its holder which flavor it got (by the time of issue). Routes are the route templates, so
// label cardinality stays bounded whatever paths callers send.
import { Counter, Gauge, Histogram, type Registry } from 'prom-client';

export type IssueResult =
  | 'issued'
  | 'replayed'
  | 'invalid'
  | 'unauthorized'
  | 'not_found'
  | 'conflict'
  | 'error';

export class IssuerMetrics {
  readonly requests: Counter<'method' | 'route' | 'status'>;
  readonly issueDuration: Histogram<'result'>;
  readonly tokensIssued: Counter<'result'>;
  readonly tokensRevoked: Counter;
  readonly authFailures: Counter<'reason'>;
  readonly rateLimited: Counter<'scope'>;
  readonly reviews: Counter<'result'>;
  readonly connections: Gauge;
  readonly connectionsRefused: Counter<'reason'>;
  readonly clientErrors: Counter<'reason'>;
  readonly attestations: Counter<'outcome'>;

  constructor(registry: Registry) {
    const registers = [registry];
    this.requests = new Counter({
      name: 'nodeflavor_issuer_http_requests_total',
      help: 'HTTP requests to the token issuer, by method, route template and status code.',
      labelNames: ['method', 'route', 'status'],
      registers,
    });
    this.issueDuration = new Histogram({
      name: 'nodeflavor_issuer_issue_duration_seconds',
      help: 'Time to issue a token (validation, Kubernetes writes, rendering), by result.',
      labelNames: ['result'],
      buckets: [0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
      registers,
    });
    this.tokensIssued = new Counter({
      name: 'nodeflavor_issuer_token_requests_total',
      help: 'Token issuance requests by result (issued, replayed, invalid, unauthorized, not_found, conflict, error).',
      labelNames: ['result'],
      registers,
    });
    this.tokensRevoked = new Counter({
      name: 'nodeflavor_issuer_tokens_revoked_total',
      help: 'Tokens revoked through the API.',
      registers,
    });
    this.authFailures = new Counter({
      name: 'nodeflavor_issuer_auth_failures_total',
      help: 'Requests refused for missing or invalid credentials (unauthenticated) or permissions (forbidden).',
      labelNames: ['reason'],
      registers,
    });
    this.rateLimited = new Counter({
      name: 'nodeflavor_issuer_rate_limited_total',
      help: 'Requests refused with 429, by bucket (caller or unauthenticated address).',
      labelNames: ['scope'],
      registers,
    });
    this.reviews = new Counter({
      name: 'nodeflavor_issuer_bearer_reviews_total',
      help: 'Bearer tokens reviewed (TokenReview or JWT verification), by result (valid, invalid, error); cached answers are not counted.',
      labelNames: ['result'],
      registers,
    });
    this.connections = new Gauge({
      name: 'nodeflavor_issuer_connections',
      help: 'Open connections to the token issuer.',
      registers,
    });
    this.connectionsRefused = new Counter({
      name: 'nodeflavor_issuer_connections_refused_total',
      help: 'Connections closed on arrival, by cap (per_address or total).',
      labelNames: ['reason'],
      registers,
    });
    this.clientErrors = new Counter({
      name: 'nodeflavor_issuer_client_errors_total',
      help: 'Connections closed before a request was read, by reason (timeout: headers or body too slow; headers_too_large; malformed; tls; reset).',
      labelNames: ['reason'],
      registers,
    });
    // Outcomes only (challenged, attested, or the refusal's reason): never a token ID or a flavor.
    this.attestations = new Counter({
      name: 'nodeflavor_issuer_attestations_total',
      help: 'Attested-join requests (ADR 0014), by outcome: challenged, attested, or the refusal reason (EKMismatch, BadProof, LateAnswer, Replayed, ...).',
      labelNames: ['outcome'],
      registers,
    });
  }
}
