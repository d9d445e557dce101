// Authenticated fetch against the API server, for what client-node's typed clients do not do
// well: long watches with our own timeouts, metadata-only lists, streaming large lists.
// Authentication is the KubeConfig's own (applySecurityAuthentication: client certs, bearer
// tokens; exec plugins where client-node's KubeConfig is used), so every identity a KubeConfig
// can express works here too. Every
// request has a deadline and obeys the KubeConfig's fence (deadlines.ts); a watch opts out of
// the deadline (`timeoutMs: 0`) and keeps its own inactivity watchdog instead.
import { type Dispatcher, fetch, type Response, request as undiciRequest } from 'undici';
import { requestSignal } from './deadlines.ts';
import { KubeError, statusError, toKubeError } from './kube-error.ts';
import type { KubeConfig, RequestAuthContext } from './kubeconfig.ts';

/** What applySecurityAuthentication fills in for one request. */
class AuthContext implements RequestAuthContext {
  readonly headers: Record<string, string> = {};
  dispatcher: Dispatcher | undefined;
  #signal: AbortSignal | undefined;

  setHeaderParam(key: string, value: string): void {
    this.headers[key] = value;
  }

  setDispatcher(dispatcher: unknown): void {
    this.dispatcher = dispatcher as Dispatcher;
  }

  getSignal(): AbortSignal | undefined {
    return this.#signal;
  }

  setSignal(signal: AbortSignal): void {
    this.#signal = signal;
  }
}

export interface KubeFetchInit {
  method?: 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE';
  query?: Record<string, string | number | boolean | undefined>;
  headers?: Record<string, string>;
  body?: string;
  signal?: AbortSignal;
  /** Overrides the KubeConfig's deadline; 0: none (watches). The deadline covers the body too. */
  timeoutMs?: number;
}

/**
 * Sees every API request's verb, HTTP status (0 when no answer came) and the resource it names
 * (`apiResourceOf`): for a metric.
 */
export type KubeRequestObserver = (method: string, status: number, resource: string) => void;
let requestObserver: KubeRequestObserver | undefined;

/** One process-wide observer, as client-go registers its request metrics once per process. */
export function observeKubeRequests(observer: KubeRequestObserver | undefined): void {
  requestObserver = observer;
}

/**
 * The resource an API path names, with its subresource (`nodes`, `flavoredtokens/status`,
 * `certificatesigningrequests/approval`): never a name or a namespace, so a metric label stays
 * bounded. Anything else (discovery, /version) is `other`.
 */
export function apiResourceOf(path: string): string {
  const parts = path.split('?')[0]?.split('/').filter(Boolean) ?? [];
  let rest: string[];
  if (parts[0] === 'api' && parts.length >= 3) rest = parts.slice(2);
  else if (parts[0] === 'apis' && parts.length >= 4) rest = parts.slice(3);
  else return 'other';
  if (rest[0] === 'namespaces' && rest.length >= 3) rest = rest.slice(2);
  const [resource, , subresource] = rest;
  if (!resource) return 'other';
  return subresource ? `${resource}/${subresource}` : resource;
}

export async function kubeFetch(
  kubeConfig: KubeConfig,
  path: string,
  init: KubeFetchInit = {},
): Promise<Response> {
  const cluster = kubeConfig.getCurrentCluster();
  if (!cluster) throw new Error('kubeconfig has no current cluster');
  const url = new URL(cluster.server.replace(/\/$/, '') + path);
  for (const [key, value] of Object.entries(init.query ?? {})) {
    if (value !== undefined) url.searchParams.set(key, String(value));
  }
  const method = init.method ?? 'GET';
  const context = new AuthContext();
  // First, so that a closed fence fails before credentials are even applied.
  const signal = requestSignal(kubeConfig, { signal: init.signal, timeoutMs: init.timeoutMs });
  await kubeConfig.applySecurityAuthentication(context);
  try {
    const response = await fetch(url, {
      method,
      headers: { ...context.headers, ...init.headers },
      body: init.body,
      ...(context.dispatcher ? { dispatcher: context.dispatcher } : {}),
      signal,
    });
    requestObserver?.(method, response.status, apiResourceOf(path));
    return response;
  } catch (error) {
    requestObserver?.(method, 0, apiResourceOf(path));
    throw error;
  }
}

