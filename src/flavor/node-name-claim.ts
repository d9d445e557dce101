// The join record, pure (ADRs 0011 and 0016). A NodeNameClaim named after a node name is the one
// linearisation point per name (the API server's create succeeds once) and carries the join that
// claimed it from request to outcome: its token and request (spec.holder), the Node's UID once
// seen, verified or refused and why (status.join), and the name's recent history. This file
// builds each version of the record the join reconciler writes, says whether another token's
// join still holds the name, and what the cluster's state means for a recorded join (released,
// collectable). The controller does the reads and writes (src/controller/joins.ts); nothing here
// is kept in memory between decisions.
import {
  API_VERSION,
  CLAIM_FINALIZER,
  type ClaimHolder,
  type FlavoredTokenStatus,
  type Join,
  type JoinFailure,
  type JoinHistoryEntry,
  LIMITS,
  NODE_NAME_CLAIM_KIND,
  type NodeNameClaim,
  TOKEN_ID_LABEL,
  type TokenBinding,
} from './resources.ts';

/** A new join's record: the name claimed for `holder`'s request. */
export function newClaim(nodeName: string, holder: ClaimHolder): NodeNameClaim {
  return {
    apiVersion: API_VERSION,
    kind: NODE_NAME_CLAIM_KIND,
    metadata: { name: nodeName, labels: { [TOKEN_ID_LABEL]: holder.tokenID }, finalizers: [CLAIM_FINALIZER] },
    spec: { holder },
    status: {
      join: joinOf(holder),
      history: [{ at: holder.claimedAt, event: 'Claimed', tokenID: holder.tokenID, csrName: holder.csrName }],
    },
  };
}

function joinOf(holder: ClaimHolder): Join {
  return { tokenName: holder.tokenName, tokenID: holder.tokenID, csrName: holder.csrName };
}

/** The history with `entry` appended, the newest LIMITS.joinHistory kept. */
export function withHistory(
  history: readonly JoinHistoryEntry[] | undefined,
  entry: JoinHistoryEntry,
): JoinHistoryEntry[] {
  const message =
    entry.message === undefined ? {} : { message: entry.message.slice(0, LIMITS.messageLength) };
  return [...(history ?? []), { ...entry, ...message }].slice(-LIMITS.joinHistory);
}

/** The record claimed again by a new join (it was released, or its holder's join is over). */
export function takenOverClaim(claim: NodeNameClaim, holder: ClaimHolder): NodeNameClaim {
  return {
    ...claim,
    metadata: {
      ...claim.metadata,
      labels: { ...claim.metadata.labels, [TOKEN_ID_LABEL]: holder.tokenID },
      finalizers: [
        ...(claim.metadata.finalizers ?? []).filter((f) => f !== CLAIM_FINALIZER),
        CLAIM_FINALIZER,
      ],
    },
    spec: { holder },
    status: {
      join: joinOf(holder),
      history: withHistory(claim.status?.history, {
        at: holder.claimedAt,
        event: 'Claimed',
        tokenID: holder.tokenID,
        csrName: holder.csrName,
      }),
    },
  };
}

/**
 * A retry of the same join (its first request never got a certificate, join-request.ts): the
 * join's approvable request moves to the retry's; the join stays the one that counted the use.
 */
export function retriedClaim(claim: NodeNameClaim, csrName: string, at: string): NodeNameClaim {
  const holder = claim.spec.holder as ClaimHolder;
  return {
    ...claim,
    spec: { holder: { ...holder, csrName } },
    status: {
      ...claim.status,
      history: withHistory(claim.status?.history, { at, event: 'Retried', tokenID: holder.tokenID, csrName }),
    },
  };
}

/**
 * A rejoin token's machine, re-installed and attested again, coming back to its own Node (ADR
 * 0014): a new join of the same machine under the name (it counts a use), keeping the Node.
 */
export function reboundClaim(claim: NodeNameClaim, csrName: string, at: string): NodeNameClaim {
  const holder = claim.spec.holder as ClaimHolder;
  const next: ClaimHolder = { ...holder, csrName, claimedAt: at };
  const join = claim.status?.join;
  return {
    ...claim,
    spec: { holder: next },
    status: {
      ...claim.status,
      join: {
        ...joinOf(next),
        ...(join?.nodeUID ? { nodeUID: join.nodeUID, registeredAt: join.registeredAt } : {}),
      },
      history: withHistory(claim.status?.history, {
        at,
        event: 'Rebound',
        tokenID: holder.tokenID,
        csrName,
        ...(join?.nodeUID ? { nodeUID: join.nodeUID } : {}),
      }),
    },
  };
}

/**
 * The ledger entry a join's use is counted under on its token (token-status.ts withUse): the
 * name, the request that made the join, and when it claimed the name.
 */
