// The token issuer's HTTPS server: fastify with a 16 KiB body limit, JSON only, one error shape
// (`{error: {code, message, fields?}}`, never a stack trace), a log line and a metric per request.
// `buildIssuerApp` wires an app from its dependencies (tests inject requests into it without TLS);
// `startTokenIssuer` builds the real dependencies from a KubeConfig and listens with TLS.

import { readFileSync } from 'node:fs';
import type { Socket } from 'node:net';
import { setTimeout as delay } from 'node:timers/promises';
import Fastify, {
  type FastifyError,
  type FastifyInstance,
  type FastifyReply,
  type FastifyRequest,
  LogController,
} from 'fastify';
import type { DestinationStream, Logger } from 'pino';
import { Registry } from 'prom-client';
import type { RandomBytes } from '../flavor/bootstrap-token.ts';
import type { KeyRing } from '../flavor/keyring.ts';
import { type FlavorClassCache, flavorClassCache } from '../kube/flavor-classes.ts';
import { KeyRingWatch } from '../kube/keyring-watch.ts';
import { KubeReviews } from '../kube/reviews.ts';
import { flavoredTokenCache, joinRecordCache, type TokenCaches } from '../kube/token-caches.ts';
import { KubeTokenStore, type TokenKube } from '../kube/tokens.ts';
import { prepareKubeConfig } from '../runtime/config.ts';
import { EventRecorder } from '../runtime/events.ts';
import { KubeError } from '../runtime/kube-error.ts';
import type { KubeConfig } from '../runtime/kubeconfig.ts';
import { createLogger } from '../runtime/log.ts';
import type { AttestationDeps } from './attestation/attestation.ts';
import { attestationFiles as createAttestationFiles } from './attestation/attestation-files.ts';
import { registerAttestationRoutes } from './attestation/attestation-routes.ts';
import type { IssuerConfig } from './config.ts';
import { createCallerAuth, type Reviews } from './defences/auth.ts';
import { TrustedProxies } from './defences/client-address.ts';
import { handleClientError } from './defences/client-errors.ts';
import { limitConnections } from './defences/connection-limit.ts';
import { RateLimiter } from './defences/rate-limit.ts';
import { type ErrorCode, errorBody, IssuerError, toIssuerError } from './errors.ts';
import { IdempotencyCache } from './issuance/idempotency.ts';
import { IssuerMetrics } from './metrics.ts';
import { callerOf, type RememberedIssue, registerRoutes } from './routes.ts';
import { serverTimeouts } from './server-options.ts';
import type { TokenFeed } from './tokens/token-feed.ts';
import { TokenFeedWatch } from './tokens/token-feed-watch.ts';
import { WatchSlots } from './tokens/token-watch.ts';

interface IssuerDeps {
  kube: TokenKube;
  /** Needed for TokenReview authentication and SubjectAccessReview authorisation. */
  reviews?: Reviews;
  keyRing: { readonly loaded: boolean; get(): Promise<KeyRing> };
  /** Where JSON log lines go (default stdout). */
  logStream?: DestinationStream;
  logger?: Logger;
  /** Metrics are registered here (default: a registry of the issuer's own). */
  registry?: Registry;
  now?: () => Date;
  randomBytes?: RandomBytes;
  /** FlavoredTokens from a watch, for lists and watches (see token-feed.ts). */
  tokens?: TokenFeed;
  /** Where attestation refusals and successes are recorded as Events (ADR 0014). */
  events?: AttestationDeps['events'];
}

interface IssuerApp {
  app: FastifyInstance;
  metrics: IssuerMetrics;
  registry: Registry;
  logger: Logger;
}

