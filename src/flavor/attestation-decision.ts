// What an attestation request may get (ADR 0014), decided from the FlavoredToken as just read
// from the API server. Pure. A refusal names its reason (the Event's and the metric's), the HTTP
// answer, and whether it is worth recording on the token: what a wrong machine or a replayed
// exchange does is (a platform team wants to see it); a plain 404 for an unknown ID is not.
import type { ChallengeTicket } from './attestation-exchange.ts';
import type { FlavoredToken } from './resources.ts';
import { recordExpiresAt } from './resources.ts';
import { withdrawal } from './withdrawal.ts';

/** Set by the issuer on the record when an attestation succeeds: which ticket, when, how many so far. */
export const ATTESTED_ANNOTATION = 'nodeflavor.io/attested';
/** Set by the issuer when an attestation is refused for a reason worth a human's look. */
export const ATTESTATION_REFUSED_ANNOTATION = 'nodeflavor.io/attestation-refused';

export type AttestationStatus = 404 | 403 | 409 | 410;

export interface AttestationRefusal {
  status: AttestationStatus;
  reason: string;
  message: string;
  /** Recorded on the token (annotation and Warning Event), not only counted. */
  record: boolean;
}

export interface AttestedRecord {
  /** issuedAt of the last ticket that earned join secrets: no ticket issued at or before it counts. */
  ticket: number;
  at: string;
  count: number;
}

export function attestedRecord(token: FlavoredToken): AttestedRecord | undefined {
  const text = token.metadata.annotations?.[ATTESTED_ANNOTATION];
  if (text === undefined) return undefined;
  const value = jsonObject(text);
  if (typeof value?.ticket === 'number' && typeof value.at === 'string' && typeof value.count === 'number')
    return { ticket: value.ticket, at: value.at, count: value.count };
  // Unreadable (hand-edited): treat every earlier ticket as used, so nothing is replayed through it.
  return { ticket: Number.MAX_SAFE_INTEGER, at: '', count: 0 };
}

/** An annotation's JSON object, or undefined when it is not one. */
function jsonObject(text: string): Record<string, unknown> | undefined {
  try {
    const value: unknown = JSON.parse(text);
    return typeof value === 'object' && value !== null ? (value as Record<string, unknown>) : undefined;
  } catch {
    return undefined;
  }
}

export interface RefusalRecord {
  reason: string;
  message: string;
  at: string;
}

export function refusalRecord(token: FlavoredToken): RefusalRecord | undefined {
  const text = token.metadata.annotations?.[ATTESTATION_REFUSED_ANNOTATION];
  const value = text === undefined ? undefined : jsonObject(text);
  if (typeof value?.reason === 'string' && typeof value.message === 'string' && typeof value.at === 'string')
    return { reason: value.reason, message: value.message, at: value.at };
  return undefined;
}

export const notAttested = (tokenId: string): AttestationRefusal => ({
  status: 404,
  reason: 'NotAttested',
  message: `no token bound to a TPM has ID ${tokenId}`,
  record: false,
});

/** Whether the token may be attested at all now: bound to a TPM, live, unexpired, unused (or re-joinable). */
export function tokenRefusal(
  token: FlavoredToken | undefined,
  tokenId: string,
  now: Date,
): AttestationRefusal | undefined {
  if (!token?.spec.attestation) return notAttested(tokenId);
  const withdrawn = withdrawal(token, token.metadata.uid);
  if (withdrawn !== undefined)
    return {
      status: 409,
      reason: 'Revoked',
      message: `token ${tokenId} was ${withdrawn === 'revoked' ? 'revoked' : 'deleted'}: it earns nothing`,
      record: false,
    };
  if (recordExpiresAt(token, now).getTime() <= now.getTime())
    return { status: 410, reason: 'Expired', message: `token ${tokenId} has expired`, record: false };
  const used = (token.status?.uses ?? 0) > 0 || (token.status?.bindings?.length ?? 0) > 0;
  if (used && !token.spec.attestation.allowRejoin)
    return {
      status: 409,
      reason: 'Consumed',
      message: `token ${tokenId} was used by its machine already (re-joining needs a token with allowRejoin)`,
      record: false,
    };
  return undefined;
}

export function ekMismatch(tokenId: string): AttestationRefusal {
  return {
    status: 403,
    reason: 'EKMismatch',
    message: `this machine's TPM is not the one token ${tokenId} is bound to (its endorsement key differs)`,
    record: true,
  };
}

/** Whether an answer with this ticket counts, before its proof is checked. */
export function ticketRefusal(
  token: FlavoredToken,
  tokenId: string,
  ticket: ChallengeTicket,
  now: Date,
): AttestationRefusal | undefined {
  if (ticket.record !== token.metadata.uid)
    return {
      status: 409,
      reason: 'StaleTicket',
      message: `the challenge was made for an earlier token with ID ${tokenId}: ask for a new one`,
      record: false,
    };
  if (now.getTime() > ticket.deadline)
    return {
      status: 410,
      reason: 'LateAnswer',
      message: `the challenge for token ${tokenId} was answered after its deadline (${new Date(ticket.deadline).toISOString()}): ask for a new one`,
      record: true,
    };
  return replayRefusal(token, tokenId, ticket.issuedAt);
}

/** Replayed, when this ticket or a later one earned join secrets already (the record says so). */
export function replayRefusal(
  token: FlavoredToken,
  tokenId: string,
  ticketIssuedAt: number,
): AttestationRefusal | undefined {
  const attested = attestedRecord(token);
  return attested && ticketIssuedAt <= attested.ticket
    ? {
        status: 409,
        reason: 'Replayed',
        message: `this challenge for token ${tokenId} was answered already, or a later one was: a replayed exchange earns nothing`,
        record: true,
      }
    : undefined;
}

export function badProof(tokenId: string): AttestationRefusal {
  return {
    status: 403,
    reason: 'BadProof',
    message: `the answer for token ${tokenId} does not prove the challenge's secret: only the TPM the token is bound to can recover it`,
    record: true,
  };
}
