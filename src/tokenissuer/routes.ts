// The token issuer's HTTP routes. Every /v1 request is authenticated (and rate limited) in an
// onRequest hook, before its body is even read; each handler then validates, authorises against
// the flavor, and calls the issuance library. Answers that carry secrets are marked no-store.
import type { PassThrough } from 'node:stream';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { TOKEN_ID_PATTERN } from '../flavor/bootstrap-token.ts';
import type { KeyRing } from '../flavor/keyring.ts';
import { tokenWithJoins } from '../flavor/node-name-claim.ts';
import type { FlavoredToken } from '../flavor/resources.ts';
import { withdrawal } from '../flavor/withdrawal.ts';
import { KeyRingUnavailableError } from '../kube/keyring-store.ts';
import type { IssuerConfig } from './config.ts';
import type { Caller, CallerAuth } from './defences/auth.ts';
import { addressKey, clientAddress, type TrustedProxies } from './defences/client-address.ts';
import type { RateLimiter } from './defences/rate-limit.ts';
import { IssuerError } from './errors.ts';
import type { IdempotencyCache } from './issuance/idempotency.ts';
import { issueIdempotently } from './issuance/idempotent-issue.ts';
import {
  discoveryInfo,
  findToken,
  flavoredTokenName,
  type IssuanceDeps,
  issueToken,
  OWNER_ANNOTATION,
  revokeToken,
  type TokenStatusView,
  tokenStatusView,
  tokenViewOf,
} from './issuance/issue.ts';
import type { IssueResult, IssuerMetrics } from './metrics.ts';
import { OPENAPI_DOCUMENT } from './openapi.ts';
import { registerPortal } from './portal/portal-routes.ts';
import { validateIssueRequest } from './request.ts';
import { type IssueResponse, issueResponse } from './response.ts';
import type { TokenFeed } from './tokens/token-feed.ts';
import { parseTokenListQuery, type TokenPage, tokenPage } from './tokens/token-list.ts';
import {
  DEFAULT_WATCH_SECONDS,
  parseTokenGetQuery,
  type TokenGetQuery,
  tokenEventStream,
  type WatchSlots,
} from './tokens/token-watch.ts';

/** What a replica remembers of an answer to a request with an Idempotency-Key. */
export interface RememberedIssue {
  response: IssueResponse;
  /** The FlavoredToken it is of: replayed only while that very record is neither revoked nor going. */
  recordUid: string;
}

interface IssuerContext {
  config: IssuerConfig;
  issuance: IssuanceDeps;
  auth: CallerAuth;
  idempotency: IdempotencyCache<RememberedIssue>;
  callerLimiter: RateLimiter;
  trustedProxies: TrustedProxies;
  metrics: IssuerMetrics;
  keyRing: { readonly loaded: boolean; get(): Promise<KeyRing> };
  now: () => Date;
  /** The FlavoredToken watch lists and watches read from (without it: lists ask the API server, no watches). */
  tokens: TokenFeed | undefined;
  watches: WatchSlots;
  /** Open watch streams, ended when the server closes. */
  streams: Set<PassThrough>;
}

const callers = new WeakMap<FastifyRequest, Caller>();

/** The authenticated caller of a /v1 request (set by the onRequest hook). */
export function callerOf(request: FastifyRequest): Caller | undefined {
  return callers.get(request);
}

