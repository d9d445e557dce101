// FlavoredToken reconciler (key: the FlavoredToken's name): the token's lifecycle (ADR 0016). It
// keeps the conditions true as time passes and the spec changes (expired, revoked; consumed is
// set by the join that counted the last use, through the same pure function), deletes the
// bootstrap Secret when no join needs it (revoked or expired: at once; consumed: a grace after a
// join whose Node never registered; the last join to register deletes it itself) and records
// that, deletes a keyed issuance's half-made record, and runs revocation before a deleted token
// goes (finalizer). Its joins are on their records, written by the join reconciler, which also
// counts uses; this reconciler writes nothing else. One status write per change.
import { bootstrapSecretDeleteAfterMs } from '../flavor/bootstrap-secret.ts';
import {
  IDEMPOTENCY_ANNOTATION,
  REPLAY_MARGIN_MS,
  REPLAYABLE_UNTIL_ANNOTATION,
} from '../flavor/idempotent-issuance.ts';
import { sameJson } from '../flavor/json-equal.ts';
import type { StoredFlavoredToken } from '../flavor/resources.ts';
import {
  type FlavoredTokenStatus,
  ISSUED_ANNOTATION,
  type NodeNameClaim,
  TOKEN_FINALIZER,
} from '../flavor/resources.ts';
import { latestProofOf, ledgerJoins, tokenExpiresAt, tokenFacts, tokenIdOf } from '../flavor/token-facts.ts';
import {
  lifecycleFactsOf,
  lifecycleState,
  lifecycleStatus,
  secretDeletedRecorded,
  withSecretDeleted,
} from '../flavor/token-status.ts';
import { readVerificationRecord } from '../flavor/verdict.ts';
import { KubeError } from '../runtime/kube-error.ts';
import { type ControllerContext, type Requeue, soonest } from './context.ts';
import { csrPending, nodeFacts } from './facts.ts';
import { involvedToken } from './involved.ts';

const MAX_ATTEMPTS = 5;
/** How often a deleted token looks again at what its finalizer waits for. */
const FINALIZER_RECHECK_MS = 500;

/** The records of the token's joins, from the cache. */
function recordsOf(ctx: ControllerContext, token: StoredFlavoredToken): NodeNameClaim[] {
  return ctx.indexes.claimsByTokenUid.get(token.metadata.uid).flatMap((name) => {
    const claim = ctx.caches.claims.get(name);
    return claim?.spec.holder?.tokenUID === token.metadata.uid ? [claim] : [];
  });
}

/**
 * Read-modify-write of the status at the token's resourceVersion: the first attempt on the cached
 * object; a 409 (the join reconciler counted a use meanwhile) re-reads it and decides again on
 * fresh data. A status equal to the stored one is not written.
 */
async function updateStatus(
  ctx: ControllerContext,
  name: string,
  mutate: (token: StoredFlavoredToken) => Promise<FlavoredTokenStatus | undefined>,
): Promise<StoredFlavoredToken | undefined> {
  let token = ctx.caches.tokens.get(name);
  for (let attempt = 1; token && attempt <= MAX_ATTEMPTS; attempt++) {
    const status = await mutate(token);
    if (!status || sameJson(status, token.status ?? {})) return token;
    try {
      const written = await ctx.api.writeTokenStatus(token, status);
      ctx.caches.tokens.assume(written);
      return written;
    } catch (error) {
      if (!(error instanceof KubeError) || error.status !== 409 || attempt === MAX_ATTEMPTS) throw error;
      token = await ctx.api.readToken(name);
      if (!token) return undefined;
      ctx.caches.tokens.assume(token);
    }
  }
  return token;
}