/** Yields the lines of a streaming response body (watch events are one JSON object per line). */
export async function* responseLines(response: Response): AsyncGenerator<string> {
  if (!response.body) return;
  const decoder = new TextDecoder();
  let buffered = '';
  for await (const chunk of response.body) {
    buffered += decoder.decode(chunk, { stream: true });
    let newline = buffered.indexOf('\n');
    while (newline >= 0) {
      const line = buffered.slice(0, newline);
      buffered = buffered.slice(newline + 1);
      if (line.trim() !== '') yield line;
      newline = buffered.indexOf('\n');
    }
  }
  buffered += decoder.decode();
  if (buffered.trim() !== '') yield buffered;
}

type JsonOptions = {
  body?: unknown;
  contentType?: string;
  query?: KubeFetchInit['query'];
  action?: string;
  /** Overrides the KubeConfig's deadline (an answer needed within a caller's own deadline). */
  timeoutMs?: number;
};

/**
 * One JSON request over undici's `request` rather than WHATWG `fetch` (kubeFetch, which watches
 * need for streaming): the same authentication, shared connection, deadline and observer,
 * without fetch's Request/Headers/stream machinery (about half of the issuer's HTTP client CPU
 * per token in the P3 profile). The deadline covers reading the answer too.
 */
async function jsonRequest(
  kubeConfig: KubeConfig,
  method: NonNullable<KubeFetchInit['method']>,
  path: string,
  options: JsonOptions,
  action: string,
): Promise<{ status: number; text: string }> {
  try {
    const cluster = kubeConfig.getCurrentCluster();
    if (!cluster) throw new Error('kubeconfig has no current cluster');
    const url = new URL(cluster.server.replace(/\/$/, '') + path);
    for (const [key, value] of Object.entries(options.query ?? {})) {
      if (value !== undefined) url.searchParams.set(key, String(value));
    }
    const context = new AuthContext();
    // First, so that a closed fence fails before credentials are even applied.
    const signal = requestSignal(kubeConfig, { timeoutMs: options.timeoutMs });
    await kubeConfig.applySecurityAuthentication(context);
    try {
      const response = await undiciRequest(url, {
        method,
        headers: {
          ...context.headers,
          Accept: 'application/json',
          ...(options.body === undefined
            ? {}
            : { 'Content-Type': options.contentType ?? 'application/json' }),
        },
        body: options.body === undefined ? null : JSON.stringify(options.body),
        ...(context.dispatcher ? { dispatcher: context.dispatcher } : {}),
        ...(signal ? { signal } : {}),
      });
      const text = await response.body.text();
      requestObserver?.(method, response.statusCode, apiResourceOf(path));
      return { status: response.statusCode, text };
    } catch (error) {
      requestObserver?.(method, 0, apiResourceOf(path));
      throw error;
    }
  } catch (error) {
    throw toKubeError(error, action);
  }
}

/**
 * One JSON request; a non-2xx answer becomes a KubeError carrying the API server's Status
 * reason and message (which never echo request bodies, so no secret can leak through them).
 */
export async function kubeJson<T = unknown>(
  kubeConfig: KubeConfig,
  method: NonNullable<KubeFetchInit['method']>,
  path: string,
  options: JsonOptions = {},
): Promise<T> {
  const action = options.action ?? `${method} ${path}`;
  const { status: code, text } = await jsonRequest(kubeConfig, method, path, options, action);
  if (code >= 200 && code < 300) return (text ? JSON.parse(text) : undefined) as T;
  let status: { reason?: string; message?: string; details?: { causes?: unknown[] } } = {};
  try {
    status = JSON.parse(text) as typeof status;
  } catch {
    // not a Status object
  }
  // A failed JSON patch `test` is a bare 422 Invalid, without causes (checked on 1.37): a field
  // the schema refuses always comes with causes naming it.
  const testFailed =
    code === 422 && status.reason === 'Invalid' && (status.details?.causes ?? []).length === 0;
  throw new KubeError(
    code,
    status.reason ?? `HTTP${code}`,
    `${action}: ${status.message ?? `HTTP ${code}`}`,
    testFailed,
  );
}

/**
 * kubeJson whose errors read `action: HTTP 404 NotFound: <Status message>` (toKubeError's form):
 * for the reads and writes that used client-node's typed clients, whose errors read so.
 */
export async function kubeCall<T = unknown>(
  kubeConfig: KubeConfig,
  method: NonNullable<KubeFetchInit['method']>,
  path: string,
  options: JsonOptions & { action: string },
): Promise<T> {
  const { status, text } = await jsonRequest(kubeConfig, method, path, options, options.action);
  if (status >= 200 && status < 300) return (text ? JSON.parse(text) : undefined) as T;
  throw statusError(status, text, options.action);
}
