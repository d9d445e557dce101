// CSR reconciler (key: the CSR's name), the only writer of CSR approvals. A CSR made with one of
// our tokens is judged by that token's reconciler, which records the outcome durably on the
// token first (a binding, after claiming the node name; or a rejection); this reconciler carries
// out what the token records, never a decision held in memory. A denial follows a recorded
// rejection (final, fail closed). An approval is written only after re-reading, from the API
// server, the token (still there, not revoked or being deleted, the binding recorded), the claim
// on the node name (held by that token) and the name itself (no Node of it yet): a revocation, a
// deletion or another claim that landed after the binding is never approved over (ADR 0011).
// A CSR made with a bootstrap token nodeflavor did not issue is refused here (only in our
// bootstrap group: plain kubeadm tokens are left to kube-controller-manager's auto-approval).
import { approvalBlocker } from '../flavor/node-name-claim.ts';
import { KubeError } from '../kube/kube-error.ts';
import type { CsrObject, StoredToken } from '../kube/token-writes.ts';
import type { ControllerContext } from './context.ts';
import { csrIssued, csrTokenId, freshTokenFacts, tokenIdOf } from './state.ts';

/** How long a CSR whose token exists but is not in our cache yet waits to be judged again. */
const LAGGING_CACHE_RETRY_MS = 1_000;
/** How long a CSR whose approval the fresh state did not allow waits to be looked at again. */
const BLOCKED_APPROVAL_RETRY_MS = 1_000;

type RecordedDecision =
  | { kind: 'approve' }
  | { kind: 'deny'; reason: string; message: string }
  /** The token has not judged this CSR yet. */
  | undefined;

/** What the token's status (written by its reconciler before any CSR decision) says of a CSR. */
export function recordedDecision(
  token: StoredToken,
  csrName: string,
  nodeName: string | undefined,
): RecordedDecision {
  const rejection = token.status?.rejections?.find((r) => r.csrName === csrName);
  if (rejection) return { kind: 'deny', reason: rejection.reason, message: rejection.message };
  // This CSR's binding, or a retry of the same join before its Node registered.
  const bound = token.status?.bindings?.some(
    (b) => b.nodeName === nodeName && (b.csrName === csrName || b.nodeUID === undefined),
  );
  return bound ? { kind: 'approve' } : undefined;
}

export async function reconcileCsr(ctx: ControllerContext, csrName: string): Promise<void> {
  const csr = ctx.caches.csrs.get(csrName);
  if (!csr || csr.status?.conditions?.some((c) => c.type === 'Approved' || c.type === 'Denied')) return;
  const tokenId = csrTokenId(csr);
  if (!tokenId) return;
  const facts = await ctx.indexes.csrFacts(csr);
  const nodeName = facts.subject.ok ? facts.subject.nodeName : undefined;
  const tokenName = ctx.indexes.tokenNameById.get(tokenId);
  const token = tokenName ? ctx.caches.tokens.get(tokenName) : undefined;
  if (tokenName && token) {
    if (!ctx.config.csrApprover) return;
    const decision = recordedDecision(token, csrName, nodeName);
    // Not judged yet (or its record was dropped): its token judges it, then hands it back.
    if (!decision) ctx.enqueueToken(tokenName);
    else if (decision.kind === 'deny') await write(ctx, csr, false, decision.reason, decision.message);
    else if (nodeName) await approveIfStillAllowed(ctx, csr, token, nodeName);
    return;
  }
  if (nodeName) {
    ctx.indexes.setRejection(nodeName, csrName, {
      reason: 'UnknownToken',
      message: `CSR ${csrName} was made with a bootstrap token nodeflavor did not issue`,
    });
    ctx.enqueueNode(nodeName);
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

/** Approves only if the token, its binding, the claim and the name still allow it, read just now. */
async function approveIfStillAllowed(
  ctx: ControllerContext,
  csr: CsrObject,
  cached: StoredToken,
  nodeName: string,
): Promise<void> {
  const [token, claim, node] = await Promise.all([
    ctx.api.readToken(cached.metadata.name),
    ctx.api.readClaim(nodeName),
    ctx.api.readNode(nodeName),
  ]);
  // A retry (another CSR of the name's binding, its Node UID not recorded): only while the
  // binding's own request has no certificate, read just now too (rare: not on a first join's path).
  const retryOf = token?.status?.bindings?.find(
    (b) => b.nodeName === nodeName && b.nodeUID === undefined && b.csrName !== csr.metadata.name,
  );
  const bound = retryOf ? await ctx.api.readCsr(retryOf.csrName) : undefined;
  const blocker = approvalBlocker({
    csrName: csr.metadata.name,
    nodeName,
    tokenUID: cached.metadata.uid,
    ...(token ? { token: freshTokenFacts(token) } : {}),
    ...(claim ? { claim } : {}),
    ...(node ? { node: { uid: node.metadata.uid } } : {}),
    ...(csrIssued(bound) ? { boundCsrIssued: true } : {}),
  });
  if (blocker === undefined) {
    await write(ctx, csr, true, 'NodeflavorBound', `bound to token ${tokenIdOf(cached)}`);
    return;
  }
  // Not approved: the token judges the CSR again from what was just read (and records a
  // rejection, or a binding the fresh state allows), which hands the CSR back. Delayed: should
  // the two disagree, they must not wake each other in a tight loop.
  ctx.log.info({ csr: csr.metadata.name, node: nodeName, why: blocker }, 'approval withheld');
  if (token) ctx.caches.tokens.assume(token);
  if (claim) ctx.caches.claims.assume(claim);
  if (node) ctx.caches.nodes.assume(node);
  ctx.requeueToken(cached.metadata.name, BLOCKED_APPROVAL_RETRY_MS);
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
