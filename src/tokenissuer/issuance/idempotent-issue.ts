// POST /v1/tokens with an Idempotency-Key, exactly once across replicas (ADR 0005): the retry
// of a portal whose answer was lost may reach any replica (the Service has no affinity), and must
// get the same token, never a second one. Nothing is kept in memory or stored anywhere new: the
// token ID and secret are derived from the key ring and the request (src/flavor/
// idempotent-issuance.ts), and the FlavoredToken record says which request it was made for.
//
//   1. The record of an earlier attempt under a key that is no longer active (a rotation since)
//      is looked up by the ID that key derives.
//   2. Otherwise the active key's derived ID is claimed by creating its record: of two replicas
//      racing with the same request, one creates it and the other gets a 409 and finds it.
//   3. A record of this request, issued or not, is completed (Secret, then the issued mark, with
//      the record's resourceVersion as a precondition) and answered with its re-derived material.
// An attempt that fails midway is not rolled back: the portal's retry (with the same key) resumes
// it, and a record never marked issued is deleted by the controller after --orphan-grace. Nothing
// is answered before the mark, so no material is ever handed out for a record that then goes.
// Revocation is final (src/flavor/withdrawal.ts): a replay of a revoked record, or of one being
// deleted, is a 409 and writes nothing (no Secret is made again for it); an attempt whose record
// is withdrawn between its read and its mark deletes the Secret it made and answers no material.
import { deriveFlavorToken } from '../../flavor/flavor-token.ts';
import {
  IDEMPOTENCY_ANNOTATION,
  type IdempotentRequest,
  idempotencyMark,
  idempotentBootstrapToken,
  idempotentTokenId,
  matchIdempotencyMark,
  REPLAY_MARGIN_MS,
  REPLAYABLE_UNTIL_ANNOTATION,
} from '../../flavor/idempotent-issuance.ts';
import type { HmacKey } from '../../flavor/keyring.ts';
import { type FlavoredToken, ISSUED_ANNOTATION } from '../../flavor/resources.ts';
import { rfc3339 } from '../../flavor/rfc3339.ts';
import { type Withdrawal, withdrawal } from '../../flavor/withdrawal.ts';
import { isAlreadyExists } from '../../runtime/kube-error.ts';
import { IssuerError } from '../errors.ts';
import { requestFingerprint } from './idempotency.ts';
import {
  bootstrapSecretRequest,
  FLAVORED_TOKEN_NAME_PREFIX,
  flavoredTokenName,
  type IssuanceDeps,
  type IssuedToken,
  type IssueInput,
  markIssuedUnlessWithdrawn,
  type PlainIssuedToken,
  type PreparedIssuance,
  prepareIssuance,
  recordExpiry,
  renderAttestedMaterial,
  renderMaterial,
  sealRecord,
  tokenRecord,
} from './issue.ts';

interface IdempotentIssue<T extends IssuedToken = IssuedToken> {
  issued: T;
  /** True when the token was issued (or begun) by an earlier request with this key. */
  replayed: boolean;
}

const NEW_KEY = 'use a new Idempotency-Key for a new request';

/** A request without `attestation` gets a plain token: its material carries the two tokens. */
export async function issueIdempotently(
  deps: IssuanceDeps,
  input: IssueInput & { owner: string; attestation?: undefined },
  idempotencyKey: string,
  ttlMs: number,
): Promise<IdempotentIssue<PlainIssuedToken>>;
export async function issueIdempotently(
  deps: IssuanceDeps,
  input: IssueInput & { owner: string },
  idempotencyKey: string,
  ttlMs: number,
): Promise<IdempotentIssue>;
export async function issueIdempotently(
  deps: IssuanceDeps,
  input: IssueInput & { owner: string },
  idempotencyKey: string,
  /** How long a key may be replayed after its first use (the issuer's idempotency TTL). */
  ttlMs: number,
): Promise<IdempotentIssue> {
  const prepared = await prepareIssuance(deps, input);
  const request: IdempotentRequest = {
    caller: input.owner,
    idempotencyKey,
    requestFingerprint: requestFingerprint(prepared.request),
  };
  const { ring } = prepared;

  for (const key of ring.verifyOnly) {
    const earlier = await deps.kube.getFlavoredToken(flavoredTokenName(idempotentTokenId(key, request)));
    if (earlier && matchIdempotencyMark(markOf(earlier), ring, request).kind !== 'foreign')
      return { issued: await resume(deps, prepared, request, earlier, ttlMs), replayed: true };
  }

  const tokenId = idempotentTokenId(ring.active, request);
  const annotations = {
    ...prepared.annotations,
    [IDEMPOTENCY_ANNOTATION]: idempotencyMark(ring.active, request),
    [REPLAYABLE_UNTIL_ANNOTATION]: rfc3339(new Date(prepared.now().getTime() + ttlMs + REPLAY_MARGIN_MS)),
  };
  try {
    const record = await deps.kube.createFlavoredToken(tokenRecord(tokenId, prepared.spec, annotations));
    return { issued: await resume(deps, prepared, request, record, ttlMs), replayed: false };
  } catch (error) {
    if (!isAlreadyExists(error)) throw error;
  }
  const existing = await deps.kube.getFlavoredToken(flavoredTokenName(tokenId));
  if (!existing)
    throw new IssuerError('Unavailable', 'the token for this Idempotency-Key was being deleted: retry');
  return { issued: await resume(deps, prepared, request, existing, ttlMs), replayed: true };
}

