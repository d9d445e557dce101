// Join reconciler (key: a kubelet client CSR's name), the only writer of CSR approvals, of the
// join records (NodeNameClaims) and of a token's use count (ADR 0016). A join is one record,
// carried in one pass from the request to its approval (join-judge.ts), then kept true from what
// the objects say until it ends and its record is collected (join-follow.ts):
//   - a pending request of one of our tokens is judged and carried out;
//   - one of a token nodeflavor did not issue is refused in our bootstrap group;
//   - a request its record names, once decided (or gone), keeps that record true.
// Nothing is remembered between passes: a new leader knows what the old one knew from the objects.
import { useCounted } from '../flavor/node-name-claim.ts';
import type { ControllerContext, Requeue } from './context.ts';
import { csrPending, csrTokenId, hasCondition } from './facts.ts';
import { followRecord } from './join-follow.ts';
import { judgeRequest, type PassResult, refuseForeign } from './join-judge.ts';

/** A pass that met a conflict runs again from fresh objects, at most this often in one reconcile. */
const MAX_PASSES = 5;

async function pass(ctx: ControllerContext, csrName: string): Promise<PassResult> {
  const csr = ctx.caches.csrs.get(csrName);
  const tokenId = csr ? csrTokenId(csr) : undefined;
  const recordName = ctx.indexes.claimByRequest.get(csrName);
  const record = recordName ? ctx.caches.claims.get(recordName) : undefined;
  if (csr && tokenId) {
    const tokenName = ctx.indexes.tokenNameById.get(tokenId);
    const token = tokenName ? ctx.caches.tokens.get(tokenName) : undefined;
    if (!token) return csrPending(csr) ? refuseForeign(ctx, csr, tokenId) : { done: undefined };
    // Pending: judged. Approved by someone else (another approver's group, --no-csr-approver)
    // and never bound or refused: bound now, without our approval. Denied or failed: nothing.
    const unbound =
      hasCondition(csr, 'Approved') &&
      !hasCondition(csr, 'Denied', 'Failed') &&
      !(ctx.config.csrApprover && csr.spec.groups?.includes(ctx.config.bootstrapGroup)) &&
      record === undefined &&
      !(token.status?.bindings ?? []).some((b) => b.csrName === csrName) &&
      !(token.status?.rejections ?? []).some((r) => r.csrName === csrName);
    // Its record names it, but the use was never counted (a crash between the claim and the count,
    // where another approver approved it meanwhile): the pass counts it.
    const uncounted =
      record?.spec.holder?.tokenUID === token.metadata.uid &&
      record.spec.holder.csrName === csrName &&
      !hasCondition(csr, 'Denied', 'Failed') &&
      !useCounted(record, token.status?.bindings);
    if (csrPending(csr) || unbound || uncounted) return judgeRequest(ctx, csr, token);
  }
  return record ? followRecord(ctx, record) : { done: undefined };
}

export async function reconcileJoin(ctx: ControllerContext, csrName: string): Promise<Requeue> {
  for (let attempt = 1; ; attempt++) {
    const result = await pass(ctx, csrName);
    if (result !== 'again') return result.done;
    if (attempt >= MAX_PASSES)
      throw new Error(`CSR ${csrName}: the objects its join rests on kept changing while it was judged`);
  }
}