export function buildIssuerApp(
  config: IssuerConfig,
  deps: IssuerDeps,
  https?: { cert: string; key: string },
): IssuerApp {
  const logger = deps.logger ?? createLogger('token-issuer', config.logLevel, deps.logStream);
  const registry = deps.registry ?? new Registry();
  const metrics = new IssuerMetrics(registry);
  const now = deps.now ?? (() => new Date());
  const timeouts = serverTimeouts(config.connections);
  const trustedProxies = new TrustedProxies(config.trustedProxies);
  // Typed as the plain instance: with and without TLS it serves the same routes, and fastify's
  // generics for the https server and the pino logger add nothing the routes use.
  const app = Fastify({
    loggerInstance: logger,
    // Our own one line per request (onResponse below) instead of fastify's two.
    logController: new LogController({ disableRequestLogging: true }),
    exposeHeadRoutes: false,
    bodyLimit: config.bodyLimitBytes,
    ...timeouts.fastify,
    ...(https
      ? { https: { ...https, minVersion: 'TLSv1.2' as const, ...timeouts.server, ...timeouts.tls } }
      : { http: timeouts.server }),
    // Errors fastify raises before routing (a URL with bad percent-encoding) get our one error
    // shape too, and never echo the raw path back.
    frameworkErrors: (_error: Error, request: FastifyRequest, reply: FastifyReply) => {
      void sendError(
        new IssuerError('InvalidRequest', 'the request URL is not valid (bad percent-encoding)'),
        request,
        reply,
      );
    },
    // Malformed or too slow HTTP (no request object exists yet): answered on the socket in the same shape.
    clientErrorHandler: (error: NodeJS.ErrnoException, socket: Socket) =>
      handleClientError(error, socket, (reason) => metrics.clientErrors.inc({ reason })),
  }) as unknown as FastifyInstance;
  limitConnections(app.server, config.connections, trustedProxies, {
    refused: (reason) => metrics.connectionsRefused.inc({ reason }),
    open: (total) => metrics.connections.set(total),
  });

  // JSON only: without the text/plain parser every other content type gets 415.
  app.removeContentTypeParser(['text/plain']);
  app.setErrorHandler((error: FastifyError, request, reply) =>
    sendError(asIssuerError(error), request, reply),
  );
  app.setNotFoundHandler((request, reply) =>
    sendError(
      new IssuerError(
        'NotFound',
        `no route ${request.method} ${request.url.split('?')[0]}: see /openapi.json`,
      ),
      request,
      reply,
    ),
  );
  app.addHook('onResponse', async (request, reply) => {
    const route = request.routeOptions.url ?? '<unmatched>';
    metrics.requests.inc({ method: request.method, route, status: String(reply.statusCode) });
    if (route === '/healthz' || route === '/readyz') return;
    request.log.info(
      {
        method: request.method,
        route,
        status: reply.statusCode,
        caller: callerOf(request)?.username,
        ms: Math.round(reply.elapsedTime),
      },
      'request',
    );
  });

  const limits = config.rateLimit;
  // Read once, re-read when they change; a changed file that cannot be used keeps the last good one.
  const attestationFiles = createAttestationFiles(config.issuance.attestation, {
    onError: (path, error) =>
      logger.error(
        { path, err: error.message },
        'cannot use the changed attestation file: the last good one stays in use',
      ),
  });
  // Unauthenticated routes exist only where attested joins are set up (--attestation-url).
  if (config.issuance.attestation.url)
    registerAttestationRoutes(app, {
      deps: {
        kube: deps.kube,
        keyRing: () => deps.keyRing.get(),
        settings: config.issuance,
        attestationFiles,
        now,
        ...(deps.randomBytes ? { randomBytes: deps.randomBytes } : {}),
        ...(deps.events ? { events: deps.events } : {}),
        count: (outcome) => metrics.attestations.inc({ outcome }),
      },
      perAddress: new RateLimiter(config.issuance.attestation.perAddress, limits.maxTrackedCallers),
      total: new RateLimiter(config.issuance.attestation.total, 1),
      trustedProxies,
      metrics,
    });
  registerRoutes(app, {
    config,
    issuance: {
      kube: deps.kube,
      keyRing: () => deps.keyRing.get(),
      settings: config.issuance,
      attestationFiles,
      now,
      ...(deps.randomBytes ? { randomBytes: deps.randomBytes } : {}),
    },
    auth: createCallerAuth(config.auth, deps.reviews, () => now().getTime(), {
      budget: {
        perAddress: limits.unauthenticatedPerAddress,
        knownMs: limits.knownBearerSeconds * 1000,
        maxKeys: limits.maxTrackedCallers,
      },
      onReview: (result) => metrics.reviews.inc({ result }),
    }),
    idempotency: new IdempotencyCache<RememberedIssue>({
      ttlMs: config.idempotency.ttlSeconds * 1000,
      maxEntries: config.idempotency.maxEntries,
      now: () => now().getTime(),
    }),
    callerLimiter: new RateLimiter(limits.perCaller, limits.maxTrackedCallers),
    trustedProxies,
    metrics,
    keyRing: deps.keyRing,
    now,
    tokens: deps.tokens,
    watches: new WatchSlots(config.watches.perCaller, config.watches.max),
    streams: new Set(),
  });
  return { app, metrics, registry, logger };
}

