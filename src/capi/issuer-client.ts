// The workload cluster's token issuer, as `nodeflavor capi` calls it from the management cluster:
// POST /v1/tokens (with an Idempotency-Key, ADR 0005), GET /v1/tokens/{id}, DELETE /v1/tokens/{id}
// and GET /v1/tokens (its own tokens). HTTPS to the URL of the cluster's access Secret, trusting
// its CA, with its bearer. The key ring never leaves the workload cluster: this side only ever holds
// what the issuer answers. Every failure becomes an IssuerCallError whose message says what to do
// and never holds a token (the issuer's own messages never do; ours never quote a body).
import { Agent, type Dispatcher, request } from 'undici';
import { Secret } from '../flavor/secret.ts';
import type { IssueRequestBody } from './decide.ts';
import type { IssuedMaterial } from './fill.ts';
import type { TokenStatus } from './verification.ts';

export interface IssuerAccess {
  /** https://host[:port], where the issuer API answers. */
  url: string;
  /** PEM of the CA its serving certificate chains to; the system's trust store when absent. */
  caPem: string | undefined;
  /** A bearer the issuer accepts (a ServiceAccount token for its audience, or a JWT). */
  token: Secret;
}

/** What the issuer's answer means for the caller. */
export type IssuerFailure =
  | 'unreachable' // no answer, TLS failure, timeout, 5xx: try again later
  | 'unauthenticated' // 401: the bearer is not (any longer) accepted
  | 'forbidden' // 403: the caller may not use that flavor
  | 'notFound' // 404: no such FlavorClass (POST), or no such token
  | 'conflict' // 409: the Idempotency-Key cannot be replayed (too old, other body, token revoked)
  | 'rateLimited' // 429: the caller's budget is spent for now
  | 'invalid'; // 400 and the like: the request itself is refused

export class IssuerCallError extends Error {
  readonly failure: IssuerFailure;
  readonly status: number;
  readonly retryAfterMs: number | undefined;

  constructor(failure: IssuerFailure, status: number, message: string, retryAfterMs?: number) {
    super(message);
    this.name = 'IssuerCallError';
    this.failure = failure;
    this.status = status;
    this.retryAfterMs = retryAfterMs;
  }
}

export interface IssuedToken extends IssuedMaterial {
  /** `ft-<tokenID>`: the handle for GET and DELETE. */
  id: string;
}

/** One page of the caller's tokens (GET /v1/tokens). */
export interface TokenListPage {
  items: (TokenStatus & { id: string; tokenID: string | null; description: string | null })[];
  continue: string | null;
}

const REQUEST_TIMEOUT_MS = 15_000;

function failureOf(status: number): IssuerFailure {
  if (status === 401) return 'unauthenticated';
  if (status === 403) return 'forbidden';
  if (status === 404) return 'notFound';
  if (status === 409) return 'conflict';
  if (status === 429) return 'rateLimited';
  if (status >= 500 || status === 408) return 'unreachable';
  return 'invalid';
}

export class IssuerClient {
  private readonly access: IssuerAccess;
  private readonly dispatcher: Dispatcher;
  private readonly base: string;
  /** After a 429: no request before this (ms since the epoch), so a spent budget is not spent again. */
  private blockedUntil = 0;

  constructor(access: IssuerAccess) {
    this.access = access;
    this.base = access.url.replace(/\/+$/, '');
    this.dispatcher = new Agent({
      connect: access.caPem === undefined ? {} : { ca: access.caPem },
      keepAliveTimeout: 30_000,
    });
  }

