// A FlavoredToken's status, pure. Two reconcilers write it, each its own part, both at the
// token's resourceVersion (ADR 0016): the join reconciler counts a use (status.uses, the ledger
// of the joins that used it, status.bindings, with the proof each used, status.attestation.bound,
// and refusals, status.rejections), the token reconciler keeps its lifecycle (expiry,
// revocation, the bootstrap Secret's deletion, status.attestation.deleted). What the
// conditions say follows from spec, uses and time alone (lifecycleStatus), so both writers set the
// same conditions and a join costs one token write, not two.

import { withProofBound } from './attestation-proofs.ts';
import type { Condition, FlavoredToken, FlavoredTokenStatus, TokenBinding } from './resources.ts';
import { rfc3339 } from './rfc3339.ts';
import { tokenExpiresAt, tokenFacts } from './token-facts.ts';
import { withRejections } from './token-lifecycle.ts';

/** True once the token's bootstrap Secret is known gone: it is never deleted again. */
export const SECRET_DELETED_CONDITION = 'SecretDeleted';

export function setCondition(
  conditions: Condition[],
  next: Omit<Condition, 'lastTransitionTime'>,
  now: Date,
): Condition[] {
  const existing = conditions.find((c) => c.type === next.type);
  const lastTransitionTime =
    existing && existing.status === next.status ? existing.lastTransitionTime : rfc3339(now);
  const updated = { ...next, lastTransitionTime } as Condition;
  // In place: the list is keyed by type, and a moved condition would be a change to write.
  return existing ? conditions.map((c) => (c.type === next.type ? updated : c)) : [...conditions, updated];
}

/** What the lifecycle conditions are computed from. */
export interface TokenLifecycleFacts {
  tokenId: string;
  maxUses: number;
  uses: number;
  expiresAt: Date;
  revoked: boolean;
  generation: number | undefined;
}

export interface TokenLifecycleState {
  consumed: boolean;
  expired: boolean;
  revoked: boolean;
}

export function lifecycleState(facts: TokenLifecycleFacts, now: Date): TokenLifecycleState {
  return {
    consumed: facts.maxUses > 0 && facts.uses >= facts.maxUses,
    expired: now.getTime() >= facts.expiresAt.getTime(),
    revoked: facts.revoked,
  };
}

/** The status with its lifecycle (token ID, expiry, uses and the conditions they imply) set. */
export function lifecycleStatus(
  status: FlavoredTokenStatus,
  facts: TokenLifecycleFacts,
  now: Date,
): FlavoredTokenStatus {
  const { consumed, expired, revoked } = lifecycleState(facts, now);
  const generation = facts.generation;
  let conditions = status.conditions ?? [];
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
  flag('Expired', expired, 'Expired', `expired at ${facts.expiresAt.toISOString()}`);
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
  return {
    ...status,
    tokenID: facts.tokenId,
    expiresAt: rfc3339(facts.expiresAt),
    uses: facts.uses,
    conditions,
    observedGeneration: generation,
  };
}

/**
 * The status after a join counted a use: the ledger names the join (its node name and request),
 * so a join judged again after a crash finds its use counted and counts none more. Ledger entries
 * of joins that ended (`ended`) are dropped when the list would pass its bound (uses stay).
 */
export function withUse(
  status: FlavoredTokenStatus,
  use: TokenBinding,
  facts: Omit<TokenLifecycleFacts, 'uses'>,
  now: Date,
  ended: (binding: TokenBinding) => boolean,
  maxEntries: number,
): FlavoredTokenStatus {
  let ledger = (status.bindings ?? []).filter((b) => b.nodeName !== use.nodeName);
  if (ledger.length + 1 > maxEntries) ledger = ledger.filter((b) => !ended(b));
  const uses = Math.max(status.uses ?? 0, status.bindings?.length ?? 0) + 1;
  // A token bound to a TPM: the proof the join used stays used (one join per proof, ADR 0014).
  const counted = withProofBound({ ...status, bindings: [...ledger, use] }, use.attestation);
  return lifecycleStatus(counted, { ...facts, uses }, now);
}

/** The status after a join's request was refused: kept on the token, so its holder sees why. */
export function withRefusal(
  status: FlavoredTokenStatus,
  refusal: { csrName: string; nodeName?: string | undefined; reason: string; message: string },
  now: Date,
): FlavoredTokenStatus {
  return { ...status, rejections: withRejections(status.rejections ?? [], [refusal], rfc3339(now)) };
}

/**
 * Whether the bootstrap Secret is known gone. A token bound to a TPM gets a new Secret with each
 * proof of its machine (ADR 0014): one minted by a proof after the deletion was recorded (the
 * status names the proof whose Secret it deleted, not a time in whole seconds) exists again, and
 * goes again.
 */
export function secretDeletedRecorded(
  status: FlavoredTokenStatus | undefined,
  latestProof?: number,
): boolean {
  const deleted = (status?.conditions ?? []).some(
    (c) => c.type === SECRET_DELETED_CONDITION && c.status === 'True',
  );
  if (!deleted) return false;
  return latestProof === undefined || (status?.attestation?.deleted ?? 0) >= latestProof;
}

/** The status that also says the bootstrap Secret is gone (for a token bound to a TPM: that of `latestProof`). */
export function withSecretDeleted(
  status: FlavoredTokenStatus,
  generation: number | undefined,
  now: Date,
  latestProof?: number,
): FlavoredTokenStatus {
  const conditions = setCondition(
    (status.conditions ?? []).filter((c) => c.type !== SECRET_DELETED_CONDITION),
    {
      type: SECRET_DELETED_CONDITION,
      status: 'True',
      reason: 'SecretDeleted',
      message: 'the bootstrap token Secret is deleted: no node can join with this token',
      observedGeneration: generation,
    },
    now,
  );
  return latestProof === undefined
    ? { ...status, conditions }
    : { ...status, conditions, attestation: { ...status.attestation, deleted: latestProof } };
}

/** What a token's lifecycle is decided from (token-status.ts): a revoked or deleting token is revoked. */
export function lifecycleFactsOf(
  token: FlavoredToken & { metadata: { generation?: number } },
): TokenLifecycleFacts {
  const facts = tokenFacts(token);
  return {
    tokenId: facts.tokenId,
    maxUses: facts.maxUses,
    uses: facts.uses,
    expiresAt: tokenExpiresAt(token),
    revoked: facts.revoked || facts.deleting,
    generation: token.metadata.generation,
  };
}
