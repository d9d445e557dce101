// A kubelet client CSR made with one of our tokens, judged and carried to its approval in one pass
// (ADR 0016): the binding decision from the caches (verdict.ts decideBinding), then, in this
// order, each write proving what the pass rests on from its own answer:
//   1. the join's record: the NodeNameClaim of the name, created (the API server's create is the
//      one linearisation point per name) or taken over at the resourceVersion judged;
//   2. the one read a write cannot replace: the Node of that name, which a plain join may have
//      registered within the watch's lag (a pending request has no certificate, so any Node of
//      its name is another machine's);
//   3. the use, counted on the token at the resourceVersion judged (the maxUses ordering point; a
//      revocation or deletion since changed that version, so the write fails and the pass judges
//      again from the token as it is);
//   4. the approval, at the CSR's resourceVersion.
// A conflict at any write re-reads that object and the pass starts again from the top. A refusal
// is recorded on the token first (final: its holder sees why), then the record is released and
// the CSR denied. A crash between any two steps leaves what the next pass continues from: the
// record names the request, the ledger names the use (nothing is counted twice), the CSR is
// pending until step 4.
import {
  claimStanding,
  joinHoldsName,
  newClaim,
  reboundClaim,
  releasedClaim,
  retriedClaim,
  takenOverClaim,
  useCounted,
  useOf,
} from '../flavor/node-name-claim.ts';
import type {
  ClaimHolder,
  FlavoredTokenStatus,
  NodeNameClaim,
  StoredFlavoredToken,
} from '../flavor/resources.ts';
import { rfc3339 } from '../flavor/rfc3339.ts';
import { joinsOf, reservesName, tokenFacts, tokenIdOf } from '../flavor/token-facts.ts';
import { lifecycleFactsOf, withRefusal, withUse } from '../flavor/token-status.ts';
import { decideBinding, type Failure, MAX_BINDINGS, type NameFacts } from '../flavor/verdict.ts';
import type { CsrObject } from '../kube/csrs.ts';
import { failpoint } from '../runtime/failpoints.ts';
import { KubeError } from '../runtime/kube-error.ts';
import type { ControllerContext, Requeue } from './context.ts';
import { csrIssued, csrPending, hasCondition } from './facts.ts';
import { involvedToken } from './involved.ts';

/** A pass ends with a requeue (or none), or asks to be run again at once from fresh objects. */
export type PassResult = { done: Requeue } | 'again';

const done = (requeue?: Requeue): PassResult => ({ done: requeue });
const conflict = (error: unknown) => error instanceof KubeError && error.status === 409;

/** How long a CSR whose token exists but is not in our cache yet waits to be judged again. */
const LAGGING_CACHE_RETRY_MS = 1_000;
/** How long a CSR for a name whose record is being deleted waits for it to go. */
const DELETING_RECORD_RETRY_MS = 1_000;

/** The records `token` holds, from the cache. */
function recordsOf(ctx: ControllerContext, token: StoredFlavoredToken): NodeNameClaim[] {
  return ctx.indexes.claimsByTokenUid.get(token.metadata.uid).flatMap((name) => {
    const claim = ctx.caches.claims.get(name);
    return claim ? [claim] : [];
  });
}

/** The holder's token (by name and UID), its CSR and the Node of the name, as cached. */
function cachedHolderFacts(ctx: ControllerContext, record: NodeNameClaim) {
  const holder = record.spec.holder;
  const token = holder ? ctx.caches.tokens.get(holder.tokenName) : undefined;
  const request = holder ? ctx.caches.csrs.get(holder.csrName) : undefined;
  const node = ctx.caches.nodes.get(record.metadata.name ?? '');
  return {
    ...(token ? { token: { uid: token.metadata.uid, ...revocation(token) } } : {}),
    ...(node ? { node: { uid: node.metadata.uid } } : {}),
    ...(request && hasCondition(request, 'Denied', 'Failed') ? { requestRefused: true } : {}),
  };
}

function revocation(token: StoredFlavoredToken) {
  return {
    revoked: (token.spec as { revoked?: boolean }).revoked === true,
    deleting: token.metadata.deletionTimestamp !== undefined,
  };
}

