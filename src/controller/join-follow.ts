// A join after its approval, on its record (ADR 0016): what became of it, from the objects alone.
//   - Its Node judged (the node reconciler's one write: the signed verification record, or the
//     refusal record): the record says so, in one write with the Node's UID. Before that write, a
//     token consumed by its joins whose every join has now registered has its bootstrap Secret
//     deleted (no kubelet needs it any more): done once, and recorded by that same write.
//   - Its join ended (its Node gone, its token revoked or gone before the node registered, its
//     request refused): the record is released; the name is free again, uses are not given back.
//   - Released, its Node and requests gone, a grace passed: the record is collected.

import type { KeyRing } from '../flavor/keyring.ts';
import {
  collectAfterMs,
  type NodeOutcome,
  releasedClaim,
  releaseOf,
  withNodeOutcome,
} from '../flavor/node-name-claim.ts';
import { parseRefusalRecord, REFUSED_ANNOTATION } from '../flavor/refusal-record.ts';
import type { NodeNameClaim, StoredFlavoredToken } from '../flavor/resources.ts';
import { rfc3339 } from '../flavor/rfc3339.ts';
import { latestProofOf, ledgerJoins, tokenFacts, tokenIdOf } from '../flavor/token-facts.ts';
import { lifecycleFactsOf, lifecycleState } from '../flavor/token-status.ts';
import { recordVerifiesToken, VERIFIED_ANNOTATION } from '../flavor/verdict.ts';
import type { TrimmedNode } from '../kube/node-writes.ts';
import { failpoint } from '../runtime/failpoints.ts';
import { KubeError } from '../runtime/kube-error.ts';
import type { ControllerContext } from './context.ts';
import { hasCondition, nodeFacts } from './facts.ts';
import { requestsOf } from './indexes.ts';
import { involvedToken } from './involved.ts';
import type { PassResult } from './join-judge.ts';

const conflict = (error: unknown) => error instanceof KubeError && error.status === 409;

/** Writes the record at its resourceVersion; a conflict re-reads it and asks for another pass. */
async function writeRecord(ctx: ControllerContext, next: NodeNameClaim): Promise<PassResult | undefined> {
  try {
    ctx.caches.claims.assume(await ctx.api.replaceClaim(next));
    return undefined;
  } catch (error) {
    if (!conflict(error)) throw error;
    const fresh = await ctx.api.readClaim(next.metadata.name ?? '');
    if (fresh) ctx.caches.claims.assume(fresh);
    return 'again';
  }
}

/**
 * What the node reconciler's last write says of the Node, for this join's token: verified (its
 * genuine record names the token), refused (its refusal record), or nothing yet (not judged).
 */
async function judgedOutcome(
  ctx: ControllerContext,
  node: TrimmedNode,
  token: StoredFlavoredToken | undefined,
): Promise<NodeOutcome | undefined> {
  const uid = node.metadata.uid;
  const facts = nodeFacts(node);
  if (token && !facts.annotations[REFUSED_ANNOTATION]) {
    const { tokenId, flavorClassName } = tokenFacts(token);
    const verifies = (keyRing: KeyRing | undefined) =>
      keyRing ? recordVerifiesToken(facts, { tokenId, flavorClassName }, keyRing) : undefined;
    // A record the watched ring cannot check may be signed with a key a rotation added that the
    // watch has not brought yet: checked again with the ring as the API server has it now.
    const record =
      verifies(await ctx.keyRing().catch(() => undefined)) ??
      (facts.annotations[VERIFIED_ANNOTATION]
        ? verifies(await ctx.freshKeyRing().catch(() => undefined))
        : undefined);
    if (record) return { uid, verifiedAt: record.verifiedAt };
  }
  const refusal = parseRefusalRecord(facts.annotations[REFUSED_ANNOTATION]);
  return refusal ? { uid, failure: { reason: refusal.reason, message: refusal.message } } : undefined;
}

/**
 * Whether the token's bootstrap Secret goes with this write: the token is consumed by its joins,
 * and with this join's Node every join that counted a use has registered (a kubelet fetches its
 * certificate with the bootstrap token until then). Revoked or expired tokens are the token
 * reconciler's (their Secret goes at once).
 */
