// What an attestation request may get (ADR 0014), decided from the FlavoredToken as just read
// from the API server. Pure. A refusal names its reason (the Event's and the metric's), the HTTP
// answer, and whether it is worth recording on the token: what a wrong machine or a replayed
// exchange does is (a platform team wants to see it); a plain 404 for an unknown ID is not.
import type { ChallengeTicket } from './attestation-exchange.ts';
import type { FlavoredToken } from './resources.ts';
import { recordExpiresAt } from './resources.ts';
import { withdrawal } from './withdrawal.ts';

/** Set by the issuer on the record when an attestation succeeds: how many so far (the latest proof's number), and when. */
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

/**
 * The token's proofs so far: each successful attestation is one, numbered from 1, and earns one
 * bootstrap Secret for one join. A challenge is answered only while no proof was recorded after
 * it was made (its ticket carries the count it saw), and a binding only with a proof no binding
 * used (flavor/attestation-proofs.ts): durable state, never a time compared in whole seconds.
 */
export interface AttestedRecord {
  /** How many proofs the token's machine made: the latest proof's number. */
  count: number;
  /** When the latest proof was recorded, to the millisecond (RFC 3339). */
  at: string;
}

/** The attested record; `unreadable` when someone other than the issuer wrote it (no proof counts then). */
export function attestedRecord(token: {
  metadata: { annotations?: Record<string, string> | undefined };
}): AttestedRecord | 'unreadable' | undefined {
  const text = token.metadata.annotations?.[ATTESTED_ANNOTATION];
  if (text === undefined) return undefined;
  const value = jsonObject(text);
  const count = value?.count;
  const at = value?.at;
  if (
    typeof count === 'number' &&
    Number.isSafeInteger(count) &&
    count > 0 &&
    typeof at === 'string' &&
    Number.isFinite(Date.parse(at))
  )
    return { count, at };
  return 'unreadable';
}

/** The attested record when it is readable, else undefined (what a view shows). */
export function readableAttestedRecord(token: {
  metadata: { annotations?: Record<string, string> | undefined };
}): AttestedRecord | undefined {
  const record = attestedRecord(token);
  return record === 'unreadable' ? undefined : record;
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
  if (attestedRecord(token) === 'unreadable')
    return {
      status: 409,
      reason: 'InvalidRecord',
      message: `token ${tokenId}'s ${ATTESTED_ANNOTATION} annotation was not written by the issuer: revoke it and issue a new token`,
      record: false,
    };
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

/** Whether an answer with this ticket counts, once its proof holds. */
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
  return replayRefusal(token, tokenId, ticket.proofs);
}

/** How many proofs the record counts (0 before the first); undefined when its record is unreadable. */
export function proofsOf(token: FlavoredToken): number | undefined {
  const attested = attestedRecord(token);
  return attested === 'unreadable' ? undefined : (attested?.count ?? 0);
}

/**
 * Replayed, when a proof was recorded after the challenge was made (it saw `proofsSeen`): this
 * very exchange answered already, or another one (a clone of the TPM's state, a second run of the
 * script) won meanwhile. Of two answers to challenges made before either proof, one wins.
 */
export function replayRefusal(
  token: FlavoredToken,
  tokenId: string,
  proofsSeen: number,
): AttestationRefusal | undefined {
  return proofsOf(token) === proofsSeen
    ? undefined
    : {
        status: 409,
        reason: 'Replayed',
        message: `this challenge for token ${tokenId} was answered already, or another attestation was recorded after it was made: a replayed exchange earns nothing (ask for a new challenge)`,
        record: true,
      };
}

/** A record bound to a TPM whose facts the issuer did not seal (attestation-seal.ts). */
export function unsealed(tokenId: string): AttestationRefusal {
  return {
    status: 403,
    reason: 'Unsealed',
    message: `token ${tokenId}'s TPM binding was not established by the issuer (no valid seal): a FlavoredToken written directly earns nothing; issue tokens through the issuer API or kubectl flavor issue`,
    record: false,
  };
}

/** The EK certificate the token was bound by no longer chains to a trusted, unrevoked manufacturer CA. */
export function ekCertificateRefused(tokenId: string, reason: string): AttestationRefusal {
  return {
    status: 403,
    reason: 'EKCertificateRefused',
    message: `the EK certificate token ${tokenId} is bound by is refused now: ${reason}`,
    record: true,
  };
}

export function badProof(tokenId: string): AttestationRefusal {
  return {
    status: 403,
    reason: 'BadProof',
    message: `the answer for token ${tokenId} does not prove the challenge's secret: only the TPM the token is bound to can recover it`,
    record: true,
  };
}