/**
 * Whether a certificate exists, or will, for the join's request: issued; approved and not failed
 * (kube-controller-manager signs it within moments); or gone, which counts as issued (its cleaner
 * deletes issued CSRs after an hour, and a request we cannot see proves nothing).
 */
function mayHoldCertificate(request: CsrObject | undefined): boolean {
  if (request === undefined || csrIssued(request)) return true;
  return hasCondition(request, 'Approved') && !hasCondition(request, 'Failed');
}

/**
 * The certificates of joins the name's record says are over: a request of one of its joins (the
 * record's rules judge those: a live one holds the name itself), and the node's own renewals made
 * before its Node was gone and the name released. Their machines could come back with them, as
 * any machine whose Node was deleted could: a name is free again once its Node is gone.
 */
function endedJoins(record: NodeNameClaim | undefined, nodeName: string): (request: CsrObject) => boolean {
  const history = record?.status?.history ?? [];
  const requests = new Set(history.map((e) => e.csrName).filter((n): n is string => n !== undefined));
  const release = history.findLast((e) => e.event === 'Released' && e.reason === 'NodeGone');
  const releasedSecond = release ? Math.floor(Date.parse(release.at) / 1000) : undefined;
  return (request) => {
    if (requests.has(request.metadata.name)) return true;
    if (releasedSecond === undefined || request.spec.username !== `system:node:${nodeName}`) return false;
    // Strictly before the release's second: one from that very second may be a new machine's.
    return Math.floor(Date.parse(request.metadata.creationTimestamp) / 1000) < releasedSecond;
  };
}

/** What the caches say of the name `csr` asks for, as the binding decision takes it. */
async function nameFacts(
  ctx: ControllerContext,
  csr: CsrObject,
  nodeName: string,
  token: StoredFlavoredToken,
  record: NodeNameClaim | undefined,
): Promise<NameFacts> {
  const node = ctx.caches.nodes.get(nodeName);
  const standing = record ? claimStanding(record, token.metadata.uid) : undefined;
  const facts: NameFacts = {
    boundByOtherToken:
      standing?.kind === 'other' &&
      joinHoldsName(record as NodeNameClaim, cachedHolderFacts(ctx, record as NodeNameClaim)),
    ...(node
      ? { node: { uid: node.metadata.uid, createdAt: new Date(node.metadata.creationTimestamp) } }
      : {}),
  };
  if (standing?.kind === 'ours' && record) {
    if (mayHoldCertificate(ctx.caches.csrs.get(record.spec.holder?.csrName ?? '')))
      facts.joinCsrIssued = true;
    if (useCounted(record, token.status?.bindings)) facts.joinCounted = true;
  }
  const ended = endedJoins(record, nodeName);
  for (const other of await ctx.indexes.csrsNaming(nodeName)) {
    const request = ctx.caches.csrs.get(other);
    if (!request || request.spec.username === csr.spec.username || !csrIssued(request)) continue;
    if (ended(request)) continue;
    facts.certifiedElsewhere = other;
    break;
  }
  const now = ctx.now();
  for (const pinned of ctx.indexes.tokensByPinnedName.get(nodeName)) {
    const other = ctx.caches.tokens.get(pinned);
    if (other && other.metadata.uid !== token.metadata.uid && reservesName(other, now)) {
      facts.reservedFor = tokenIdOf(other);
      break;
    }
  }
  return facts;
}

/**
 * Whether `csr` is superseded by another request of the same join (the kubelet asked again, e.g.
 * `kubeadm join` run again after a crash): the record already moved past it (it names it among
 * the join's earlier requests), or it is the join's own request, still pending, and a request of
 * the same requester for the name that the record has never named waits too — the newer attempt,
 * which the join moves to (a retry). Decided on the record, never on timestamps. Its name, if so.
 */
