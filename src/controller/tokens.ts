// FlavoredToken reconciler (key: the FlavoredToken's name), the only writer of FlavoredToken
// status. Binds the token's kubelet CSRs to node names (oldest first, so the first node to ask
// gets a single-use token), each after claiming its name (claims.ts: one linearisation point per
// name, durable before any approval), and asks the CSR reconciler to carry out what the status
// now records (it re-checks an approval against fresh state); releases the claims of bindings
// that ended; copies onto each
// binding what its Node says (its UID, and its signed verification record or the node
// reconciler's reason for refusing it); keeps uses and conditions true; deletes the bootstrap
// Secret once it is no longer needed (revoked or expired: at once; consumed: once the bound
// nodes registered, see flavor/bootstrap-secret.ts) and records that in the same status write;
// and runs revocation before a deleted token goes (finalizer). One status write per change.
import { withProofBound } from '../flavor/attestation-proofs.ts';
import { bindingWithNodeOutcome, type NodeOutcome } from '../flavor/binding-outcome.ts';
import { bootstrapSecretDeleteAfterMs } from '../flavor/bootstrap-secret.ts';
import {
  IDEMPOTENCY_ANNOTATION,
  REPLAY_MARGIN_MS,
  REPLAYABLE_UNTIL_ANNOTATION,
} from '../flavor/idempotent-issuance.ts';
import type { KeyRing } from '../flavor/keyring.ts';
import { type FlavoredTokenStatus, ISSUED_ANNOTATION, type TokenBinding } from '../flavor/resources.ts';
import { rfc3339 } from '../flavor/rfc3339.ts';
import { withRejections } from '../flavor/token-lifecycle.ts';
import {
  decideBinding,
  type Failure,
  type NameFacts,
  nameBoundElsewhere,
  readVerificationRecord,
  recordVerifiesToken,
  type TokenFacts,
} from '../flavor/verdict.ts';
import { KubeError } from '../kube/kube-error.ts';
import { type CsrObject, type StoredToken, TOKEN_FINALIZER } from '../kube/token-writes.ts';
import { failpoint } from '../ops/failpoints.ts';
import { claimNodeName, releaseDeadClaims } from './claims.ts';
import type { ControllerContext } from './context.ts';
import { csrIssued, latestProofOf, nodeFacts, tokenExpiresAt, tokenFacts, tokenIdOf } from './state.ts';
import { secretDeletedRecorded, setCondition, updateTokenStatus, withSecretDeleted } from './token-status.ts';

interface BindingOutcome {
  status: FlavoredTokenStatus;
  bound: TokenBinding[];
  /** CSRs of bindings already recorded (this CSR, or a retry before the Node registered). */
  alreadyBound: string[];
  /** Bindings whose Node is gone: the name is free again (uses are never given back). */
  released: TokenBinding[];
  rejected: { csrName: string; nodeName?: string; failure: Failure }[];
  consumed: boolean;
  expired: boolean;
  revoked: boolean;
  /** A claim changed while it was judged: the token is judged again shortly. */
  retryClaims: boolean;
}

/** A binding whose Node registered (nodeUID) and is gone now: no Node of that name has that UID. */
function nodeGone(ctx: ControllerContext, binding: TokenBinding): boolean {
  return (
    binding.nodeUID !== undefined && ctx.caches.nodes.get(binding.nodeName)?.metadata.uid !== binding.nodeUID
  );
}

/**
 * What the caches say of the name a CSR asks for: the Node of that name, and whether another
 * token's claim on it is held (which words a refusal precisely). A refusal is final, so the claim
 * alone never refuses: only the claim's own create, or a fresh read of a contested one, does
 * (claims.ts); a Node of the name that existed before the request does.
 */
function nameFacts(
  ctx: ControllerContext,
  nodeName: string,
  tokenUid: string,
  bindings: readonly TokenBinding[],
): NameFacts {
  const node = ctx.caches.nodes.get(nodeName);
  const holder = ctx.caches.claims.get(nodeName)?.spec.holder;
  const unregistered = bindings.find((b) => b.nodeName === nodeName && b.nodeUID === undefined);
  const issued = unregistered ? csrIssued(ctx.caches.csrs.get(unregistered.csrName)) : false;
  return {
    boundByOtherToken: holder !== undefined && holder.tokenUID !== tokenUid,
    node: node ? { uid: node.metadata.uid, createdAt: new Date(node.metadata.creationTimestamp) } : undefined,
    ...(issued ? { boundCsrIssued: true } : {}),
  };
}

