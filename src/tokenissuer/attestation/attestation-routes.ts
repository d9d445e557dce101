// POST /v1/attestations/{tokenId}/challenge and .../answer (ADR 0014). A node has no credential
// but its TPM, so these are the issuer's only unauthenticated /v1 routes: each client address has
// a small budget of them, all addresses together a larger one per issuer process (a flood from
// many addresses, or from behind one proxy, still reaches the API server at a bounded rate), a
// refusal is written to the token at most once a minute, and the routes exist only where attested
// joins are set up. The sealed secrets have the same shape for every
// flavor; a challenge's `quote` says whether the flavor requires a measured boot state (and which
// PCRs), which the machine must know to answer.
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { addressKey, clientAddress, type TrustedProxies } from '../defences/client-address.ts';
import type { RateLimiter } from '../defences/rate-limit.ts';
import { IssuerError } from '../errors.ts';
import type { IssuerMetrics } from '../metrics.ts';
import { type AttestationDeps, answer, challenge } from './attestation.ts';

interface AttestationRoutesContext {
  deps: AttestationDeps;
  perAddress: RateLimiter;
  /** One bucket for every address together (key TOTAL). */
  total: RateLimiter;
  trustedProxies: TrustedProxies;
  metrics: IssuerMetrics;
}

export function registerAttestationRoutes(app: FastifyInstance, ctx: AttestationRoutesContext): void {
  app.register(
    async (attest) => {
      attest.addHook('onRequest', async (request) => spendBudget(ctx, request));
      attest.addHook('onSend', async (_request, reply) => {
        reply.header('Cache-Control', 'no-store');
      });
      attest.post<{ Params: { tokenId: string } }>('/:tokenId/challenge', async (request) =>
        challenge(ctx.deps, request.params.tokenId, requireBody(request.body)),
      );
      attest.post<{ Params: { tokenId: string } }>('/:tokenId/answer', async (request) =>
        answer(ctx.deps, request.params.tokenId, requireBody(request.body)),
      );
    },
    { prefix: '/v1/attestations' },
  );
}

function requireBody(body: unknown): unknown {
  if (body === undefined)
    throw new IssuerError('UnsupportedMediaType', 'send the request as Content-Type: application/json');
  return body;
}

const TOTAL = 'all';

function spendBudget(ctx: AttestationRoutesContext, request: FastifyRequest): void {
  const address = addressKey(
    clientAddress(request.socket.remoteAddress, request.headers['x-forwarded-for'], ctx.trustedProxies),
  );
  const perAddress = ctx.perAddress.take(address);
  // An address over its own budget spends nothing of everyone's.
  const decision = perAddress.allowed ? ctx.total.take(TOTAL) : perAddress;
  if (decision.allowed) return;
  if (perAddress.allowed) ctx.perAddress.refund(address);
  ctx.metrics.rateLimited.inc({ scope: perAddress.allowed ? 'attestation-total' : 'attestation' });
  throw new IssuerError(
    'RateLimited',
    `rate limit exceeded: retry in ${decision.retryAfterSeconds} s`,
    undefined,
    {
      retryAfterSeconds: decision.retryAfterSeconds,
    },
  );
}