async function supersededBy(
  ctx: ControllerContext,
  csr: CsrObject,
  record: NodeNameClaim | undefined,
  kind: 'already-bound' | 'already-joined',
): Promise<string | undefined> {
  const holder = record?.spec.holder;
  if (!record || !holder) return undefined;
  const named = new Set(
    (record.status?.history ?? [])
      .filter((e) => e.event === 'Claimed' || e.event === 'Retried' || e.event === 'Rebound')
      .map((e) => e.csrName),
  );
  if (kind === 'already-joined')
    return holder.csrName !== csr.metadata.name && named.has(csr.metadata.name) ? holder.csrName : undefined;
  if (holder.csrName !== csr.metadata.name || !csrPending(csr)) return undefined;
  for (const name of await ctx.indexes.csrsNaming(record.metadata.name ?? '')) {
    const other = ctx.caches.csrs.get(name);
    if (!other || name === csr.metadata.name || other.spec.username !== csr.spec.username) continue;
    if (csrPending(other) && !named.has(name)) return name;
  }
  return undefined;
}

/**
 * A refusal that rests on a cached fact which may only lag (another token's live join, a live
 * token pinned to the name) is confirmed from the API server first: a refusal is final. Returns
 * 'again' (with the fresh objects in the caches) when the fresh reads disagree.
 */
async function confirmedNameRefusal(
  ctx: ControllerContext,
  nodeName: string,
  token: StoredFlavoredToken,
  name: NameFacts,
): Promise<boolean> {
  if (name.boundByOtherToken) {
    const record = await ctx.api.readClaim(nodeName);
    const holder = record?.spec.holder;
    const [other, node] = await Promise.all([
      holder ? ctx.api.readToken(holder.tokenName) : Promise.resolve(undefined),
      ctx.api.readNode(nodeName),
    ]);
    const request = holder ? ctx.caches.csrs.get(holder.csrName) : undefined;
    const holds =
      record !== undefined &&
      claimStanding(record, token.metadata.uid).kind === 'other' &&
      joinHoldsName(record, {
        ...(other ? { token: { uid: other.metadata.uid, ...revocation(other) } } : {}),
        ...(node ? { node: { uid: node.metadata.uid } } : {}),
        ...(request && hasCondition(request, 'Denied', 'Failed') ? { requestRefused: true } : {}),
      });
    if (holds) return true;
    if (record) ctx.caches.claims.assume(record);
    if (other) ctx.caches.tokens.assume(other);
    if (node) ctx.caches.nodes.assume(node);
    return false;
  }
  if (name.reservedFor !== undefined) {
    const reserving = ctx.indexes.tokenNameById.get(name.reservedFor);
    const fresh = reserving ? await ctx.api.readToken(reserving) : undefined;
    if (fresh && reservesName(fresh, ctx.now())) return true;
    if (fresh) ctx.caches.tokens.assume(fresh);
    return false;
  }
  return true;
}

