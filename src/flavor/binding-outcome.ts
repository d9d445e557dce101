// What a binding records of its Node, pure: the Node's UID, and either the verification (from
// the Node's signed record) or why the node reconciler refused it. The token reconciler writes
// it; the node reconciler asks the same function whether the token needs to hear from it, so the
// two never wake each other for nothing.
import { LIMITS, type TokenBinding } from './resources.ts';
import type { Failure } from './verdict.ts';

/** What the node reconciler found for the Node of a binding's name. */
export interface NodeOutcome {
  uid: string;
  /** When its genuine verification record for this token says it was verified. */
  verifiedAt?: string;
  /** Why it is not verified (only when not verified). */
  failure?: Failure;
}

/**
 * The binding as it should record `outcome`: the same object when nothing changes (callers
 * compare by identity). A binding of another Node UID is not this Node's. The binding follows the
 * node: a verified node that lost its flavor (its class deleted, its token revoked with
 * StripNodes, ...) keeps the time it was verified and gains the failure, so no reader shows it as
 * verified any more; verified again, the failure goes. A refusal keeps its first time while the
 * reason stays.
 */
export function bindingWithNodeOutcome(
  binding: TokenBinding,
  outcome: NodeOutcome | undefined,
  now: string,
): TokenBinding {
  if (!outcome || (binding.nodeUID !== undefined && binding.nodeUID !== outcome.uid)) return binding;
  const { uid } = outcome;
  if (outcome.verifiedAt !== undefined) {
    if (binding.nodeUID === uid && binding.verifiedAt !== undefined && !binding.failure) return binding;
    const { failure: _cleared, ...rest } = binding;
    return { ...rest, nodeUID: uid, verifiedAt: binding.verifiedAt ?? outcome.verifiedAt };
  }
  const failure = outcome.failure;
  if (!failure) return binding;
  if (binding.nodeUID === uid && binding.failure?.reason === failure.reason) return binding;
  return {
    ...binding,
    nodeUID: uid,
    failure:
      binding.failure?.reason === failure.reason
        ? binding.failure
        : { reason: failure.reason, message: failure.message.slice(0, LIMITS.messageLength), since: now },
  };
}