  async issue(body: IssueRequestBody, idempotencyKey: string): Promise<IssuedToken> {
    const answer = await this.call('POST', '/v1/tokens', body, { 'Idempotency-Key': idempotencyKey });
    const parsed = answer as Record<string, unknown>;
    const text = (key: string): string => {
      const value = parsed[key];
      if (typeof value !== 'string' || value === '')
        throw new IssuerCallError(
          'invalid',
          200,
          `the issuer's answer lacks ${key}: is it a nodeflavor issuer?`,
        );
      return value;
    };
    if (parsed.attested === true)
      throw new IssuerCallError(
        'invalid',
        200,
        'the issuer answered an attested token, which a KubeadmConfig cannot carry',
      );
    return {
      id: text('id'),
      tokenID: text('tokenID'),
      bootstrapToken: new Secret(text('bootstrapToken')),
      joinConfiguration: new Secret(text('joinConfiguration')),
      discoveryKubeconfig: text('discoveryKubeconfig'),
      discoveryKubeconfigPath: text('discoveryKubeconfigPath'),
    };
  }

  async status(tokenId: string): Promise<TokenStatus> {
    return (await this.call('GET', `/v1/tokens/${encodeURIComponent(tokenId)}`)) as TokenStatus;
  }

  /** Revokes the token; one that is gone already (404) is fine. */
  async revoke(tokenId: string): Promise<void> {
    try {
      await this.call('DELETE', `/v1/tokens/${encodeURIComponent(tokenId)}`);
    } catch (error) {
      if (error instanceof IssuerCallError && error.failure === 'notFound') return;
      throw error;
    }
  }

  /** The caller's own tokens in these phases, a page at a time (newest first). */
  async list(phases: string[], continueToken?: string): Promise<TokenListPage> {
    const query = new URLSearchParams({ phase: phases.join(','), limit: '500' });
    if (continueToken) query.set('continue', continueToken);
    return (await this.call('GET', `/v1/tokens?${query.toString()}`)) as TokenListPage;
  }

  close(): void {
    void this.dispatcher.close();
  }

  private async call(
    method: 'GET' | 'POST' | 'DELETE',
    path: string,
    body?: unknown,
    headers: Record<string, string> = {},
  ): Promise<unknown> {
    const wait = this.blockedUntil - Date.now();
    if (wait > 0)
      throw new IssuerCallError('rateLimited', 429, 'the issuer asked this caller to slow down', wait);
    let response: Dispatcher.ResponseData;
    try {
      response = await request(`${this.base}${path}`, {
        method,
        dispatcher: this.dispatcher,
        headers: {
          Authorization: `Bearer ${this.access.token.reveal()}`,
          Accept: 'application/json',
          ...(body === undefined ? {} : { 'Content-Type': 'application/json' }),
          ...headers,
        },
        body: body === undefined ? null : JSON.stringify(body),
        signal: AbortSignal.timeout(REQUEST_TIMEOUT_MS),
      });
    } catch (error) {
      const cause = (error as { cause?: { code?: string; message?: string } }).cause;
      const what = cause?.code ?? (error as Error).name;
      throw new IssuerCallError(
        'unreachable',
        0,
        `the issuer at ${this.base} did not answer (${what}: ${cause?.message ?? (error as Error).message}): check the url and ca.crt of the access Secret and that the issuer runs`,
      );
    }
    const text = await response.body.text();
    if (response.statusCode >= 200 && response.statusCode < 300) return text ? JSON.parse(text) : undefined;
    let message = `HTTP ${response.statusCode}`;
    try {
      const parsed = JSON.parse(text) as { error?: { message?: string } };
      if (typeof parsed.error?.message === 'string') message = parsed.error.message;
    } catch {
      // not the issuer's error shape (a proxy's page): the status says enough
    }
    const retryAfter = Number(response.headers['retry-after']);
    if (response.statusCode === 429)
      this.blockedUntil =
        Date.now() + (Number.isFinite(retryAfter) && retryAfter > 0 ? retryAfter * 1000 : 1000);
    throw new IssuerCallError(
      failureOf(response.statusCode),
      response.statusCode,
      `the issuer answered ${response.statusCode}: ${message}`,
      Number.isFinite(retryAfter) && retryAfter > 0 ? retryAfter * 1000 : undefined,
    );
  }
}