function markOf(record: FlavoredToken): string | undefined {
  return record.metadata.annotations?.[IDEMPOTENCY_ANNOTATION];
}

/** Completes the record's issuance if it is not complete yet, and answers its material. */
async function resume(
  deps: IssuanceDeps,
  prepared: PreparedIssuance,
  request: IdempotentRequest,
  record: FlavoredToken,
  ttlMs: number,
): Promise<IssuedToken> {
  const key = claimedKey(prepared, request, record, ttlMs);
  const name = record.metadata.name ?? '';
  const tokenId = name.slice(FLAVORED_TOKEN_NAME_PREFIX.length);
  const token = idempotentBootstrapToken(key, request, tokenId, record.metadata.uid ?? '');
  const flavorToken = deriveFlavorToken(key, tokenId, record.spec.flavorClassName);
  const expiresAt = recordExpiry(record, record.spec, prepared.now);
  // A token bound to a TPM gets no Secret until its machine proves itself (ADR 0014).
  const attested = record.spec.attestation !== undefined;
  const material = attested
    ? renderAttestedMaterial(deps, prepared, tokenId, expiresAt)
    : renderMaterial(deps, prepared.facts, token, flavorToken, expiresAt);
  if (record.metadata.annotations?.[ISSUED_ANNOTATION] === undefined) {
    let created = false;
    // Sealed before it is marked issued: the mark follows the seal's version.
    const sealed = attested ? await sealRecord(deps, record, key) : record;
    try {
      if (!attested) {
        await deps.kube.createBootstrapSecret(bootstrapSecretRequest(deps, token, record, expiresAt));
        created = true;
      }
    } catch (error) {
      // Made by an earlier attempt at this very record (the same derived content): done. Reading
      // it back to be sure would need `get` on every Secret in kube-system (ADR 0005).
      if (!isAlreadyExists(error)) throw error;
    }
    const withdrawn = await markIssuedUnlessWithdrawn(deps, sealed, rfc3339(prepared.now()));
    if (withdrawn) {
      // Revoked or deleted since it was read: the Secret goes again (a revocation may have deleted
      // it before it was made). Under another record's name only if this attempt made it: one
      // already there may be that record's own; the garbage collector removes ours (owned by a
      // record that is gone) either way.
      if (created || withdrawn !== 'gone')
        await deps.kube.deleteBootstrapSecret(tokenId).catch(() => undefined);
      throw withdrawnError(withdrawn, true);
    }
  }
  const common = {
    name,
    recordUid: record.metadata.uid ?? '',
    tokenId,
    expiresAt: material.expiresAt,
    material,
  };
  return attested
    ? { attested: true, ...common }
    : { attested: false, ...common, bootstrapToken: token, flavorToken };
}

/**
 * Why the record of this key is not answered: revoked or being deleted (409: a new key is a new
 * request), gone (503: a retry makes a new token). `whileIssuing`: found at the mark.
 */
function withdrawnError(why: Withdrawal, whileIssuing: boolean): IssuerError {
  switch (why) {
    case 'revoked':
      return new IssuerError(
        'Conflict',
        `the token for this Idempotency-Key was revoked${whileIssuing ? ' while it was being issued' : ''}: a revoked token is never issued or answered again; ${NEW_KEY}`,
      );
    case 'deleting':
      return new IssuerError(
        'Conflict',
        `the token issued for this Idempotency-Key is being deleted: ${NEW_KEY}`,
      );
    case 'gone':
      return new IssuerError(
        'Unavailable',
        'the token for this Idempotency-Key was deleted meanwhile: retry',
      );
  }
}

/** The ring key the record was issued under, when it is this request's and may be replayed. */
function claimedKey(
  prepared: PreparedIssuance,
  request: IdempotentRequest,
  record: FlavoredToken,
  ttlMs: number,
): HmacKey {
  const match = matchIdempotencyMark(markOf(record), prepared.ring, request);
  if (match.kind === 'foreign')
    throw new IssuerError(
      'Conflict',
      `the token ID this Idempotency-Key derives is taken by another token: ${NEW_KEY}`,
    );
  if (match.kind === 'other-request')
    throw new IssuerError(
      'Conflict',
      'this Idempotency-Key was already used with a different request body: use a new key for a new request',
    );
  // Revocation is final: a record revoked or being deleted is never completed (no Secret made
  // again) nor answered, though its material could be derived again.
  const withdrawn = withdrawal(record, record.metadata.uid);
  if (withdrawn) throw withdrawnError(withdrawn, false);
  const created = Date.parse(record.metadata.creationTimestamp ?? '');
  if (Number.isFinite(created) && created + ttlMs < prepared.now().getTime())
    throw new IssuerError(
      'Conflict',
      `this Idempotency-Key was first used more than ${Math.round(ttlMs / 1000)} s ago: ${NEW_KEY}`,
    );
  return match.key;
}