const FASTIFY_CODES: Readonly<Record<string, [ErrorCode, string]>> = {
  FST_ERR_CTP_BODY_TOO_LARGE: ['PayloadTooLarge', 'request body too large'],
  FST_ERR_CTP_INVALID_MEDIA_TYPE: [
    'UnsupportedMediaType',
    'send the request as Content-Type: application/json',
  ],
  FST_ERR_CTP_INVALID_CONTENT_LENGTH: ['InvalidRequest', 'the body does not match its Content-Length'],
  FST_ERR_CTP_EMPTY_JSON_BODY: ['InvalidRequest', 'the request body is empty: send a JSON object'],
  FST_ERR_CTP_INVALID_JSON_BODY: ['InvalidRequest', 'the request body is not valid JSON'],
};

/**
 * Errors from fastify itself carry fixed codes; their messages (and JSON.parse's, which quote
 * the input) are replaced by our own. Anything unexpected becomes a generic 500.
 */
function asIssuerError(error: FastifyError): IssuerError {
  if (error instanceof IssuerError || error instanceof KubeError) return toIssuerError(error);
  const known = error.code ? FASTIFY_CODES[error.code] : undefined;
  if (known) {
    const [code, message] = known;
    return new IssuerError(code, message);
  }
  const status = error.statusCode ?? 500;
  if (status === 413) return new IssuerError('PayloadTooLarge', 'request body too large');
  if (status === 415)
    return new IssuerError('UnsupportedMediaType', 'send the request as Content-Type: application/json');
  if (status >= 400 && status < 500) return new IssuerError('InvalidRequest', 'the request is malformed');
  return toIssuerError(error);
}

function sendError(error: IssuerError, request: FastifyRequest, reply: FastifyReply): FastifyReply {
  if (error.status >= 500) request.log.error({ code: error.code, message: error.message }, 'request failed');
  if (error.retryAfterSeconds !== undefined) reply.header('Retry-After', String(error.retryAfterSeconds));
  return reply.code(error.status).header('Cache-Control', 'no-store').send(errorBody(error));
}

export interface RunningIssuer extends IssuerApp {
  /** https://host:port the server listens on. */
  url: string;
  /** True while the HMAC key ring is usable (what /readyz reports). */
  ready(): boolean;
  /** Why it is not ready (for /readyz). */
  notReadyReason(): string | undefined;
  /** True once its token and join-record caches have synced (lists and watches are answered). */
  cachesSynced(): boolean;
  close(): Promise<void>;
}

export interface StartOptions {
  /** The process's logger (a child is used); default a new one writing to `logStream` or stdout. */
  logger?: Logger;
  logStream?: DestinationStream;
  registry?: Registry;
  /** The process's shared key ring (`nodeflavor run`); without it the issuer watches its own. */
  keyRing?: KeyRingWatch;
  /** The process's FlavorClass cache (`nodeflavor run`), started by its owner; else the issuer's own. */
  classes?: FlavorClassCache;
  /** The process's token and join-record caches (`nodeflavor run`), started by their owner; else its own. */
  tokenCaches?: TokenCaches;
}

