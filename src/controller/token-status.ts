// Read-modify-write of a FlavoredToken's status with optimistic concurrency: the first attempt
// uses the cached object; a 409 (someone wrote first) re-reads from the API server and re-runs
// the mutation on fresh data, so a decision is never written over a newer state.
// A status equal to the stored one (up to key order) is not written at all.
import { sameJson } from '../flavor/json-equal.ts';
import type { Condition, FlavoredTokenStatus } from '../flavor/resources.ts';
import { rfc3339 } from '../flavor/rfc3339.ts';
import { KubeError } from '../kube/kube-error.ts';
import type { StoredToken } from '../kube/token-writes.ts';
import type { ControllerContext } from './context.ts';

const MAX_ATTEMPTS = 5;

/** True once the token's bootstrap Secret is known gone: it is never deleted again. */
const SECRET_DELETED_CONDITION = 'SecretDeleted';

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

export async function updateTokenStatus(
  ctx: ControllerContext,
  name: string,
  mutate: (token: StoredToken) => Promise<FlavoredTokenStatus | undefined>,
): Promise<StoredToken | undefined> {
  let token = ctx.caches.tokens.get(name);
  for (let attempt = 1; token && attempt <= MAX_ATTEMPTS; attempt++) {
    const status = await mutate(token);
    if (!status || sameJson(status, token.status ?? {})) return token;
    try {
      const written = await ctx.api.writeTokenStatus(token, status);
      ctx.caches.tokens.assume(written);
      return written;
    } catch (error) {
      if (!(error instanceof KubeError) || error.status !== 409 || attempt === MAX_ATTEMPTS) throw error;
      token = await ctx.api.readToken(name);
      if (!token) return undefined;
      ctx.caches.tokens.assume(token);
    }
  }
  return token;
}
