// Authenticated fetch against the API server, for what client-node's typed clients do not do
// well: long watches with our own timeouts, metadata-only lists, streaming large lists.
// Authentication is exactly client-node's (applySecurityAuthentication: client certs, bearer
// tokens, exec plugins), so every identity a KubeConfig can express works here too. Every
// request has a deadline and obeys the KubeConfig's fence (deadlines.ts); a watch opts out of
// the deadline (`timeoutMs: 0`) and keeps its own inactivity watchdog instead.
import { HttpMethod, type KubeConfig, RequestContext } from '@kubernetes/client-node';
import { type Dispatcher, fetch, type Response, request as undiciRequest } from 'undici';
import { requestSignal } from './deadlines.ts';
import { KubeError, toKubeError } from './kube-error.ts';

interface KubeFetchInit {
  method?: 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE';
  query?: Record<string, string | number | boolean | undefined>;
  headers?: Record<string, string>;
  body?: string;
  signal?: AbortSignal;
  /** Overrides the KubeConfig's deadline; 0: none (watches). The deadline covers the body too. */
  timeoutMs?: number;
}

/** Sees every API request's verb and HTTP status (0 when no answer came): for a metric. */
export type KubeRequestObserver = (method: string, status: number) => void;
let requestObserver: KubeRequestObserver | undefined;

/** One process-wide observer, as client-go registers its request metrics once per process. */
export function observeKubeRequests(observer: KubeRequestObserver | undefined): void {
  requestObserver = observer;
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
  const method = (init.method ?? 'GET') as HttpMethod;
  const context = new RequestContext(url.toString(), method ?? HttpMethod.GET);
  // First, so that a closed fence fails before credentials are even applied.
  const signal = requestSignal(kubeConfig, { signal: init.signal, timeoutMs: init.timeoutMs });
  await kubeConfig.applySecurityAuthentication(context);
  try {
    const response = await fetch(url, {
      method,
      headers: { ...context.getHeaders(), ...init.headers },
      body: init.body,
      dispatcher: context.getDispatcher(),
      signal,
    });
    requestObserver?.(method, response.status);
    return response;
  } catch (error) {
    requestObserver?.(method, 0);
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

/**
 * One JSON request; a non-2xx answer becomes a KubeError carrying the API server's Status
 * reason and message (which never echo request bodies, so no secret can leak through them).
 */
export async function kubeJson<T = unknown>(
  kubeConfig: KubeConfig,
  method: NonNullable<KubeFetchInit['method']>,
  path: string,
  options: { body?: unknown; contentType?: string; query?: KubeFetchInit['query']; action?: string } = {},
): Promise<T> {
  const action = options.action ?? `${method} ${path}`;
  let response: Response;
  let text: string;
  try {
    response = await kubeFetch(kubeConfig, path, {
      method,
      query: options.query,
      headers: {
        Accept: 'application/json',
        ...(options.body === undefined ? {} : { 'Content-Type': options.contentType ?? 'application/json' }),
      },
      body: options.body === undefined ? undefined : JSON.stringify(options.body),
    });
    text = await response.text();
  } catch (error) {
    throw toKubeError(error, action);
  }
  if (response.status >= 200 && response.status < 300) return (text ? JSON.parse(text) : undefined) as T;
  let status: { reason?: string; message?: string; details?: { causes?: { message?: string }[] } } = {};
  try {
    status = JSON.parse(text) as typeof status;
  } catch {
    // not a Status object
  }
  // A failed JSON patch `test` is a bare 422 Invalid, without causes (checked on 1.37): a field
  // the schema refuses always comes with causes naming it.
  const testFailed =
    response.status === 422 && status.reason === 'Invalid' && (status.details?.causes ?? []).length === 0;
  throw new KubeError(
    response.status,
    status.reason ?? `HTTP${response.status}`,
    `${action}: ${status.message ?? `HTTP ${response.status}`}`,
    testFailed,
  );
}

/**
 * kubeJson over undici's `request` instead of WHATWG `fetch`: the same authentication, shared
 * connection, deadline, request observer and errors, without fetch's Request/Headers/stream
 * machinery (about half of the issuer's HTTP client CPU per token in the P3 profile). For the
 * token issuer's three writes per issuance; the answer is parsed JSON, as kubeJson's.
 */
export async function kubeCall<T = unknown>(
  kubeConfig: KubeConfig,
  method: NonNullable<KubeFetchInit['method']>,
  path: string,
  options: { body?: unknown; contentType?: string; action?: string } = {},
): Promise<T> {
  const action = options.action ?? `${method} ${path}`;
  let status: number;
  let text: string;
  try {
    const cluster = kubeConfig.getCurrentCluster();
    if (!cluster) throw new Error('kubeconfig has no current cluster');
    const url = cluster.server.replace(/\/$/, '') + path;
    const context = new RequestContext(url, method as HttpMethod);
    const signal = requestSignal(kubeConfig);
    await kubeConfig.applySecurityAuthentication(context);
    try {
      const response = await undiciRequest(url, {
        method,
        headers: {
          ...context.getHeaders(),
          Accept: 'application/json',
          ...(options.body === undefined
            ? {}
            : { 'Content-Type': options.contentType ?? 'application/json' }),
        },
        body: options.body === undefined ? null : JSON.stringify(options.body),
        dispatcher: context.getDispatcher() as Dispatcher | undefined,
        ...(signal ? { signal } : {}),
      });
      status = response.statusCode;
      text = await response.body.text();
      requestObserver?.(method, status);
    } catch (error) {
      requestObserver?.(method, 0);
      throw error;
    }
  } catch (error) {
    throw toKubeError(error, action);
  }
  if (status >= 200 && status < 300) return (text ? JSON.parse(text) : undefined) as T;
  let answer: { reason?: string; message?: string } = {};
  try {
    answer = JSON.parse(text) as typeof answer;
  } catch {
    // not a Status object
  }
  throw new KubeError(
    status,
    answer.reason ?? `HTTP${status}`,
    `${action}: ${answer.message ?? `HTTP ${status}`}`,
  );
}
