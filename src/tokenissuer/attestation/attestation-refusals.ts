// A refused attestation, as the issuer answers and records it (ADR 0014). The routes are
// unauthenticated, so a flood of refusals must cost the API server no writes: every refusal is
// counted (the metric), but one worth a look is written to the token (the attestation-refused
// annotation, and a Warning Event) at most once a minute per token, across concurrent requests and
// replicas: the write is conditioned on the resourceVersion the last record's age was judged on,
// so of requests that all saw an old record one write lands and the others (409) are only counted;
// one that saw a recent record does not write at all. Each process also sends at most one such
// write per token a minute (a memo that only saves requests: the decision is the conditional write).
import {
  ATTESTATION_REFUSED_ANNOTATION,
  type AttestationRefusal,
  refusalRecord,
} from '../../flavor/attestation-decision.ts';
import { API_VERSION, FLAVORED_TOKEN_KIND, type FlavoredToken } from '../../flavor/resources.ts';
import { rfc3339 } from '../../flavor/rfc3339.ts';
import type { TokenKube } from '../../kube/tokens.ts';
import type { EventType, InvolvedObject } from '../../runtime/events.ts';
import { IssuerError } from '../errors.ts';

/** A refusal within this long of the last one recorded on the token is only counted. */
export const REFUSAL_RECORD_EVERY_MS = 60_000;
/** Tokens whose last record attempt this process remembers (the oldest is forgotten first). */
const MAX_REMEMBERED = 10_000;

export interface RefusalDeps {
  kube: Pick<TokenKube, 'annotateFlavoredToken'>;
  now: () => Date;
  events?: { emit(object: InvolvedObject, type: EventType, reason: string, message: string): void };
  /** Every outcome, for the metric: 'challenged', 'attested' or a refusal's reason. */
  count?: (outcome: string) => void;
}

/** Per API client (one per process): token uid → when this process last tried to record. */
const attempts = new WeakMap<object, Map<string, number>>();

function attemptsOf(deps: RefusalDeps): Map<string, number> {
  let map = attempts.get(deps.kube);
  if (!map) {
    map = new Map();
    attempts.set(deps.kube, map);
  }
  return map;
}

export function involved(token: FlavoredToken): InvolvedObject {
  return {
    apiVersion: API_VERSION,
    kind: FLAVORED_TOKEN_KIND,
    name: token.metadata.name ?? '',
    ...(token.metadata.uid ? { uid: token.metadata.uid } : {}),
  };
}

const STATUS_CODE = { 403: 'Forbidden', 404: 'NotFound', 409: 'Conflict', 410: 'Gone' } as const;

/**
 * The refusal as the HTTP answer to throw, after counting it and, for a refusal worth a look,
 * recording it on `token` (the version read for this request) unless a record is under a minute old.
 */
export async function refused(
  deps: RefusalDeps,
  token: FlavoredToken | undefined,
  refusal: AttestationRefusal,
): Promise<IssuerError> {
  deps.count?.(refusal.reason);
  if (refusal.record && token) await record(deps, token, refusal);
  return new IssuerError(STATUS_CODE[refusal.status], refusal.message);
}

async function record(deps: RefusalDeps, token: FlavoredToken, refusal: AttestationRefusal): Promise<void> {
  const now = deps.now();
  const last = refusalRecord(token);
  if (last !== undefined && now.getTime() - Date.parse(last.at) < REFUSAL_RECORD_EVERY_MS) return;
  const uid = token.metadata.uid ?? '';
  const tried = attemptsOf(deps);
  const lastTry = tried.get(uid);
  if (lastTry !== undefined && now.getTime() - lastTry < REFUSAL_RECORD_EVERY_MS) return;
  tried.delete(uid);
  tried.set(uid, now.getTime());
  if (tried.size > MAX_REMEMBERED) tried.delete(tried.keys().next().value as string);
  const value = JSON.stringify({ reason: refusal.reason, message: refusal.message, at: rfc3339(now) });
  try {
    await deps.kube.annotateFlavoredToken(
      token.metadata.name ?? '',
      { [ATTESTATION_REFUSED_ANNOTATION]: value },
      token.metadata.resourceVersion,
    );
  } catch {
    // Lost to a concurrent write (409: another request recorded, or the record changed), or the
    // API server is unreachable: this refusal is only counted.
    return;
  }
  deps.events?.emit(
    involved(token),
    'Warning',
    'AttestationRefused',
    `${refusal.reason}: ${refusal.message}`,
  );
}