function eventRecorder(kubeConfig: KubeConfig, logger: Logger): EventRecorder {
  const events = new EventRecorder(kubeConfig, { component: 'nodeflavor-issuer' });
  events.onError = (error) => logger.warn({ err: error.message }, 'could not record an Event');
  return events;
}

/** The production wiring: Kubernetes clients from `kubeConfig`, the key ring Secret, TLS, listen. */
export async function startTokenIssuer(
  config: IssuerConfig,
  kubeConfig: KubeConfig,
  options: StartOptions = {},
): Promise<RunningIssuer> {
  prepareKubeConfig(kubeConfig);
  const logger =
    options.logger?.child({ component: 'token-issuer' }) ??
    createLogger('token-issuer', config.logLevel, options.logStream);
  const ownKeyRing = options.keyRing === undefined;
  const keyRing =
    options.keyRing ??
    new KeyRingWatch({
      kubeConfig,
      namespace: config.keyRing.namespace,
      name: config.keyRing.secretName,
      createIfMissing: config.keyRing.createIfMissing,
      log: logger,
      ...(options.registry ? { registry: options.registry } : {}),
    });
  // Load now so that the first request does not wait, but do not hold the server back for a watch
  // that cannot list (RBAC, API server down): it serves, not ready, and /readyz says why.
  await Promise.race([keyRing.start(), delay(10_000, undefined, { ref: false })]);
  const tls =
    'certFile' in config.tls
      ? { cert: readFileSync(config.tls.certFile, 'utf8'), key: readFileSync(config.tls.keyFile, 'utf8') }
      : { cert: config.tls.certPem, key: config.tls.keyPem };
  const ownClasses = options.classes === undefined;
  const classes =
    options.classes ??
    flavorClassCache(kubeConfig, (reason, error) =>
      logger.debug({ reason, message: error?.message }, 'FlavorClass watch restarted'),
    );
  // Not awaited: until the cache has synced, lookups go to the API server.
  if (ownClasses) void classes.start();
  const ownTokenCaches = options.tokenCaches === undefined;
  const restarted = (what: string) => (reason: string, error?: Error) =>
    logger.debug({ reason, message: error?.message }, `${what} watch restarted`);
  const tokenCaches = options.tokenCaches ?? {
    tokens: flavoredTokenCache(kubeConfig, restarted('FlavoredToken')),
    records: joinRecordCache(kubeConfig, restarted('NodeNameClaim')),
  };
  if (ownTokenCaches) {
    void tokenCaches.tokens.start();
    void tokenCaches.records.start();
  }
  const tokens = new TokenFeedWatch(tokenCaches);
  const built = buildIssuerApp(
    config,
    {
      kube: new KubeTokenStore(kubeConfig, classes),
      tokens,
      reviews: new KubeReviews(kubeConfig),
      keyRing,
      events: eventRecorder(kubeConfig, logger),
      logger,
      ...(options.registry ? { registry: options.registry } : {}),
    },
    tls,
  );
  await built.app.listen({ host: config.listen.host, port: config.listen.port });
  const address = built.app.server.address();
  const port = typeof address === 'object' && address ? address.port : config.listen.port;
  const host = config.listen.host.includes(':') ? `[${config.listen.host}]` : config.listen.host;
  return {
    ...built,
    url: `https://${host}:${port}`,
    // A replica takes portal traffic only once it can answer lists and watches from its cache.
    ready: () => keyRing.available && tokens.synced,
    notReadyReason: () =>
      keyRing.unavailableReason ??
      (tokens.synced
        ? undefined
        : 'the FlavoredToken and NodeNameClaim caches have not synced yet (lists and watches need them)'),
    cachesSynced: () => tokens.synced,
    close: async () => {
      if (ownClasses) classes.stop();
      tokens.close();
      if (ownTokenCaches) {
        tokenCaches.tokens.stop();
        tokenCaches.records.stop();
      }
      if (ownKeyRing) keyRing.stop();
      await built.app.close();
    },
  };
}
