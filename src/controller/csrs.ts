// CSR reconciler (key: the CSR's name), the only writer of CSR approvals. A CSR made with one of
// our tokens is decided by that token's reconciler, which records the binding (or the refusal)
// on the token first and then hands the decision here; one made with a bootstrap token nodeflavor
// did not issue is refused here (only in our bootstrap group: plain kubeadm tokens are left to
// kube-controller-manager's auto-approval, untouched).
import { KubeError } from '../kube/kube-error.ts';
import type { CsrObject } from '../kube/token-writes.ts';
import type { ControllerContext } from './context.ts';
import { csrTokenId } from './state.ts';

/** How long a CSR whose token exists but is not in our cache yet waits to be judged again. */
const LAGGING_CACHE_RETRY_MS = 1_000;

export async function reconcileCsr(ctx: ControllerContext, csrName: string): Promise<void> {
  const csr = ctx.caches.csrs.get(csrName);
  if (!csr || csr.status?.conditions?.some((c) => c.type === 'Approved' || c.type === 'Denied')) return;
  const tokenId = csrTokenId(csr);
  if (!tokenId) return;
  const tokenName = ctx.indexes.tokenNameById.get(tokenId);
  if (tokenName) {
    const decision = ctx.indexes.csrDecision(csrName);
    // Not judged yet (or judged by an earlier leader): its token decides first, then hands it back.
    if (!decision) ctx.enqueueToken(tokenName);
    else if (ctx.config.csrApprover)
      await write(ctx, csr, decision.approve, decision.reason, decision.message);
    return;
  }
  const facts = await ctx.indexes.csrFacts(csr);
  if (facts.subject.ok) {
    ctx.indexes.setRejection(facts.subject.nodeName, csrName, {
      reason: 'UnknownToken',
      message: `CSR ${csrName} was made with a bootstrap token nodeflavor did not issue`,
    });
    ctx.enqueueNode(facts.subject.nodeName);
  }
  if (!ctx.config.csrApprover || !csr.spec.groups?.includes(ctx.config.bootstrapGroup)) return;
  // A denial is final for the CSR: never deny from a cache that may lag (a new leader right
  // after a failover, a token issued a moment ago). The issuer names records ft-<token ID>.
  if (await ctx.api.flavoredTokenExists(`ft-${tokenId}`)) {
    ctx.requeueCsr(csrName, LAGGING_CACHE_RETRY_MS);
    return;
  }
  await write(ctx, csr, false, 'UnknownToken', 'the bootstrap token was not issued by nodeflavor');
}

/** The decision, on the CSR as cached; a newer version (409) is decided again once the watch brings it. */
async function write(
  ctx: ControllerContext,
  csr: CsrObject,
  approve: boolean,
  reason: string,
  message: string,
): Promise<void> {
  try {
    // Served from the cache until the watch brings it: a second decision on the version we
    // decided (a token reconcile in between says "already bound" again) would only earn a 409.
    ctx.caches.csrs.assume(await ctx.api.decideCsr(csr, approve, reason, message));
  } catch (error) {
    if (!(error instanceof KubeError && error.status === 409)) throw error;
    ctx.requeueCsr(csr.metadata.name, 500);
  }
}