function secretGoesNow(ctx: ControllerContext, token: StoredFlavoredToken, record: NodeNameClaim): boolean {
  const state = lifecycleState(lifecycleFactsOf(token), ctx.now());
  if (!state.consumed || state.revoked || state.expired) return false;
  const joins = ledgerJoins(token, (name) => ctx.caches.claims.get(name));
  // A token bound to a TPM: only the Secret of the proof this join used (a later proof's Secret
  // waits for its own join).
  const latest = latestProofOf(token);
  if (latest !== undefined && joins.find((j) => j.nodeName === record.metadata.name)?.proof !== latest)
    return false;
  return joins.every(
    (join) =>
      join.nodeName === record.metadata.name ||
      (join.registeredAt !== undefined && Date.parse(join.registeredAt) >= Date.parse(join.boundAt)),
  );
}

/** Keeps the record of a decided (or gone) request true; see the file's head. */
export async function followRecord(ctx: ControllerContext, record: NodeNameClaim): Promise<PassResult> {
  const nodeName = record.metadata.name ?? '';
  const node = ctx.caches.nodes.get(nodeName);
  const holder = record.spec.holder;
  if (!holder) return collect(ctx, record, node);
  const cached = ctx.caches.tokens.get(holder.tokenName);
  const token = cached?.metadata.uid === holder.tokenUID ? cached : undefined;
  const request = ctx.caches.csrs.get(holder.csrName);
  const facts = {
    ...(token
      ? {
          token: {
            uid: token.metadata.uid,
            revoked: (token.spec as { revoked?: boolean }).revoked === true,
            deleting: token.metadata.deletionTimestamp !== undefined,
          },
        }
      : {}),
    ...(node ? { node: { uid: node.metadata.uid } } : {}),
    ...(request && hasCondition(request, 'Denied', 'Failed') ? { requestRefused: true } : {}),
  };
  const release = releaseOf(record, facts);
  if (release) {
    const now = ctx.now();
    const again = await writeRecord(ctx, releasedClaim(record, rfc3339(now), release));
    if (again) return again;
    ctx.log.info({ node: nodeName, token: holder.tokenID, why: release.reason }, 'join record released');
    if (token) ctx.events.emit(involvedToken(token), 'Normal', 'BindingReleased', release.message);
    return { done: ctx.config.claimGrace };
  }
  const join = record.status?.join;
  if (!node || (join?.nodeUID !== undefined && join.nodeUID !== node.metadata.uid))
    return { done: undefined };
  const outcome = await judgedOutcome(ctx, node, token);
  if (!outcome) return { done: undefined }; // not judged yet: the node reconciler's write brings us back
  const now = rfc3339(ctx.now());
  let next = withNodeOutcome(record, outcome, now);
  if (next === record) return { done: undefined };
  if (token && join?.nodeUID === undefined && secretGoesNow(ctx, token, record)) {
    // Deleted first, then recorded by the write below (a crash between deletes it again: a 404).
    await ctx.api.deleteBootstrapSecret(tokenIdOf(token) ?? '');
    failpoint('after-secret-deleted');
    next = withNodeOutcome(record, outcome, now, true);
  }
  const again = await writeRecord(ctx, next);
  return again ?? { done: undefined };
}

/** A released record: collected once nothing can come of it any more (node-name-claim.ts). */
async function collect(
  ctx: ControllerContext,
  record: NodeNameClaim,
  node: TrimmedNode | undefined,
): Promise<PassResult> {
  const wait = collectAfterMs(
    record,
    {
      nodeExists: node !== undefined,
      requestExists: requestsOf(record).some((name) => ctx.caches.csrs.get(name) !== undefined),
    },
    ctx.now(),
    ctx.config.claimGrace,
  );
  if (wait === undefined) return { done: undefined }; // its Node's or request's deletion brings us back
  if (wait > 0) return { done: wait };
  try {
    await ctx.api.deleteClaimVersion(record);
  } catch (error) {
    if (!conflict(error)) throw error;
    const fresh = await ctx.api.readClaim(record.metadata.name ?? '');
    if (fresh) ctx.caches.claims.assume(fresh);
    return 'again';
  }
  ctx.log.debug({ node: record.metadata.name }, 'released join record collected');
  return { done: undefined };
}