/** Judges a pending (or, without our approval, an approved unbound) CSR of `token`'s, and carries it out. */
export async function judgeRequest(
  ctx: ControllerContext,
  csr: CsrObject,
  token: StoredFlavoredToken,
): Promise<PassResult> {
  // A recorded refusal is final: carried out (its denial may not be written yet), never judged again.
  const recorded = token.status?.rejections?.find((r) => r.csrName === csr.metadata.name);
  if (recorded) return carryOutRefusal(ctx, csr, token, recorded.nodeName, recorded);
  const csrFacts = await ctx.indexes.csrFacts(csr);
  const nodeName = csrFacts.subject.ok ? csrFacts.subject.nodeName : undefined;
  const record = nodeName ? ctx.caches.claims.get(nodeName) : undefined;
  const name: NameFacts = nodeName
    ? await nameFacts(ctx, csr, nodeName, token, record)
    : { boundByOtherToken: false };
  const facts = tokenFacts(token, joinsOf(token, recordsOf(ctx, token)));
  const decision = decideBinding(csrFacts, facts, name);
  // The same join asked again (the kubelet retried): the newest request is the one approved.
  const again =
    decision.kind === 'already-bound' && !decision.retry
      ? 'already-bound'
      : decision.kind === 'reject' && decision.failure.reason === 'AlreadyJoined'
        ? 'already-joined'
        : undefined;
  const newer = again ? await supersededBy(ctx, csr, record, again) : undefined;
  if (newer)
    return refuse(ctx, csr, token, nodeName, {
      reason: 'Superseded',
      message: `a newer request of the same join (CSR ${newer}) is the one approved for node ${nodeName}`,
    });
  if (decision.kind === 'reject') {
    if (decision.failure.reason === 'NameTaken' && nodeName) {
      if (!(await confirmedNameRefusal(ctx, nodeName, token, name))) return 'again';
    }
    return refuse(ctx, csr, token, decision.nodeName, decision.failure);
  }
  // A record an admin deleted stays until its join ends (its finalizer): nothing claims it meanwhile.
  if (decision.kind === 'bind' && record?.metadata.deletionTimestamp) return done(DELETING_RECORD_RETRY_MS);
  const at = rfc3339(ctx.now());
  let held: NodeNameClaim;
  try {
    if (decision.kind === 'bind') {
      const holder: ClaimHolder = {
        tokenName: token.metadata.name,
        tokenUID: token.metadata.uid,
        tokenID: tokenIdOf(token) ?? '',
        csrName: csr.metadata.name,
        claimedAt: at,
      };
      // The one linearisation point per name: of any number of tokens asking for it at once, one
      // creates it; a record whose join ended (or none holds) is taken over at the version judged.
      held = record
        ? await ctx.api.replaceClaim(takenOverClaim(record, holder))
        : await ctx.api.createClaim(newClaim(decision.nodeName, holder));
      failpoint('after-name-claimed');
    } else {
      if (!record) return 'again'; // its join is on a record the cache does not show yet
      held = record;
      if (decision.kind === 'rebind')
        held = await ctx.api.replaceClaim(reboundClaim(held, csr.metadata.name, at));
      else if (held.spec.holder?.csrName !== csr.metadata.name)
        held = await ctx.api.replaceClaim(retriedClaim(held, csr.metadata.name, at));
    }
  } catch (error) {
    if (!conflict(error) || !nodeName) throw error;
    const fresh = await ctx.api.readClaim(nodeName);
    if (fresh) ctx.caches.claims.assume(fresh);
    return 'again';
  }
  ctx.caches.claims.assume(held);
  return approveJoin(ctx, csr, token, held, decision.proof);
}

/**
 * Steps 2–4 for a request its record names: the fresh Node read, the use counted (once per join),
 * the approval. Without our approval (another approver's group, or --no-csr-approver), only the use.
 */
async function approveJoin(
  ctx: ControllerContext,
  csr: CsrObject,
  token: StoredFlavoredToken,
  held: NodeNameClaim,
  /** For a token bound to a TPM, the proof the join uses (one join per proof, ADR 0014). */
  proof: number | undefined,
): Promise<PassResult> {
  const nodeName = held.metadata.name ?? '';
  const approving = ctx.config.csrApprover && csrPending(csr);
  if (approving) {
    const node = await ctx.api.readNode(nodeName);
    failpoint('after-node-read');
    // A rejoin token's machine may come back to the very Node its join recorded; any other Node
    // of the name was registered by another machine (this request has no certificate yet).
    const own = tokenFacts(token).rejoin && node?.metadata.uid === held.status?.join?.nodeUID;
    if (node && !own) {
      ctx.caches.nodes.assume(node);
      return refuse(ctx, csr, token, nodeName, {
        reason: 'NameTaken',
        message: `node "${nodeName}" was registered by another machine before CSR ${csr.metadata.name} was approved: token ${tokenIdOf(token)} did not create it`,
      });
    }
  }
  if (!useCounted(held, token.status?.bindings)) {
    const counted = useOf(held);
    const use = counted && proof !== undefined ? { ...counted, attestation: proof } : counted;
    const status = withUse(
      token.status ?? {},
      use as NonNullable<typeof use>,
      lifecycleFactsOf(token),
      ctx.now(),
      (entry) => ctx.caches.claims.get(entry.nodeName)?.spec.holder?.tokenUID !== token.metadata.uid,
      MAX_BINDINGS,
    );
    if (!(await writeStatus(ctx, token, status))) return 'again';
    ctx.metrics.bindings.inc({ result: 'bound', reason: 'Bound' });
    failpoint('after-use-counted');
  }
  if (!approving) return done();
  const approved = await decide(ctx, csr, true, 'NodeflavorBound', `bound to token ${tokenIdOf(token)}`);
  failpoint('after-csr-approved');
  return approved;
}