const hasCondition = (csr: CsrObject, ...types: string[]) =>
  csr.status?.conditions?.some((c) => types.includes(c.type)) ?? false;

/**
 * A CSR binds at most once. Never again: one denied or failed, or refused on this token already
 * (a recorded refusal is final: its denial may simply not be written yet), one whose binding was
 * released (its Node is gone; a replacement makes a CSR of its own), nor, where we are the
 * approver of its group, one approved without a binding of this token (approved by us before its
 * binding was released, or by someone else: not ours to bind).
 */
function bindable(
  ctx: ControllerContext,
  csr: CsrObject,
  live: TokenBinding[],
  refused: ReadonlySet<string>,
): boolean {
  if (hasCondition(csr, 'Denied', 'Failed') || ctx.indexes.releasedCsrs.has(csr.metadata.name)) return false;
  if (refused.has(csr.metadata.name)) return false;
  const ours = ctx.config.csrApprover && (csr.spec.groups ?? []).includes(ctx.config.bootstrapGroup);
  return !(ours && hasCondition(csr, 'Approved') && !live.some((b) => b.csrName === csr.metadata.name));
}

/** What the caches say of the Node a binding names: its signed verification, or the refusal. */
function nodeOutcome(
  ctx: ControllerContext,
  binding: TokenBinding,
  token: TokenFacts,
  keyRing: KeyRing | undefined,
): NodeOutcome | undefined {
  const node = ctx.caches.nodes.get(binding.nodeName);
  if (!node) return undefined;
  const uid = node.metadata.uid;
  // The node reconciler found this Node unflavored (class gone, StripNodes, ...): the binding says so.
  const failure = ctx.indexes.nodeFailure(binding.nodeName, uid);
  if (failure) return { uid, failure };
  // Verified and nothing reported since: a resync over thousands of settled tokens checks no MAC.
  if (binding.verifiedAt !== undefined && binding.nodeUID === uid && !binding.failure) return undefined;
  const record = keyRing ? recordVerifiesToken(nodeFacts(node), token, keyRing) : undefined;
  return record ? { uid, verifiedAt: record.verifiedAt } : undefined;
}

/**
 * A Node of the name of a binding whose CSR we have not approved yet: another machine's (this one
 * has no certificate yet). Confirmed from the API server first: a cache may show our own approval
 * late.
 */
async function registeredByAnotherMachine(ctx: ControllerContext, binding: TokenBinding): Promise<boolean> {
  if (!ctx.caches.nodes.get(binding.nodeName)) return false;
  const [csr, node] = await Promise.all([
    ctx.api.readCsr(binding.csrName),
    ctx.api.readNode(binding.nodeName),
  ]);
  return csr !== undefined && !hasCondition(csr, 'Approved', 'Denied', 'Failed') && node !== undefined;
}

/** The CSR still waits for our decision (we approve its group, and have not decided it yet). */
function awaitsApproval(ctx: ControllerContext, of: { csrName: string }): boolean {
  const csr = ctx.caches.csrs.get(of.csrName);
  return (
    csr !== undefined &&
    ctx.config.csrApprover &&
    (csr.spec.groups ?? []).includes(ctx.config.bootstrapGroup) &&
    !hasCondition(csr, 'Approved', 'Denied', 'Failed')
  );
}