export function registerRoutes(app: FastifyInstance, ctx: IssuerContext): void {
  app.get('/healthz', async () => ({ status: 'ok' }));
  app.get('/readyz', async () => {
    if (!ctx.keyRing.loaded) {
      try {
        await ctx.keyRing.get();
      } catch (error) {
        const why =
          error instanceof KeyRingUnavailableError
            ? error.message
            : 'the HMAC key ring is not loaded yet (see the log)';
        throw new IssuerError('Unavailable', `not ready: ${why}`);
      }
    }
    if (ctx.tokens && !ctx.tokens.synced) {
      throw new IssuerError(
        'Unavailable',
        'not ready: the FlavoredToken and NodeNameClaim caches have not synced yet',
      );
    }
    return { status: 'ok' };
  });
  app.get('/openapi.json', async () => OPENAPI_DOCUMENT);
  if (ctx.config.portal.enabled) registerPortal(app);
  // Open watches would hold app.close() for up to their timeout: end them first.
  app.addHook('preClose', async () => {
    for (const stream of [...ctx.streams]) stream.end();
  });

  app.register(
    async (v1) => {
      v1.addHook('onRequest', async (request, reply) => authenticate(ctx, request, reply));
      v1.post('/tokens', async (request, reply) => postToken(ctx, request, reply));
      // Every /v1 answer is about one caller: no cache may keep it for anyone else.
      v1.addHook('onSend', async (_request, reply) => {
        if (!reply.hasHeader('Cache-Control')) reply.header('Cache-Control', 'no-store');
      });
      v1.get('/tokens', async (request) => listCallerTokens(ctx, request));
      v1.get<{ Params: { id: string } }>('/tokens/:id', async (request, reply) => {
        const query = parseTokenGetQuery(request.query);
        if (query.watch === 'true') return watchToken(ctx, request, reply, query);
        const token = await authorisedToken(ctx, request, request.params.id, 'get');
        return viewOf(ctx, token);
      });
      v1.delete<{ Params: { id: string } }>('/tokens/:id', async (request) => {
        const token = await authorisedToken(ctx, request, request.params.id, 'delete');
        const view = await revokeToken(ctx.issuance, token);
        ctx.metrics.tokensRevoked.inc();
        request.log.info({ tokenID: view.tokenID, caller: callerOf(request)?.username }, 'token revoked');
        return view;
      });
      // No secret and no flavor (the cluster CA and API server), for any authenticated caller: a
      // portal fetches it once per cluster to bake into machine images beside the JoinConfiguration.
      v1.get('/discovery', async () => discoveryInfo(ctx.issuance));
      v1.get('/flavors', async (request) => {
        const caller = requireCaller(request);
        const flavors = await ctx.issuance.kube.listFlavorClasses();
        const allowed = await Promise.all(flavors.map((f) => ctx.auth.mayUse(caller, f.metadata.name ?? '')));
        return {
          items: flavors
            .filter((_, i) => allowed[i])
            .map((f) => ({ name: f.metadata.name ?? '', description: f.spec.description ?? null })),
        };
      });
    },
    { prefix: '/v1' },
  );
}

/** A token's view with its joins' records: from the issuer's watches, or read now until they synced. */
async function viewOf(ctx: IssuerContext, token: FlavoredToken): Promise<TokenStatusView> {
  const feed = ctx.tokens?.synced ? ctx.tokens : undefined;
  if (feed) return tokenStatusView(tokenWithJoins(token, feed.joinsOf(token)), ctx.now());
  return tokenViewOf(ctx.issuance, token, ctx.now());
}

async function authenticate(ctx: IssuerContext, request: FastifyRequest, reply: FastifyReply): Promise<void> {
  // The failed-authentication budget is kept per client address (the forwarded one behind a
  // trusted proxy), and spent before a review, so a flood of bad tokens cannot become a flood of
  // TokenReviews (auth-budget.ts).
  const address = addressKey(
    clientAddress(request.socket.remoteAddress, request.headers['x-forwarded-for'], ctx.trustedProxies),
  );
  let caller: Caller;
  try {
    caller = await ctx.auth.authenticate(request.headers.authorization, address);
  } catch (error) {
    if (error instanceof IssuerError && error.code === 'Unauthenticated') {
      ctx.metrics.authFailures.inc({ reason: 'unauthenticated' });
      reply.header('WWW-Authenticate', 'Bearer');
    }
    if (error instanceof IssuerError && error.code === 'RateLimited') {
      ctx.metrics.rateLimited.inc({ scope: 'address' });
    }
    throw error;
  }
  // Per identity (owner), not per name: see Caller.username.
  const decision = ctx.callerLimiter.take(caller.owner);
  if (!decision.allowed) {
    ctx.metrics.rateLimited.inc({ scope: 'caller' });
    throw new IssuerError(
      'RateLimited',
      `rate limit exceeded: retry in ${decision.retryAfterSeconds} s`,
      undefined,
      { retryAfterSeconds: decision.retryAfterSeconds },
    );
  }
  callers.set(request, caller);
}

