// The webhook's HTTPS endpoint: bytes in, reviewNodeAdmission (pure, src/webhook/review.ts) or
// reviewNodeRegistration (the mutating half, registration-review.ts), bytes out, plus counting and
// logging. Plain node:https rather than a framework: three routes, and every microsecond per review
// is the API server's (and so every Node write's) latency. The serving certificate swaps in place
// (setSecureContext): new handshakes get the new one, connections open on the old one carry on,
// so a renewal drops nothing.
//
// The port is reachable from the pod network, so from any node: the process also holds the
// controller's Lease, whose renewals must not wait behind a flood of large bodies. Connections
// are capped, bodies being read are capped (beyond: 503 at once, nothing read), and bodies are
// parsed one per event-loop turn (parse-queue.ts), so a renewal's timer and I/O get a turn
// between any two parses however many arrive at once.
import type { IncomingMessage, ServerResponse } from 'node:http';
import { createServer, type Server } from 'node:https';
import type { AddressInfo } from 'node:net';
import type { Logger } from 'pino';
import type { AdmissionPolicy } from '../flavor/admission.ts';
import type { AdmissionMetrics } from './metrics.ts';
import { ParseQueue } from './parse-queue.ts';
import { reviewNodeRegistration } from './registration-review.ts';
import { reviewNodeAdmission } from './review.ts';

export const VALIDATE_NODES_PATH = '/validate-nodes';
export const MUTATE_NODES_PATH = '/mutate-nodes';
const HEALTH_PATH = '/healthz';
/**
 * A review carries the Node twice (object and oldObject); etcd stores objects up to 1.5 MiB, so a
 * legitimate review can approach 3 MiB plus the envelope.
 */
const MAX_BODY_BYTES = 4 * 1024 * 1024;
/**
 * Longer than the idle timeout of the API server's Go HTTP client (90 s), so the client is always
 * the one to close an idle connection: a server-side close racing a new request would fail that
 * request (Go does not retry POSTs).
 */
const KEEP_ALIVE_TIMEOUT_MS = 120_000;
const MAX_LOGGED_LENGTH = 256;
/**
 * Open connections at most (the API server keeps a pool per replica; far below the process's file
 * descriptors). Beyond it, new connections are closed at once.
 */
const MAX_CONNECTIONS = 512;
/** Bodies being read or waiting to be parsed at most; beyond it a request gets 503 unread. */
const MAX_REQUESTS_IN_FLIGHT = 64;

interface KeyPair {
  certPem: string;
  keyPem: string;
}

interface WebhookServerOptions {
  host?: string;
  port: number;
  certificate: KeyPair;
  /** Read on every request: FlavorClass changes apply to the next review. */
  policy: () => AdmissionPolicy;
  metrics: AdmissionMetrics;
  logger: Logger;
  maxBodyBytes?: number;
  /**
   * Whether a node name is claimed through nodeflavor, read from the API server (the mutating
   * route); without it the route answers 404.
   */
  nameClaimed?: (nodeName: string) => Promise<boolean>;
  maxConnections?: number;
  maxRequestsInFlight?: number;
}

/** What every request handler shares: the options and the bounded parsing. */
interface ServerState {
  options: WebhookServerOptions;
  parser: ParseQueue;
  inFlight: number;
}

export interface WebhookServer {
  /** The bound port (useful with port 0). */
  readonly port: number;
  /** Serves `certificate` to every new TLS handshake from now on. */
  setCertificate(certificate: KeyPair): void;
  /** Stops listening and closes every connection. */
  close(): Promise<void>;
}