export function useOf(claim: NodeNameClaim): TokenBinding | undefined {
  const holder = claim.spec.holder;
  const join = claim.status?.join;
  if (!holder || !claim.metadata.name) return undefined;
  return {
    nodeName: claim.metadata.name,
    csrName: join?.csrName ?? holder.csrName,
    boundAt: holder.claimedAt,
  };
}

/** Whether the token's ledger counts this record's join already (a join judged again counts none). */
export function useCounted(claim: NodeNameClaim, ledger: readonly TokenBinding[] | undefined): boolean {
  const use = useOf(claim);
  return (
    use !== undefined && (ledger ?? []).some((b) => b.nodeName === use.nodeName && b.csrName === use.csrName)
  );
}

/** Why a record is released: its join ended, and the name is free again (uses are not given back). */
export interface Release {
  reason: 'NodeGone' | 'Revoked' | 'Refused' | 'TokenGone';
  message: string;
}

/**
 * The record with its holder gone: the name is free; the join and history stay, for readers. Its
 * finalizer goes with the holder (a deletion asked for meanwhile completes now).
 */
export function releasedClaim(claim: NodeNameClaim, at: string, why: Release): NodeNameClaim {
  const holder = claim.spec.holder;
  const finalizers = (claim.metadata.finalizers ?? []).filter((f) => f !== CLAIM_FINALIZER);
  return {
    ...claim,
    metadata: { ...claim.metadata, finalizers },
    spec: { releasedAt: at },
    status: {
      ...claim.status,
      history: withHistory(claim.status?.history, {
        at,
        event: 'Released',
        ...(holder ? { tokenID: holder.tokenID, csrName: holder.csrName } : {}),
        ...(claim.status?.join?.nodeUID ? { nodeUID: claim.status.join.nodeUID } : {}),
        reason: why.reason,
        message: why.message,
      }),
    },
  };
}

/** What became of the join after its approval: the Node seen, and verified or refused. */
export interface NodeOutcome {
  uid: string;
  /** When its genuine verification record for this join's token says it was verified. */
  verifiedAt?: string;
  /** Why it is not verified (the node reconciler's reason, from the Node's refusal record). */
  failure?: { reason: string; message: string };
}

/**
 * The record as it should say `outcome` (the same object when nothing changes: callers compare by
 * identity). The first Node seen is the join's; a verified node that lost its flavor since keeps
 * the time it was verified and gains the failure, so no reader shows it as verified any more. A
 * refusal keeps its first time while the reason stays. `secretDeleted`: the consumed token's
 * Secret was deleted before this write (done once, then recorded).
 */
export function withNodeOutcome(
  claim: NodeNameClaim,
  outcome: NodeOutcome,
  now: string,
  secretDeleted = false,
): NodeNameClaim {
  const join = claim.status?.join;
  if (!join || (join.nodeUID !== undefined && join.nodeUID !== outcome.uid)) return claim;
  let next: Join = join;
  const history: JoinHistoryEntry[] = [];
  const step = (event: JoinHistoryEntry['event'], extra: Partial<JoinHistoryEntry> = {}) =>
    history.push({
      at: now,
      event,
      tokenID: join.tokenID,
      csrName: join.csrName,
      nodeUID: outcome.uid,
      ...extra,
    });
  if (join.nodeUID === undefined) {
    next = { ...next, nodeUID: outcome.uid, registeredAt: now };
    step('Registered');
  }
  if (outcome.verifiedAt !== undefined) {
    if (next.verifiedAt === undefined || next.failure !== undefined) {
      const { failure: _cleared, ...rest } = next;
      next = { ...rest, verifiedAt: next.verifiedAt ?? outcome.verifiedAt };
      step('Verified');
    }
  } else if (outcome.failure && next.failure?.reason !== outcome.failure.reason) {
    const failure: JoinFailure = {
      reason: outcome.failure.reason,
      message: outcome.failure.message.slice(0, LIMITS.messageLength),
      since: now,
    };
    next = { ...next, failure };
    step('Refused', { reason: failure.reason, message: failure.message });
  }
  if (secretDeleted && !next.secretDeleted) next = { ...next, secretDeleted: true };
  if (next === join) return claim;
  let entries = claim.status?.history;
  for (const entry of history) entries = withHistory(entries, entry);
  return { ...claim, status: { ...claim.status, join: next, ...(entries ? { history: entries } : {}) } };
}

/** What an existing claim means to the token that wants the name. */
export type ClaimStanding =
  /** This token holds it already (its join, or an earlier join of it under this name). */
  | { kind: 'ours' }
  /** Released: anyone may take it over (at its resourceVersion). */
  | { kind: 'free' }
  /** Another token holds it: whether it may be taken depends on that token's join. */
  | { kind: 'other'; holder: ClaimHolder };

export function claimStanding(claim: NodeNameClaim, tokenUID: string): ClaimStanding {
  const holder = claim.spec.holder;
  if (!holder) return { kind: 'free' };
  if (holder.tokenUID === tokenUID) return { kind: 'ours' };
  return { kind: 'other', holder };
}