/** Writes the token's status at the version judged; on a conflict, caches the fresh token and says false. */
async function writeStatus(
  ctx: ControllerContext,
  token: StoredFlavoredToken,
  status: FlavoredTokenStatus,
): Promise<boolean> {
  try {
    ctx.caches.tokens.assume(await ctx.api.writeTokenStatus(token, status));
    return true;
  } catch (error) {
    if (!conflict(error)) throw error;
    const fresh = await ctx.api.readToken(token.metadata.name);
    if (fresh) ctx.caches.tokens.assume(fresh);
    return false;
  }
}

/** Records the refusal on the token (final), then carries it out. */
async function refuse(
  ctx: ControllerContext,
  csr: CsrObject,
  token: StoredFlavoredToken,
  nodeName: string | undefined,
  failure: Failure,
): Promise<PassResult> {
  const refusal = { csrName: csr.metadata.name, nodeName, reason: failure.reason, message: failure.message };
  if (!(await writeStatus(ctx, token, withRefusal(token.status ?? {}, refusal, ctx.now())))) return 'again';
  ctx.metrics.bindings.inc({ result: 'rejected', reason: failure.reason });
  ctx.events.emit(involvedToken(token), 'Warning', failure.reason, failure.message);
  return carryOutRefusal(ctx, csr, token, nodeName, failure);
}

/** A recorded refusal: the record this request holds is released, then the CSR denied. */
async function carryOutRefusal(
  ctx: ControllerContext,
  csr: CsrObject,
  token: StoredFlavoredToken,
  nodeName: string | undefined,
  failure: { reason: string; message: string },
): Promise<PassResult> {
  const record = nodeName ? ctx.caches.claims.get(nodeName) : undefined;
  const holder = record?.spec.holder;
  // A superseded request's join goes on with its newer request: its record stays.
  if (
    record &&
    failure.reason !== 'Superseded' &&
    holder?.tokenUID === token.metadata.uid &&
    holder.csrName === csr.metadata.name &&
    !record.status?.join?.nodeUID
  ) {
    try {
      ctx.caches.claims.assume(
        await ctx.api.replaceClaim(
          releasedClaim(record, rfc3339(ctx.now()), {
            reason: 'Refused',
            message: `CSR ${csr.metadata.name} was refused (${failure.reason}): the name is free again`,
          }),
        ),
      );
    } catch (error) {
      if (!conflict(error) || !nodeName) throw error;
      const fresh = await ctx.api.readClaim(nodeName);
      if (fresh) ctx.caches.claims.assume(fresh);
      return 'again';
    }
  }
  if (!ctx.config.csrApprover || !csrPending(csr)) return done();
  return decide(ctx, csr, false, failure.reason, failure.message);
}

/** A CSR made with a bootstrap token nodeflavor did not issue: refused in our bootstrap group. */
export async function refuseForeign(
  ctx: ControllerContext,
  csr: CsrObject,
  tokenId: string,
): Promise<PassResult> {
  if (!ctx.config.csrApprover || !csrPending(csr) || !csr.spec.groups?.includes(ctx.config.bootstrapGroup))
    return done();
  // A denial is final for the CSR: never deny from a cache that may lag (a new leader right
  // after a failover, a token issued a moment ago). The issuer names records ft-<token ID>.
  if (await ctx.api.flavoredTokenExists(`ft-${tokenId}`)) return done(LAGGING_CACHE_RETRY_MS);
  return decide(ctx, csr, false, 'UnknownToken', 'the bootstrap token was not issued by nodeflavor');
}

/** The decision, on the CSR as cached; a newer version (409) is decided again once the watch brings it. */
async function decide(
  ctx: ControllerContext,
  csr: CsrObject,
  approve: boolean,
  reason: string,
  message: string,
): Promise<PassResult> {
  try {
    ctx.caches.csrs.assume(await ctx.api.decideCsr(csr, approve, reason, message));
    return done();
  } catch (error) {
    if (!conflict(error)) throw error;
    return done(500);
  }
}