export async function startWebhookServer(options: WebhookServerOptions): Promise<WebhookServer> {
  const server = createServer(
    {
      cert: options.certificate.certPem,
      key: options.certificate.keyPem,
      minVersion: 'TLSv1.2',
      keepAliveTimeout: KEEP_ALIVE_TIMEOUT_MS,
      headersTimeout: 10_000,
      requestTimeout: 30_000,
    },
    (req, res) => handle(req, res, state),
  );
  const state: ServerState = { options, parser: new ParseQueue(), inFlight: 0 };
  server.maxConnections = options.maxConnections ?? MAX_CONNECTIONS;
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port, options.host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  server.on('error', (error) => options.logger.error({ err: error.message }, 'webhook server error'));
  return {
    port: (server.address() as AddressInfo).port,
    setCertificate: (certificate) => {
      try {
        server.setSecureContext({
          cert: certificate.certPem,
          key: certificate.keyPem,
          minVersion: 'TLSv1.2',
        });
      } catch (error) {
        // Keep the working context; the next renewal tries again.
        options.logger.error({ err: (error as Error).message }, 'cannot load the new serving certificate');
      }
    },
    close: () => closeServer(server),
  };
}

function closeServer(server: Server): Promise<void> {
  return new Promise((resolve) => {
    server.close(() => resolve());
    server.closeAllConnections();
  });
}

function handle(req: IncomingMessage, res: ServerResponse, state: ServerState): void {
  const { options } = state;
  const started = performance.now();
  const path = (req.url ?? '/').split('?', 1)[0] ?? '/';
  if (path === HEALTH_PATH && (req.method === 'GET' || req.method === 'HEAD')) {
    res.writeHead(200, { 'Content-Type': 'text/plain' }).end('ok\n');
    return;
  }
  const refusal = routeRefusal(req, path, options);
  if (refusal !== undefined) {
    if (refusal.status === 405) res.setHeader('Allow', 'POST');
    reject(res, options, refusal.status, refusal.message);
    return;
  }
  const limit = options.maxBodyBytes ?? MAX_BODY_BYTES;
  if (Number(req.headers['content-length'] ?? 0) > limit) {
    tooLarge(req, res, options, limit);
    return;
  }
  if (state.inFlight >= (options.maxRequestsInFlight ?? MAX_REQUESTS_IN_FLIGHT)) {
    // Do not read it: the API server retries (failurePolicy) or the client was never it.
    dropUnread(req, res, options, 503, 'too many admission requests in flight: retry');
    return;
  }
  state.inFlight += 1;
  let done = false;
  const finish = () => {
    if (done) return;
    done = true;
    state.inFlight -= 1;
  };
  res.once('close', finish);
  const chunks: Buffer[] = [];
  let size = 0;
  req.on('data', (chunk: Buffer) => {
    if (size > limit) return; // already refused
    size += chunk.length;
    if (size > limit) tooLarge(req, res, options, limit);
    else chunks.push(chunk);
  });
  req.on('error', () => {
    // The client went away; there is nobody to answer.
  });
  req.on('end', () => {
    if (size > limit) return;
    const text = Buffer.concat(chunks, size).toString('utf8');
    chunks.length = 0;
    state.parser
      .parse(text)
      .then(
        (body) =>
          path === MUTATE_NODES_PATH
            ? answerRegistration(body, res, options, started)
            : answer(body, res, options, started),
        () => reject(res, options, 400, 'the body is not valid JSON'),
      )
      .catch((error: Error) => {
        options.logger.error({ err: error.message }, 'webhook handler failed');
        reject(res, options, 500, 'internal error');
      })
      .finally(finish);
  });
}

function routeRefusal(
  req: IncomingMessage,
  path: string,
  options: WebhookServerOptions,
): { status: number; message: string } | undefined {
  const known =
    path === VALIDATE_NODES_PATH || (path === MUTATE_NODES_PATH && options.nameClaimed !== undefined);
  if (!known) return { status: 404, message: `no route ${path.slice(0, 100)}` };
  if (req.method !== 'POST') return { status: 405, message: `${path} takes POST` };
  if (!isJson(req.headers['content-type'])) {
    return { status: 415, message: 'an AdmissionReview must be sent as Content-Type: application/json' };
  }
  return undefined;
}