/** The holder's token, the Node of the name and the holder's request, as read (fresh, or cached). */
export interface HolderFacts {
  token?: { uid: string; revoked: boolean; deleting: boolean };
  node?: { uid: string };
  /** The join's request was denied (or failed): no certificate came of it. */
  requestRefused?: boolean;
}

/**
 * Whether a recorded join still holds its name, by the rule a join is live: registered, while its
 * Node (that UID) is; not registered yet, until its token is revoked, deleted or re-made (another
 * UID), or its request was refused. Every fact that ends a join is final (a revocation, a deletion,
 * a Node gone, a denial never revert), so a cache that says "ended" is right, and one that says
 * "holds" may only lag.
 */
export function joinHoldsName(claim: NodeNameClaim, facts: HolderFacts): boolean {
  const holder = claim.spec.holder;
  if (!holder) return false;
  const token = facts.token;
  if (!token || token.uid !== holder.tokenUID) return false;
  const nodeUID = claim.status?.join?.nodeUID;
  if (nodeUID !== undefined) return nodeUID === facts.node?.uid;
  return !token.revoked && !token.deleting && !facts.requestRefused;
}

/** Why a held record's join is over, if it is (joinHoldsName false): what its release says. */
export function releaseOf(claim: NodeNameClaim, facts: HolderFacts): Release | undefined {
  if (joinHoldsName(claim, facts)) return undefined;
  const holder = claim.spec.holder;
  if (!holder) return undefined;
  const nodeUID = claim.status?.join?.nodeUID;
  if (!facts.token || facts.token.uid !== holder.tokenUID)
    return {
      reason: 'TokenGone',
      message: `token ${holder.tokenID} is gone: its join no longer holds the name`,
    };
  if (nodeUID !== undefined)
    return { reason: 'NodeGone', message: `node ${claim.metadata.name} is gone: its name is free again` };
  if (facts.token.revoked || facts.token.deleting)
    return {
      reason: 'Revoked',
      message: `token ${holder.tokenID} was revoked before its node registered: the name is free again`,
    };
  return {
    reason: 'Refused',
    message: `CSR ${holder.csrName} was refused: the name is free again`,
  };
}

/**
 * A released record is collected (deleted) once nothing can still come of it: its Node and its
 * last request are gone, and `graceMs` passed since its release. Until then it keeps quarantining a
 * Node registered under its name (ADR 0012) and shows its history. Milliseconds to wait, 0 to
 * collect now, or undefined: never (held, or its Node or request still there).
 */
export function collectAfterMs(
  claim: NodeNameClaim,
  facts: { nodeExists: boolean; requestExists: boolean },
  now: Date,
  graceMs: number,
): number | undefined {
  if (claim.spec.holder || facts.nodeExists || facts.requestExists) return undefined;
  const releasedAt = Date.parse(claim.spec.releasedAt ?? '');
  if (!Number.isFinite(releasedAt)) return 0;
  return Math.max(0, releasedAt + graceMs - now.getTime());
}

/** The join a record carries, as the binding the node verdict and readers take it. */
export function bindingOf(claim: NodeNameClaim): TokenBinding | undefined {
  const holder = claim.spec.holder;
  const name = claim.metadata.name;
  if (!holder || !name) return undefined;
  const join = claim.status?.join;
  return {
    nodeName: name,
    csrName: holder.csrName,
    boundAt: holder.claimedAt,
    ...(join?.nodeUID ? { nodeUID: join.nodeUID } : {}),
    ...(join?.verifiedAt ? { verifiedAt: join.verifiedAt } : {}),
    ...(join?.failure ? { failure: join.failure } : {}),
  };
}

/**
 * The token as its readers show it (GET /v1/tokens, `kubectl flavor`, the page): its status with
 * the bindings its joins' records carry (ADR 0016). A token's status keeps the ledger of its uses;
 * what became of each join is on the join's record. A join whose record no longer holds the name
 * for this token (its Node gone, the name released) is not shown, as a released binding was not;
 * its use stays counted. A record written before join records existed shows what the ledger says.
 */
export function tokenWithJoins<T extends { metadata: { uid?: string }; status?: FlavoredTokenStatus }>(
  token: T,
  records: readonly NodeNameClaim[],
): T {
  const ledger = token.status?.bindings ?? [];
  const joins: TokenBinding[] = [];
  for (const record of records) {
    if (!token.metadata.uid || record.spec.holder?.tokenUID !== token.metadata.uid) continue;
    const binding = bindingOf(record);
    if (!binding) continue;
    const legacy = record.status?.join ? undefined : ledger.find((b) => b.nodeName === binding.nodeName);
    joins.push({ ...legacy, ...binding });
  }
  if (!token.status) return joins.length === 0 ? token : { ...token, status: { bindings: joins } };
  return {
    ...token,
    status: { ...token.status, bindings: joins.sort((a, b) => a.boundAt.localeCompare(b.boundAt)) },
  };
}