/** The status the token should have after judging its CSRs (and which CSRs never bind again). */
async function judge(
  ctx: ControllerContext,
  token: StoredToken,
  now: Date,
  keyRing: KeyRing | undefined,
): Promise<BindingOutcome> {
  const facts = tokenFacts(token);
  const tokenId = facts.tokenId;
  const released = facts.bindings.filter((b) => nodeGone(ctx, b));
  for (const binding of released) ctx.indexes.releasedCsrs.add(binding.csrName);
  const bound: TokenBinding[] = [];
  const alreadyBound: string[] = [];
  const rejected: BindingOutcome['rejected'] = [];
  const kept: TokenBinding[] = [];
  let retryClaims = false;
  const refuse = (binding: TokenBinding, failure: Failure) =>
    rejected.push({ csrName: binding.csrName, nodeName: binding.nodeName, failure });
  for (const binding of facts.bindings) {
    if (released.includes(binding)) continue;
    // A binding whose CSR still waits for our approval is re-judged on what may have changed.
    if (binding.nodeUID === undefined && awaitsApproval(ctx, binding)) {
      if (await registeredByAnotherMachine(ctx, binding)) {
        refuse(binding, {
          reason: 'NameTaken',
          message: `node "${binding.nodeName}" was registered by another machine before CSR ${binding.csrName} was approved: token ${tokenId} did not create it`,
        });
        continue;
      }
      // Revoked before its CSR was approved: never approved now; its name is free again.
      if (facts.revoked || facts.deleting) {
        refuse(binding, {
          reason: 'Revoked',
          message: `token ${tokenId} was revoked before CSR ${binding.csrName} was approved`,
        });
        continue;
      }
      // Its claim must still be this token's (an admin may have deleted it, and another token
      // claimed the name since).
      const claim = await claimNodeName(ctx, binding.nodeName, token, binding.csrName);
      if (claim.kind === 'retry') retryClaims = true;
      if (claim.kind === 'taken') {
        refuse(binding, nameBoundElsewhere(binding.nodeName, tokenId));
        continue;
      }
    }
    kept.push(bindingWithNodeOutcome(binding, nodeOutcome(ctx, binding, facts, keyRing), rfc3339(now)));
  }
  const bindings = kept;
  const refused = new Set([
    ...(token.status?.rejections ?? []).map((r) => r.csrName),
    ...rejected.map((r) => r.csrName),
  ]);
  const csrs = ctx.indexes.csrsByTokenId
    .get(tokenId)
    .map((name) => ctx.caches.csrs.get(name))
    .filter((csr): csr is CsrObject => csr !== undefined && bindable(ctx, csr, bindings, refused))
    .sort((a, b) => a.metadata.creationTimestamp.localeCompare(b.metadata.creationTimestamp));
  let uses = facts.uses;
  // A token bound to a TPM: the latest proof a binding used, as this pass binds (one join per proof).
  let proofs = facts.proofs;
  let boundProof: number | undefined;
  for (const csr of csrs) {
    const csrFacts = await ctx.indexes.csrFacts(csr);
    const cached = csrFacts.subject.ok
      ? nameFacts(ctx, csrFacts.subject.nodeName, token.metadata.uid, bindings)
      : { boundByOtherToken: false };
    const current = { ...facts, bindings, uses, ...(proofs ? { proofs } : {}) };
    let decision = decideBinding(csrFacts, current, cached);
    // Refused only because the cache says another token holds the name: the claim decides that.
    const name = { ...cached, boundByOtherToken: false };
    if (decision.kind === 'reject' && decision.failure.reason === 'NameTaken' && cached.node === undefined)
      decision = decideBinding(csrFacts, current, name);
    if (decision.kind === 'bind') {
      // The one linearisation point per name: durable before the binding is, and before any approval.
      const claim = await claimNodeName(ctx, decision.nodeName, token, csr.metadata.name);
      if (claim.kind === 'retry') {
        retryClaims = true;
        continue;
      }
      if (claim.kind === 'taken')
        decision = decideBinding(csrFacts, current, { ...name, boundByOtherToken: true });
    }
    // An approved CSR is decided: only one still waiting for its approval needs one.
    if (decision.kind === 'already-bound' && !hasCondition(csr, 'Approved'))
      alreadyBound.push(csr.metadata.name);
    if (decision.kind === 'rebind') {
      // Recorded before any approval, like a binding: the approval follows what the token says.
      const index = bindings.findIndex((b) => b.nodeName === decision.nodeName);
      const previous = bindings[index];
      if (previous)
        bindings[index] = {
          ...previous,
          csrName: csr.metadata.name,
          boundAt: rfc3339(now),
          attestation: decision.proof,
        };
      alreadyBound.push(csr.metadata.name);
    }
    if ((decision.kind === 'bind' || decision.kind === 'rebind') && decision.proof !== undefined) {
      boundProof = decision.proof;
      if (proofs) proofs = { ...proofs, bound: decision.proof };
    }
    if (decision.kind === 'bind') {
      uses += 1;
      const binding: TokenBinding = {
        nodeName: decision.nodeName,
        csrName: csr.metadata.name,
        boundAt: rfc3339(now),
        ...(decision.proof !== undefined ? { attestation: decision.proof } : {}),
      };
      bindings.push(binding);
      bound.push(binding);
    } else if (decision.kind === 'reject') {
      rejected.push({ csrName: csr.metadata.name, nodeName: decision.nodeName, failure: decision.failure });
    }
  }
  const expiresAt = tokenExpiresAt(token);
  const expired = now.getTime() >= expiresAt.getTime();
  const revoked = facts.revoked || facts.deleting;
  const consumed = facts.maxUses > 0 && uses >= facts.maxUses;
  const generation = token.metadata.generation;
  let conditions = token.status?.conditions ?? [];
  const flag = (type: string, on: boolean, reason: string, message: string) => {
    conditions = setCondition(
      conditions,
      {
        type,
        status: on ? 'True' : 'False',
        reason: on ? reason : `Not${reason}`,
        message: on ? message : '',
        observedGeneration: generation,
      },
      now,
    );
  };
  flag('Consumed', consumed, 'Consumed', `all ${facts.maxUses} uses are bound`);
  flag('Expired', expired, 'Expired', `expired at ${expiresAt.toISOString()}`);
  flag('Revoked', revoked, 'Revoked', 'the token was revoked');
  const ready = !consumed && !expired && !revoked;
  conditions = setCondition(
    conditions,
    {
      type: 'Ready',
      status: ready ? 'True' : 'False',
      reason: ready ? 'Usable' : consumed ? 'Consumed' : expired ? 'Expired' : 'Revoked',
      message: ready ? 'nodes may join with this token' : 'no further node can join with this token',
      observedGeneration: generation,
    },
    now,
  );
  // The refusals stay on the record (a denied CSR is never judged again), so the portal and
  // `kubectl flavor explain` can say why a node did not get this token.
  const rejections = withRejections(
    token.status?.rejections ?? [],
    rejected.map((r) => ({
      csrName: r.csrName,
      nodeName: r.nodeName,
      reason: r.failure.reason,
      message: r.failure.message,
    })),
    rfc3339(now),
  );
  const status: FlavoredTokenStatus = withProofBound(
    {
      ...token.status,
      ...(rejections.length > 0 ? { rejections } : {}),
      tokenID: tokenId,
      expiresAt: rfc3339(expiresAt),
      uses,
      bindings,
      conditions,
      observedGeneration: generation,
    },
    boundProof,
  );
  return { status, bound, alreadyBound, released, rejected, consumed, expired, revoked, retryClaims };
}