function answer(body: unknown, res: ServerResponse, options: WebhookServerOptions, started: number): void {
  const outcome = reviewNodeAdmission(body, options.policy());
  if (outcome.httpStatus === 400) {
    reject(res, options, 400, outcome.error);
    return;
  }
  reply(res, outcome.body);
  const { decision } = outcome;
  const result = decision.allowed ? 'allowed' : 'denied';
  options.metrics.decisions.inc({ result, reason: decision.reason });
  options.metrics.duration.observe((performance.now() - started) / 1000);
  // Who asked and what we said; never the object (the token label's value is a secret).
  const level = decision.allowed ? 'debug' : 'info';
  if (options.logger.isLevelEnabled(level)) {
    options.logger[level]({ ...requestFacts(body), result, reason: decision.reason }, 'admission decision');
  }
}

async function answerRegistration(
  body: unknown,
  res: ServerResponse,
  options: WebhookServerOptions,
  started: number,
): Promise<void> {
  const nameClaimed = options.nameClaimed as (nodeName: string) => Promise<boolean>;
  const outcome = await reviewNodeRegistration(body, nameClaimed);
  if (outcome.httpStatus === 400) {
    reject(res, options, 400, outcome.error);
    return;
  }
  reply(res, outcome.body);
  const result = outcome.body.response.allowed ? 'mutated' : 'denied';
  options.metrics.decisions.inc({ result, reason: outcome.result });
  options.metrics.duration.observe((performance.now() - started) / 1000);
  const level = outcome.result === 'ClaimUnreadable' ? 'warn' : 'debug';
  if (options.logger.isLevelEnabled(level)) {
    options.logger[level]({ ...requestFacts(body), result: outcome.result }, 'registration reviewed');
  }
}

/** An AdmissionReview answer, HTTP 200. */
function reply(res: ServerResponse, body: unknown): void {
  const payload = JSON.stringify(body);
  res
    .writeHead(200, { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(payload) })
    .end(payload);
}

function reject(res: ServerResponse, options: WebhookServerOptions, status: number, message: string): void {
  options.metrics.rejectedRequests.inc({ status: String(status) });
  options.logger.warn({ status, message }, 'webhook request rejected');
  if (res.headersSent) return;
  res.writeHead(status, { 'Content-Type': 'text/plain; charset=utf-8' }).end(`${message}\n`);
}

function tooLarge(
  req: IncomingMessage,
  res: ServerResponse,
  options: WebhookServerOptions,
  limit: number,
): void {
  // Do not read (or keep) the rest: answer, then drop the connection.
  dropUnread(req, res, options, 413, `the body exceeds ${limit} bytes`);
}

/** Answers without reading the body, and closes the connection (its unread body is in the way). */
function dropUnread(
  req: IncomingMessage,
  res: ServerResponse,
  options: WebhookServerOptions,
  status: number,
  message: string,
): void {
  res.shouldKeepAlive = false;
  reject(res, options, status, message);
  req.pause();
  res.once('finish', () => req.socket.destroy());
}

function isJson(contentType: string | undefined): boolean {
  const mediaType = contentType?.split(';', 1)[0]?.trim().toLowerCase();
  return mediaType === 'application/json';
}

function requestFacts(body: unknown): Record<string, string> {
  const request = field(body, 'request');
  return {
    uid: text(field(request, 'uid')),
    user: text(field(field(request, 'userInfo'), 'username')),
    node: text(field(request, 'name')),
    operation: text(field(request, 'operation')),
    subResource: text(field(request, 'subResource')),
  };
}

function field(value: unknown, key: string): unknown {
  return typeof value === 'object' && value !== null ? (value as Record<string, unknown>)[key] : undefined;
}

function text(value: unknown): string {
  return typeof value === 'string' ? value.slice(0, MAX_LOGGED_LENGTH) : '';
}
