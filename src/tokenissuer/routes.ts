// The token issuer's HTTP routes. Every /v1 request is authenticated (and rate limited) in an
// onRequest hook, before its body is even read; each handler then validates, authorises against
// the flavor, and calls the issuance library. Answers that carry secrets are marked no-store.
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { TOKEN_ID_PATTERN } from '../flavor/bootstrap-token.ts';
import type { KeyRing } from '../flavor/keyring.ts';
import type { FlavoredToken } from '../flavor/resources.ts';
import { KeyRingUnavailableError } from '../kube/keyring-store.ts';
import type { Caller, CallerAuth } from './auth.ts';
import { addressKey, clientAddress, type TrustedProxies } from './client-address.ts';
import type { IssuerConfig } from './config.ts';
import { IssuerError } from './errors.ts';
import type { IdempotencyCache } from './idempotency.ts';
import {
  discoveryInfo,
  findToken,
  flavoredTokenName,
  type IssuanceDeps,
  issueToken,
  OWNER_ANNOTATION,
  revokeToken,
  tokenStatusView,
} from './issue.ts';
import type { IssueResult, IssuerMetrics } from './metrics.ts';
import { OPENAPI_DOCUMENT } from './openapi.ts';
import type { RateLimiter } from './rate-limit.ts';
import { validateIssueRequest } from './request.ts';
import { type IssueResponse, issueResponse } from './response.ts';

export interface IssuerContext {
  config: IssuerConfig;
  issuance: IssuanceDeps;
  auth: CallerAuth;
  idempotency: IdempotencyCache<IssueResponse>;
  callerLimiter: RateLimiter;
  trustedProxies: TrustedProxies;
  metrics: IssuerMetrics;
  keyRing: { readonly loaded: boolean; get(): Promise<KeyRing> };
  now: () => Date;
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
    return { status: 'ok' };
  });
  app.get('/openapi.json', async () => OPENAPI_DOCUMENT);

  app.register(
    async (v1) => {
      v1.addHook('onRequest', async (request, reply) => authenticate(ctx, request, reply));
      v1.post('/tokens', async (request, reply) => postToken(ctx, request, reply));
      v1.get<{ Params: { id: string } }>('/tokens/:id', async (request) => {
        const token = await authorisedToken(ctx, request, request.params.id, 'get');
        return tokenStatusView(token, ctx.now());
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
  const decision = ctx.callerLimiter.take(caller.username);
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
    const produce = async () =>
      issueResponse(
        await issueToken(ctx.issuance, { ...valid, requestedBy: caller.username, owner: caller.owner }),
      );
    const key = request.headers['idempotency-key'];
    const { value, replayed } =
      typeof key === 'string'
        ? await ctx.idempotency.run(caller.username, key, valid, produce)
        : { value: await produce(), replayed: false };
    result = replayed ? 'replayed' : 'issued';
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