/**
 * A keyed issuance (ADR 0005) writes the FlavoredToken, then the Secret, then marks the record
 * issued; one that failed midway is resumed by the client's retry. One never resumed leaves an
 * unmarked, unused record: no node can join with it, so it is deleted after --orphan-grace (which
 * covers an issuance in flight), and its Secret, if any, goes with it (the record owns it).
 * A plain issuance has no mark (ADR 0015): its record is never deleted on the absence of one.
 */
async function removeIfHalfMade(
  ctx: ControllerContext,
  token: StoredToken,
  tokenId: string,
  now: Date,
): Promise<boolean> {
  const metadata = token.metadata as StoredToken['metadata'] & { annotations?: Record<string, string> };
  if (metadata.annotations?.[IDEMPOTENCY_ANNOTATION] === undefined) return false;
  if (metadata.annotations[ISSUED_ANNOTATION] !== undefined) return false;
  const facts = tokenFacts(token);
  const age = now.getTime() - new Date(token.metadata.creationTimestamp).getTime();
  if (facts.bindings.length > 0 || facts.revoked) return false;
  if (age < ctx.config.orphanGrace) {
    ctx.requeueToken(token.metadata.name, ctx.config.orphanGrace - age + 500);
    return false;
  }
  try {
    // Only the record as judged: an idempotent retry may have completed it since (ADR 0005).
    await ctx.api.deleteTokenVersion(token);
  } catch (error) {
    if (!(error instanceof KubeError && error.status === 409)) throw error;
    ctx.requeueToken(token.metadata.name, 1000); // changed since it was judged: judge it again
    return false;
  }
  ctx.events.emit(
    {
      apiVersion: token.apiVersion,
      kind: 'FlavoredToken',
      name: token.metadata.name,
      uid: token.metadata.uid,
    },
    'Warning',
    'IssuanceIncomplete',
    `token ${tokenId} was never marked issued and never used: deleted the record`,
  );
  return true;
}

/**
 * Nothing has happened to the token yet (no CSR, not expired, revoked or consumed) and nothing
 * was ever recorded: no status is written (ADR 0015). Its printer columns and every reader take
 * the token ID from its label and the expiry from its spec; an issuance is two writes, not three.
 */
function nothingToRecord(token: StoredToken, outcome: BindingOutcome): boolean {
  return (
    Object.keys(token.status ?? {}).length === 0 &&
    (outcome.status.bindings ?? []).length === 0 &&
    (outcome.status.rejections ?? []).length === 0 &&
    outcome.status.uses === 0 &&
    !outcome.expired &&
    !outcome.revoked &&
    !outcome.consumed
  );
}