/**
 * A keyed issuance (ADR 0005) writes the FlavoredToken, then the Secret, then marks the record
 * issued; one that failed midway is resumed by the client's retry. One never resumed leaves an
 * unmarked, unused record: no node can join with it, so it is deleted after --orphan-grace (which
 * covers an issuance in flight), and its Secret, if any, goes with it (the record owns it).
 * A plain issuance has no mark (ADR 0015): its record is never deleted on the absence of one.
 * Returns true when deleted, or the wait until it may be.
 */
async function removeIfHalfMade(
  ctx: ControllerContext,
  token: StoredFlavoredToken,
  tokenId: string,
  now: Date,
): Promise<true | Requeue> {
  const metadata = token.metadata as StoredFlavoredToken['metadata'] & {
    annotations?: Record<string, string>;
  };
  if (metadata.annotations?.[IDEMPOTENCY_ANNOTATION] === undefined) return undefined;
  if (metadata.annotations[ISSUED_ANNOTATION] !== undefined) return undefined;
  const facts = tokenFacts(token);
  const age = now.getTime() - new Date(token.metadata.creationTimestamp).getTime();
  if (facts.uses > 0 || recordsOf(ctx, token).length > 0 || facts.revoked) return undefined;
  if (age < ctx.config.orphanGrace) return ctx.config.orphanGrace - age + 500;
  try {
    // Only the record as judged: an idempotent retry may have completed it since (ADR 0005).
    await ctx.api.deleteTokenVersion(token);
  } catch (error) {
    if (!(error instanceof KubeError && error.status === 409)) throw error;
    return 1000; // changed since it was judged: judge it again
  }
  ctx.events.emit(
    involvedToken(token),
    'Warning',
    'IssuanceIncomplete',
    `token ${tokenId} was never marked issued and never used: deleted the record`,
  );
  return true;
}

const MAX_REPLAY_WINDOW_MS = 86_400_000 + REPLAY_MARGIN_MS;

/** How long a deleted keyed record must stay for its Idempotency-Key's replay window (ADR 0005). */
function replayHoldMs(token: StoredFlavoredToken, now: Date): number {
  const metadata = token.metadata as StoredFlavoredToken['metadata'] & {
    annotations?: Record<string, string>;
  };
  const until = Date.parse(metadata.annotations?.[REPLAYABLE_UNTIL_ANNOTATION] ?? '');
  if (!Number.isFinite(until)) return 0;
  // Never longer than the longest window an issuer may have (its TTL's maximum, a day).
  const latest = Date.parse(token.metadata.creationTimestamp) + MAX_REPLAY_WINDOW_MS;
  return Math.max(0, Math.min(until, latest) - now.getTime());
}

/** Whether the node still carries a verification record naming this token. */
function stillFlavoredBy(ctx: ControllerContext, nodeName: string, tokenId: string | undefined): boolean {
  const node = ctx.caches.nodes.get(nodeName);
  const record = node ? readVerificationRecord(nodeFacts(node)) : undefined;
  return record !== undefined && record.tokenID === tokenId;
}

/**
 * Deleting revokes: the bootstrap Secret goes first. The finalizer stays while a request made
 * with the token is pending (the join reconciler denies it, Revoked), while StripNodes still has
 * nodes to strip, and while a keyed issuance's Idempotency-Key may be replayed (a replay finds the
 * record and is refused, rather than minting a new token under the revoked ID).
 */
async function finalize(
  ctx: ControllerContext,
  token: StoredFlavoredToken,
  tokenId: string | undefined,
): Promise<Requeue> {
  const name = token.metadata.name;
  if (tokenId && !secretDeletedRecorded(token.status, latestProofOf(token))) {
    await ctx.api.deleteBootstrapSecret(tokenId);
    await updateStatus(ctx, name, async (fresh) =>
      withSecretDeleted(fresh.status ?? {}, fresh.metadata.generation, ctx.now(), latestProofOf(fresh)),
    );
  }
  const pending = ctx.indexes.csrsByTokenId
    .get(tokenId ?? '')
    .map((csrName) => ctx.caches.csrs.get(csrName))
    .some(
      (csr) => csr !== undefined && csrPending(csr) && csr.spec.groups?.includes(ctx.config.bootstrapGroup),
    );
  if (pending && ctx.config.csrApprover) return FINALIZER_RECHECK_MS;
  if (
    tokenFacts(token).stripNodesOnRevoke &&
    recordsOf(ctx, token).some((record) => stillFlavoredBy(ctx, record.metadata.name ?? '', tokenId))
  )
    return FINALIZER_RECHECK_MS;
  const holdMs = replayHoldMs(token, ctx.now());
  if (holdMs > 0) return holdMs + 500;
  await ctx.api.setFinalizer(token, false);
  return undefined;
}

