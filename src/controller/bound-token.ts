// What the node verdict reads of a name's joins: the join its record carries (with the token's
// facts), and why requests for the name were refused — each from the objects (the record, the
// tokens' statuses, the CSRs), never from memory (ADR 0016).
import { bindingOf } from '../flavor/node-name-claim.ts';
import type { NodeNameClaim, StoredFlavoredToken } from '../flavor/resources.ts';
import { tokenFacts } from '../flavor/token-facts.ts';
import type { BoundToken, Failure, FailureReason } from '../flavor/verdict.ts';
import type { ControllerContext } from './context.ts';
import { csrTokenId } from './facts.ts';

/** The join the record carries, if its token is still the one that made it (the same UID). */
export function boundTokenOf(
  record: NodeNameClaim,
  getToken: (name: string) => StoredFlavoredToken | undefined,
): BoundToken | undefined {
  const holder = record.spec.holder;
  const binding = bindingOf(record);
  if (!holder || !binding) return undefined;
  const token = getToken(holder.tokenName);
  if (!token || token.metadata.uid !== holder.tokenUID) return undefined;
  return { token: tokenFacts(token, [binding]), binding };
}

/**
 * Why requests for this node name were not bound, newest first: the refusals our tokens recorded
 * (durable, on their status), and requests made with bootstrap tokens nodeflavor did not issue.
 * A CSR's subject is parsed asynchronously after its event: the parsing under way is waited for,
 * so a replica that just started gives the same reason as one that has run for hours.
 */
export async function refusalsForName(ctx: ControllerContext, nodeName: string): Promise<Failure[]> {
  const requests = await ctx.indexes.csrsNaming(nodeName);
  const refusals: { at: string; failure: Failure }[] = [];
  for (const tokenName of ctx.indexes.tokensRefusingName.get(nodeName)) {
    for (const r of ctx.caches.tokens.get(tokenName)?.status?.rejections ?? []) {
      if (r.nodeName === nodeName)
        refusals.push({ at: r.at, failure: { reason: r.reason as FailureReason, message: r.message } });
    }
  }
  for (const csrName of requests) {
    const csr = ctx.caches.csrs.get(csrName);
    const tokenId = csr ? csrTokenId(csr) : undefined;
    if (!csr || !tokenId || ctx.indexes.tokenNameById.has(tokenId)) continue;
    refusals.push({
      at: csr.metadata.creationTimestamp,
      failure: {
        reason: 'UnknownToken',
        message: `CSR ${csrName} was made with a bootstrap token nodeflavor did not issue`,
      },
    });
  }
  return refusals.sort((a, b) => Date.parse(b.at) - Date.parse(a.at)).map((r) => r.failure);
}