/**
 * The caller's tokens (scope=own: those it issued and may still use the flavor of; scope=all:
 * every token, for a caller whose RBAC may list FlavoredTokens), a page at a time. Read from the
 * issuer's FlavoredToken watch, or from the API server until that has synced.
 */
async function listCallerTokens(ctx: IssuerContext, request: FastifyRequest): Promise<TokenPage> {
  const caller = requireCaller(request);
  const query = parseTokenListQuery(request.query);
  const all = query.scope === 'all';
  if (all && !(await ctx.auth.mayManageAny(caller, 'list'))) {
    ctx.metrics.authFailures.inc({ reason: 'forbidden' });
    throw new IssuerError(
      'Forbidden',
      `${caller.username} may not list every token: scope=all needs RBAC verb 'list' on flavoredtokens.nodeflavor.io (scope=own lists your own)`,
    );
  }
  const feed = ctx.tokens?.synced ? ctx.tokens : undefined;
  const [tokens, records] = feed
    ? [feed.list(), undefined]
    : await Promise.all([ctx.issuance.kube.listFlavoredTokens(), ctx.issuance.kube.listJoinRecords()]);
  let visible = all
    ? tokens
    : tokens.filter((t) => t.metadata.annotations?.[OWNER_ANNOTATION] === caller.owner);
  if (!all) {
    const flavors = [...new Set(visible.map((t) => t.spec.flavorClassName))];
    const allowed = new Set(
      (
        await Promise.all(flavors.map(async (f) => ((await ctx.auth.mayUse(caller, f)) ? f : undefined)))
      ).filter((f): f is string => f !== undefined),
    );
    visible = visible.filter((t) => allowed.has(t.spec.flavorClassName));
  }
  const now = ctx.now();
  return tokenPage(
    visible.map((t) => tokenStatusView(tokenWithJoins(t, feed ? feed.joinsOf(t) : (records ?? [])), now)),
    query,
  );
}

/** Server-sent events of one token's status (see token-watch.ts). */
async function watchToken(
  ctx: IssuerContext,
  request: FastifyRequest<{ Params: { id: string } }>,
  reply: FastifyReply,
  query: TokenGetQuery,
): Promise<FastifyReply> {
  const feed = ctx.tokens;
  if (!feed?.synced) {
    throw new IssuerError('Unavailable', 'watching is not available yet (the token cache is loading): retry');
  }
  const caller = requireCaller(request);
  const token = await authorisedToken(ctx, request, request.params.id, 'get');
  const release = ctx.watches.acquire(caller.owner);
  const name = token.metadata.name ?? '';
  const stream = tokenEventStream({
    token,
    cached: feed.get(name),
    subscribe: (listener) => feed.subscribe(name, listener),
    view: (t) => tokenStatusView(tokenWithJoins(t, feed.joinsOf(t)), ctx.now()),
    timeoutMs: (query.timeoutSeconds ?? DEFAULT_WATCH_SECONDS) * 1000,
    onEnd: () => {
      release();
      ctx.streams.delete(stream);
    },
  });
  ctx.streams.add(stream);
  // A client that goes away ends its stream at once (its slot is free again).
  // (The response's close: the request's own fires as soon as its body has been read.)
  reply.raw.on('close', () => stream.end());
  return reply
    .code(200)
    .header('Content-Type', 'text/event-stream; charset=utf-8')
    .header('Cache-Control', 'no-store')
    .header('X-Accel-Buffering', 'no')
    .send(stream);
}

function requireCaller(request: FastifyRequest): Caller {
  const caller = callerOf(request);
  if (!caller)
    throw new IssuerError('Unauthenticated', 'authentication required: send Authorization: Bearer <token>');
  return caller;
}

async function requireUse(ctx: IssuerContext, caller: Caller, flavor: string, denial: string): Promise<void> {
  if (await ctx.auth.mayUse(caller, flavor)) return;
  ctx.metrics.authFailures.inc({ reason: 'forbidden' });
  throw new IssuerError('Forbidden', denial);
}

function useHint(caller: Caller, flavor: string): string {
  return caller.via === 'jwt'
    ? `your token's flavors claim does not list '${flavor}'`
    : `it needs RBAC verb 'use' on flavorclasses.nodeflavor.io '${flavor}'`;
}