/**
 * Nothing has happened to the token yet (no use, not expired, revoked or consumed) and nothing
 * was ever recorded: no status is written (ADR 0015). Its printer columns and every reader take
 * the token ID from its label and the expiry from its spec; an issuance is two writes, not three.
 */
function nothingToRecord(
  token: StoredFlavoredToken,
  state: { consumed: boolean; expired: boolean; revoked: boolean },
) {
  return Object.keys(token.status ?? {}).length === 0 && !state.expired && !state.revoked && !state.consumed;
}

export async function reconcileToken(ctx: ControllerContext, name: string): Promise<Requeue> {
  const cached = ctx.caches.tokens.get(name);
  if (!cached) return undefined;
  const tokenId = tokenIdOf(cached);
  if (cached.metadata.deletionTimestamp) return finalize(ctx, cached, tokenId);
  if (!tokenId) {
    ctx.log.warn({ token: name }, 'FlavoredToken has no token ID label; it was not made by the issuer');
    return undefined;
  }
  if (!cached.metadata.finalizers?.includes(TOKEN_FINALIZER)) {
    // Records made before the issuer set the finalizer itself. The status write below starts
    // from the patched version, not the one the patch made stale (a 409 and a re-read).
    const patched = await ctx.api.setFinalizer(cached, true);
    if (patched) ctx.caches.tokens.assume(patched);
  }
  const now = ctx.now();
  const halfMade = await removeIfHalfMade(ctx, cached, tokenId, now);
  if (halfMade === true) return undefined;
  let secretDeleted = false;
  let deleteAfter: number | undefined;
  const written = await updateStatus(ctx, name, async (fresh) => {
    const facts = lifecycleFactsOf(fresh);
    const state = lifecycleState(facts, now);
    if (nothingToRecord(fresh, state)) return undefined;
    let status = lifecycleStatus(fresh.status ?? {}, facts, now);
    const proof = latestProofOf(fresh);
    deleteAfter = bootstrapSecretDeleteAfterMs(
      state,
      ledgerJoins(fresh, (n) => ctx.caches.claims.get(n)),
      status,
      now,
      proof,
    );
    if (deleteAfter === 0 && !secretDeletedRecorded(status, proof)) {
      // Deleted first, then recorded in this same status write (a crash in between deletes it
      // again next time: a 404 is fine). Once only, should a 409 make us decide again.
      if (!secretDeleted) await ctx.api.deleteBootstrapSecret(tokenId);
      secretDeleted = true;
      status = withSecretDeleted(status, fresh.metadata.generation, now, proof);
    }
    return status;
  });
  if (secretDeleted) ctx.log.debug({ token: tokenId }, 'bootstrap token Secret deleted');
  const token = written ?? cached;
  const expiresIn = tokenExpiresAt(token).getTime() - now.getTime();
  return soonest(
    typeof halfMade === 'number' ? halfMade : undefined,
    // Consumed, but a join's kubelet may still need the token to fetch its certificate.
    deleteAfter !== undefined && deleteAfter > 0 ? deleteAfter + 100 : undefined,
    expiresIn > -1000 ? Math.min(expiresIn + 1000, 2 ** 31 - 1) : undefined,
  );
}
