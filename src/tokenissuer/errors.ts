// The issuer's errors: a code a program can switch on, the HTTP status it maps to, and a message
// that tells a human what to do next. Messages never hold a token, a flavor token or a key.
import { KeyRingUnavailableError } from '../kube/keyring-store.ts';
import { KubeError } from '../runtime/kube-error.ts';

export const ERROR_STATUS = {
  InvalidRequest: 400,
  Unauthenticated: 401,
  Forbidden: 403,
  NotFound: 404,
  RequestTimeout: 408,
  Conflict: 409,
  Gone: 410,
  PayloadTooLarge: 413,
  UnsupportedMediaType: 415,
  RateLimited: 429,
  Internal: 500,
  Unavailable: 503,
} as const;
export type ErrorCode = keyof typeof ERROR_STATUS;

/** A field that failed validation: its JSON path (dotted) and why. */
export interface FieldError {
  field: string;
  message: string;
}

export class IssuerError extends Error {
  readonly code: ErrorCode;
  readonly fields: FieldError[] | undefined;
  /** For 429: whole seconds until a retry may succeed (the Retry-After header). */
  readonly retryAfterSeconds: number | undefined;

  constructor(
    code: ErrorCode,
    message: string,
    fields?: FieldError[],
    options: { retryAfterSeconds?: number } = {},
  ) {
    super(message);
    this.name = 'IssuerError';
    this.code = code;
    this.fields = fields;
    this.retryAfterSeconds = options.retryAfterSeconds;
  }

  get status(): number {
    return ERROR_STATUS[this.code];
  }
}

/** The JSON body of every error answer. */
interface ErrorBody {
  error: { code: ErrorCode; message: string; fields?: FieldError[] };
}

export function errorBody(error: IssuerError): ErrorBody {
  return {
    error: {
      code: error.code,
      message: error.message,
      ...(error.fields && error.fields.length > 0 ? { fields: error.fields } : {}),
    },
  };
}

/**
 * A failed Kubernetes call the caller could not have avoided: the API server is down (503), or
 * the issuer itself lacks a permission or met something unexpected (500, with the reason so that
 * an operator can fix the RBAC). Expected answers (404 FlavorClass, ...) are handled where they occur.
 */
export function fromKubeError(error: KubeError): IssuerError {
  if (error.status === 0 || error.status === 503 || error.status === 504 || error.status === 429) {
    return new IssuerError('Unavailable', `${error.message}: retry later`);
  }
  if (error.status === 401 || error.status === 403) {
    return new IssuerError('Internal', `${error.message} (check the token issuer's RBAC)`);
  }
  return new IssuerError('Internal', error.message);
}

/** Any thrown value as an IssuerError; unknown errors get a generic message (details go to the log). */
export function toIssuerError(error: unknown): IssuerError {
  if (error instanceof IssuerError) return error;
  // Its message already says what an operator must do (restore the Secret); 503 until then.
  if (error instanceof KeyRingUnavailableError) return new IssuerError('Unavailable', error.message);
  if (error instanceof KubeError) return fromKubeError(error);
  return new IssuerError('Internal', 'internal error: see the token issuer log');
}