/**
 * The token behind `ref`, if the caller may see it: it issued the token (and may still use its
 * flavor, else 403), or its RBAC lets it `verb` FlavoredTokens. Anyone else gets the same 404 as
 * for a token that does not exist, after the same SubjectAccessReview: neither the answer nor
 * its timing tells whether another caller's token exists.
 */
async function authorisedToken(
  ctx: IssuerContext,
  request: FastifyRequest,
  ref: string,
  verb: 'get' | 'delete',
): Promise<FlavoredToken> {
  const caller = requireCaller(request);
  const token = await findToken(ctx.issuance, ref);
  if (token && token.metadata.annotations?.[OWNER_ANNOTATION] === caller.owner) {
    await requireUse(
      ctx,
      caller,
      token.spec.flavorClassName,
      `${caller.username} may not manage token '${ref}': it needs the right to use that token's flavor`,
    );
    return token;
  }
  const name = token?.metadata.name ?? (TOKEN_ID_PATTERN.test(ref) ? flavoredTokenName(ref) : ref);
  const mayManage = await ctx.auth.mayManageAny(caller, verb, name);
  if (token && mayManage) return token;
  throw new IssuerError('NotFound', `token '${ref}' not found: check the ID (kubectl flavor list)`);
}

async function postToken(
  ctx: IssuerContext,
  request: FastifyRequest,
  reply: FastifyReply,
): Promise<IssueResponse> {
  const started = process.hrtime.bigint();
  let result: IssueResult = 'error';
  try {
    const caller = requireCaller(request);
    if (request.body === undefined) {
      throw new IssuerError('UnsupportedMediaType', 'send the request as Content-Type: application/json');
    }
    const valid = validateIssueRequest(request.body, ctx.config.issuance, ctx.now());
    await requireUse(
      ctx,
      caller,
      valid.flavorClassName,
      `${caller.username} may not use FlavorClass '${valid.flavorClassName}': ${useHint(caller, valid.flavorClassName)}`,
    );
    const input = { ...valid, requestedBy: caller.username, owner: caller.owner };
    const key = request.headers['idempotency-key'];
    // With a key, the token is derived and recorded so that a retry on any replica gets it again
    // (ADR 0005); this replica's cache only spares it the work and shares a request in flight.
    let replayedByAnother = false;
    const produce = async (): Promise<RememberedIssue> => {
      const issued =
        typeof key === 'string'
          ? await issueIdempotently(ctx.issuance, input, key, ctx.config.idempotency.ttlSeconds * 1000)
          : { issued: await issueToken(ctx.issuance, input), replayed: false };
      replayedByAnother = issued.replayed;
      return { response: issueResponse(issued.issued), recordUid: issued.issued.recordUid };
    };
    // Revocation is final for remembered answers too: one whose record was revoked or deleted
    // since is not replayed; the request is answered as the record says (issueIdempotently: 409).
    const stillCurrent = async (remembered: RememberedIssue) =>
      withdrawal(await ctx.issuance.kube.getFlavoredToken(remembered.response.id), remembered.recordUid) ===
      undefined;
    const { value: answer, replayed } =
      typeof key === 'string'
        ? await ctx.idempotency.run(caller.owner, key, valid, produce, stillCurrent)
        : { value: await produce(), replayed: false };
    const value = answer.response;
    result = replayed || replayedByAnother ? 'replayed' : 'issued';
    request.log.info({ tokenID: value.tokenID, caller: caller.username, replayed }, 'token issued');
    reply.code(201).header('Cache-Control', 'no-store').header('Location', `/v1/tokens/${value.id}`);
    return value;
  } catch (error) {
    result = issueResultOf(error);
    throw error;
  } finally {
    ctx.metrics.tokensIssued.inc({ result });
    ctx.metrics.issueDuration.observe({ result }, Number(process.hrtime.bigint() - started) / 1e9);
  }
}

function issueResultOf(error: unknown): IssueResult {
  if (!(error instanceof IssuerError)) return 'error';
  switch (error.code) {
    case 'InvalidRequest':
    case 'UnsupportedMediaType':
    case 'PayloadTooLarge':
      return 'invalid';
    case 'Forbidden':
    case 'Unauthenticated':
      return 'unauthorized';
    case 'NotFound':
      return 'not_found';
    case 'Conflict':
      return 'conflict';
    default:
      return 'error';
  }
}
