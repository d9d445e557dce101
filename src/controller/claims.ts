// The token reconciler's side of NodeNameClaims (ADR 0011): a binding claims its node name
// before it is recorded (the API server's create is the one linearisation point per name, so of
// two tokens whose CSRs ask for a name at the same instant exactly one gets it), and once a
// binding ends (its Node gone, its token revoked before the node registered, or the binding never
// written) its claim is released. A contested claim is judged from fresh reads, never from a
// cache: whether the other token's binding still holds the name.
import {
  bindingHoldsName,
  claimStanding,
  holderStillHolds,
  newClaim,
  releasedClaim,
  takenOverClaim,
} from '../flavor/node-name-claim.ts';
import type { ClaimHolder } from '../flavor/resources.ts';
import { rfc3339 } from '../flavor/rfc3339.ts';
import { KubeError } from '../kube/kube-error.ts';
import type { StoredToken } from '../kube/token-writes.ts';
import type { ControllerContext } from './context.ts';
import { freshTokenFacts, tokenFacts, tokenIdOf } from './state.ts';

export type ClaimOutcome =
  /** This token holds the name now (durably). */
  | { kind: 'held' }
  /** Another token's live binding holds it. */
  | { kind: 'taken' }
  /** The claim changed while we looked: judge again shortly. */
  | { kind: 'retry' };

const conflict = (error: unknown) => error instanceof KubeError && error.status === 409;

function holderOf(token: StoredToken, csrName: string, now: Date): ClaimHolder {
  return {
    tokenName: token.metadata.name,
    tokenUID: token.metadata.uid,
    tokenID: tokenIdOf(token) ?? '',
    csrName,
    claimedAt: rfc3339(now),
  };
}

/** Claims `nodeName` for `token` (whose CSR `csrName` asks for it), or says why it cannot. */
export async function claimNodeName(
  ctx: ControllerContext,
  nodeName: string,
  token: StoredToken,
  csrName: string,
): Promise<ClaimOutcome> {
  const uid = token.metadata.uid;
  const cached = ctx.caches.claims.get(nodeName);
  // Ours already (an earlier attempt): the approval re-reads it from the API server anyway.
  if (cached && claimStanding(cached, uid).kind === 'ours') return { kind: 'held' };
  const holder = holderOf(token, csrName, ctx.now());
  try {
    ctx.caches.claims.assume(await ctx.api.createClaim(newClaim(nodeName, holder)));
    return { kind: 'held' };
  } catch (error) {
    if (!conflict(error)) throw error;
  }
  const existing = await ctx.api.readClaim(nodeName);
  if (!existing) return { kind: 'retry' };
  const standing = claimStanding(existing, uid);
  if (standing.kind === 'ours') return { kind: 'held' };
  if (standing.kind === 'other') {
    const [other, node] = await Promise.all([
      ctx.api.readToken(standing.holder.tokenName),
      ctx.api.readNode(nodeName),
    ]);
    const facts = {
      ...(other ? { token: freshTokenFacts(other) } : {}),
      ...(node ? { node: { uid: node.metadata.uid } } : {}),
    };
    if (holderStillHolds(nodeName, standing.holder, facts)) return { kind: 'taken' };
  }
  // Released, or its holder's binding is over: taken over at the version we judged.
  try {
    ctx.caches.claims.assume(await ctx.api.replaceClaim(takenOverClaim(existing, holder)));
    return { kind: 'held' };
  } catch (error) {
    if (!conflict(error)) throw error;
    return { kind: 'retry' };
  }
}

/**
 * Releases the claims `token` holds that no live binding of it backs any more: the name is free
 * again (the claim object stays, so a Node registered under it is still quarantined). Runs after
 * the token's status write (a token's passes never overlap), so a claim made in this pass is
 * backed by the binding just written, or by none: its CSR was not bound after all. Written at the
 * claim's resourceVersion; false when one changed meanwhile (judged again on the next pass).
 */
export async function releaseDeadClaims(ctx: ControllerContext, token: StoredToken): Promise<boolean> {
  let allReleased = true;
  const facts = tokenFacts(token);
  for (const nodeName of ctx.indexes.claimsByTokenUid.get(token.metadata.uid)) {
    const claim = ctx.caches.claims.get(nodeName);
    if (!claim || claim.spec.holder?.tokenUID !== token.metadata.uid) continue;
    const binding = facts.bindings.find((b) => b.nodeName === nodeName);
    if (binding && bindingHoldsName(binding, facts, ctx.caches.nodes.get(nodeName)?.metadata.uid)) continue;
    try {
      ctx.caches.claims.assume(await ctx.api.replaceClaim(releasedClaim(claim, rfc3339(ctx.now()))));
      ctx.log.debug({ node: nodeName, token: tokenIdOf(token) }, 'node name released');
    } catch (error) {
      if (!conflict(error)) throw error;
      allReleased = false;
    }
  }
  return allReleased;
}
