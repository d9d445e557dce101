// One small error type for every Kubernetes call nodeflavor makes. From an HTTP answer (ours, or
// client-node 2's ApiException, whose message carries the whole response, headers and body) we
// keep only the HTTP status, the Status reason and the Status message, which the API server
// writes for humans and which never holds request data such as a Secret's values.

/**
 * status 0 means no answer came: the API server was not reached (DNS, TCP, TLS; reason
 * Unreachable), did not answer within the request's deadline (Timeout), or the request was
 * cancelled because this replica stopped leading (NotLeader).
 */
export class KubeError extends Error {
  readonly status: number;
  /** metav1.Status reason, e.g. NotFound, AlreadyExists, Forbidden, Conflict; or Unreachable. */
  readonly reason: string;
  /**
   * A JSON patch `test` operation failed (the object changed since it was read). The API server
   * says only "422 Invalid" with no causes; an object the schema refuses has causes.
   */
  readonly patchTestFailed: boolean;

  constructor(status: number, reason: string, message: string, patchTestFailed = false) {
    super(message);
    this.name = 'KubeError';
    this.status = status;
    this.reason = reason;
    this.patchTestFailed = patchTestFailed;
  }
}

interface StatusBody {
  reason?: unknown;
  message?: unknown;
}

/** The metav1.Status in an ApiException body: an object, a JSON string, or nothing. */
function statusOf(body: unknown): StatusBody {
  if (typeof body === 'string') {
    try {
      const parsed: unknown = JSON.parse(body);
      return typeof parsed === 'object' && parsed !== null ? (parsed as StatusBody) : {};
    } catch {
      return {};
    }
  }
  return typeof body === 'object' && body !== null ? (body as StatusBody) : {};
}

const REASON_BY_STATUS: Readonly<Record<number, string>> = {
  400: 'BadRequest',
  401: 'Unauthorized',
  403: 'Forbidden',
  404: 'NotFound',
  409: 'Conflict',
  410: 'Gone',
  422: 'Invalid',
  429: 'TooManyRequests',
  500: 'InternalError',
  503: 'ServiceUnavailable',
  504: 'Timeout',
};

/** A non-2xx answer as a KubeError: `action: HTTP 404 NotFound: <the Status message>`. */
export function statusError(code: number, body: unknown, action: string): KubeError {
  const status = statusOf(body);
  const reason =
    typeof status.reason === 'string' && status.reason !== ''
      ? status.reason
      : (REASON_BY_STATUS[code] ?? 'Unknown');
  const detail = typeof status.message === 'string' && status.message !== '' ? `: ${status.message}` : '';
  return new KubeError(code, reason, `${action}: HTTP ${code} ${reason}${detail}`);
}

/** client-node's ApiException, recognised by shape: importing client-node to test it would load all of it. */
function isApiException(error: unknown): error is { code: number; body: unknown } {
  return (
    error instanceof Error &&
    error.constructor.name === 'ApiException' &&
    typeof (error as { code?: unknown }).code === 'number'
  );
}

/** Maps whatever a Kubernetes call threw to a KubeError; `action` says what we were doing. */
export function toKubeError(error: unknown, action: string): KubeError {
  if (error instanceof KubeError) return error;
  if (isApiException(error)) return statusError(Number(error.code), error.body, action);
  // Not an HTTP answer: the request never got one (connection refused, TLS, DNS, timeout).
  if (error instanceof Error && error.name === 'TimeoutError')
    return new KubeError(0, 'Timeout', `${action}: the Kubernetes API server did not answer in time`);
  if (error instanceof Error && error.name === 'FenceClosedError')
    return new KubeError(0, 'NotLeader', `${action}: ${error.message}`);
  const why = error instanceof Error ? (firstCauseMessage(error) ?? error.message) : String(error);
  return new KubeError(0, 'Unreachable', `${action}: the Kubernetes API server is unreachable (${why})`);
}

/** undici's `fetch failed` hides the useful part (ECONNREFUSED ...) in `cause`. */
function firstCauseMessage(error: Error): string | undefined {
  const cause = (error as { cause?: unknown }).cause;
  return cause instanceof Error ? cause.message : undefined;
}

export function isNotFound(error: unknown): boolean {
  return error instanceof KubeError && error.status === 404;
}

/** The answer, or undefined when the object is not there (404); any other failure is thrown. */
export async function orUndefinedIfNotFound<T>(pending: Promise<T>): Promise<T | undefined> {
  try {
    return await pending;
  } catch (error) {
    if (isNotFound(error)) return undefined;
    throw error;
  }
}

export function isAlreadyExists(error: unknown): boolean {
  return error instanceof KubeError && error.status === 409;
}