/** The status without these bindings, each refused (Revoked) instead: their CSRs are denied. */
function withRefusals(
  status: FlavoredTokenStatus,
  refused: readonly TokenBinding[],
  message: string,
  now: Date,
): FlavoredTokenStatus {
  const csrNames = new Set(refused.map((b) => b.csrName));
  return {
    ...status,
    bindings: (status.bindings ?? []).filter((b) => !csrNames.has(b.csrName)),
    rejections: withRejections(
      status.rejections ?? [],
      refused.map((b) => ({ csrName: b.csrName, nodeName: b.nodeName, reason: 'Revoked', message })),
      rfc3339(now),
    ),
  };
}

const MAX_REPLAY_WINDOW_MS = 86_400_000 + REPLAY_MARGIN_MS;

/** How long a deleted keyed record must stay for its Idempotency-Key's replay window (ADR 0005). */
function replayHoldMs(token: StoredToken, now: Date): number {
  const metadata = token.metadata as StoredToken['metadata'] & { annotations?: Record<string, string> };
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

export async function reconcileToken(ctx: ControllerContext, name: string): Promise<void> {
  const cached = ctx.caches.tokens.get(name);
  if (!cached) return;
  const tokenId = tokenIdOf(cached);
  const involved = { apiVersion: cached.apiVersion, kind: 'FlavoredToken', name, uid: cached.metadata.uid };

  if (cached.metadata.deletionTimestamp) {
    // Deleting revokes: the bootstrap Secret goes first. With StripNodes the finalizer stays
    // until every node that joined with the token has lost the flavor (the node reconciler
    // strips them while the token, marked deleting, is still here to say so).
    if (tokenId && !secretDeletedRecorded(cached.status, latestProofOf(cached))) {
      await ctx.api.deleteBootstrapSecret(tokenId);
      // Recorded, so the passes that wait for StripNodes below do not delete it again.
      await updateTokenStatus(ctx, name, async (fresh) =>
        withSecretDeleted(fresh.status ?? {}, fresh.metadata.generation, ctx.now(), latestProofOf(fresh)),
      );
    }
    // A CSR bound before the deletion and not approved yet is never approved now: refused on the
    // record, and the record stays until the CSR reconciler has denied it from there.
    const pending = (cached.status?.bindings ?? []).filter(
      (b) => b.nodeUID === undefined && awaitsApproval(ctx, b),
    );
    if (pending.length > 0) {
      await updateTokenStatus(ctx, name, async (fresh) =>
        withRefusals(
          fresh.status ?? {},
          pending,
          `token ${tokenId} was revoked before the CSR was approved`,
          ctx.now(),
        ),
      );
    }
    const undecided = (cached.status?.rejections ?? []).filter((r) => awaitsApproval(ctx, r));
    if (pending.length > 0 || undecided.length > 0) {
      for (const csrName of [...pending, ...undecided].map((b) => b.csrName)) ctx.enqueueCsr(csrName);
      ctx.requeueToken(name, 500);
      return;
    }
    const bindings = cached.status?.bindings ?? [];
    for (const binding of bindings) ctx.enqueueNode(binding.nodeName);
    if (
      tokenFacts(cached).stripNodesOnRevoke &&
      bindings.some((b) => stillFlavoredBy(ctx, b.nodeName, tokenId))
    ) {
      ctx.requeueToken(name, 500);
      return;
    }
    // Names bound by nodes that never registered are free again; a registered node keeps its
    // name while it exists (a claim whose token is gone is taken over once that node is gone).
    await releaseDeadClaims(ctx, cached);
    // A keyed issuance's record stays, being deleted, while its Idempotency-Key may be replayed:
    // a replay finds it and is refused, rather than minting a new token under the revoked ID.
    const holdMs = replayHoldMs(cached, ctx.now());
    if (holdMs > 0) {
      ctx.requeueToken(name, holdMs + 500);
      return;
    }
    await ctx.api.setFinalizer(cached, false);
    return;
  }
  if (!tokenId) {
    ctx.log.warn({ token: name }, 'FlavoredToken has no token ID label; it was not made by the issuer');
    return;
  }
  if (!cached.metadata.finalizers?.includes(TOKEN_FINALIZER)) {
    // Records made before the issuer set the finalizer itself. The status write below starts
    // from the patched version, not the one the patch made stale (a 409 and a re-read).
    const patched = await ctx.api.setFinalizer(cached, true);
    if (patched) ctx.caches.tokens.assume(patched);
  }

  const now = ctx.now();
  if (await removeIfHalfMade(ctx, cached, tokenId, now)) return;
  const keyRing = await ctx.keyRing().catch(() => undefined);
  let outcome: BindingOutcome | undefined;
  let secretDeleted = false;
  const written = await updateTokenStatus(ctx, name, async (fresh) => {
    outcome = await judge(ctx, fresh, now, keyRing);
    if (nothingToRecord(fresh, outcome)) return undefined;
    const proof = latestProofOf(fresh);
    const deleteAfter = bootstrapSecretDeleteAfterMs(outcome, outcome.status, now, proof);
    if (deleteAfter === 0 && !secretDeletedRecorded(outcome.status, proof)) {
      // Deleted first, then recorded in this same status write (a crash in between deletes it
      // again next time: a 404 is fine). Once only, should a 409 make us judge again.
      if (!secretDeleted) await ctx.api.deleteBootstrapSecret(tokenId);
      secretDeleted = true;
      outcome.status = withSecretDeleted(outcome.status, fresh.metadata.generation, now, proof);
    }
    return outcome.status;
  });
  if (!outcome) return;
  if (outcome.bound.length > 0) failpoint('after-binding-recorded');

  for (const binding of outcome.bound) {
    ctx.metrics.bindings.inc({ result: 'bound', reason: 'Bound' });
    ctx.indexes.setRejection(binding.nodeName, binding.csrName, undefined);
    // Logged, not an Event: the node's own Verified (or Warning) Event is the one people read,
    // and at thousands of joins every write the API server is spared counts.
    ctx.log.debug({ token: tokenId, node: binding.nodeName, csr: binding.csrName }, 'token bound');
    // The status records the binding now: the CSR reconciler approves from it (re-checked fresh).
    ctx.enqueueCsr(binding.csrName);
    ctx.enqueueNode(binding.nodeName);
  }
  for (const binding of outcome.released) {
    // Logged and an Event on the token: the name may now be bound again (by a new machine).
    ctx.log.info({ token: tokenId, node: binding.nodeName }, 'binding released: its node is gone');
    ctx.events.emit(
      involved,
      'Normal',
      'BindingReleased',
      `node ${binding.nodeName} is gone: its name is free again (uses are not given back)`,
    );
    ctx.enqueueNode(binding.nodeName);
  }
  for (const csrName of outcome.alreadyBound) ctx.enqueueCsr(csrName);
  for (const rejection of outcome.rejected) {
    if (rejection.nodeName) {
      const known = ctx.indexes
        .rejectionsFor(rejection.nodeName)
        .some((f) => f.reason === rejection.failure.reason);
      ctx.indexes.setRejection(rejection.nodeName, rejection.csrName, rejection.failure);
      if (!known) ctx.metrics.bindings.inc({ result: 'rejected', reason: rejection.failure.reason });
      ctx.enqueueNode(rejection.nodeName);
    }
    ctx.events.emit(involved, 'Warning', rejection.failure.reason, rejection.failure.message);
    ctx.enqueueCsr(rejection.csrName);
  }
  if (outcome.retryClaims) ctx.requeueToken(name, 500);
  // After the status write: a claim this pass made is backed by the binding just written, or by none.
  if (!(await releaseDeadClaims(ctx, written ?? cached))) ctx.requeueToken(name, 1_000);
  if (secretDeleted) {
    const why = outcome.revoked ? 'revoked' : outcome.consumed ? 'consumed' : 'expired';
    // The Consumed/Expired/Revoked and SecretDeleted conditions record this on the token itself.
    ctx.log.debug({ token: tokenId, why }, 'bootstrap token Secret deleted');
  }
  const deleteSecretAfter = bootstrapSecretDeleteAfterMs(
    outcome,
    outcome.status,
    now,
    latestProofOf(written ?? cached),
  );
  // Consumed, but a bound kubelet may still need the token to fetch its certificate.
  if (deleteSecretAfter !== undefined && deleteSecretAfter > 0)
    ctx.requeueToken(name, deleteSecretAfter + 100);
  if (outcome.revoked) for (const binding of outcome.status.bindings ?? []) ctx.enqueueNode(binding.nodeName);
  if (!outcome.expired) {
    ctx.requeueToken(name, tokenExpiresAt(cached).getTime() - now.getTime() + 1000);
  }
}
