// The conditions `nodeflavor capi` owns on Cluster API objects, in the metav1.Condition shape that
// v1beta2 objects use (a list keyed by type, so the controller applies its own entry and Cluster
// API's patch helper keeps the others). Pure: the next condition keeps its lastTransitionTime
// while its status stays, and is written only when something in it changed.
import { rfc3339 } from '../flavor/rfc3339.ts';
import type { CapiCondition } from './resources.ts';

/** Messages are for humans; Cluster API's schema caps them (and nothing needs more). */
const MAX_MESSAGE = 10_240;

export interface DesiredCondition {
  type: string;
  status: 'True' | 'False' | 'Unknown';
  reason: string;
  message: string;
}

export function nextCondition(
  previous: CapiCondition | undefined,
  desired: DesiredCondition,
  now: Date,
  generation: number | undefined,
): Required<Pick<CapiCondition, 'type' | 'status' | 'reason' | 'message' | 'lastTransitionTime'>> &
  Pick<CapiCondition, 'observedGeneration'> {
  const keep = previous !== undefined && previous.status === desired.status && previous.lastTransitionTime;
  return {
    type: desired.type,
    status: desired.status,
    reason: desired.reason,
    message: desired.message.slice(0, MAX_MESSAGE),
    lastTransitionTime: keep ? (previous.lastTransitionTime as string) : rfc3339(now),
    ...(generation === undefined ? {} : { observedGeneration: generation }),
  };
}

/** Whether writing `next` would change what the object says (its time aside while the status stays). */
export function conditionChanged(previous: CapiCondition | undefined, next: CapiCondition): boolean {
  return (
    previous === undefined ||
    previous.status !== next.status ||
    previous.reason !== next.reason ||
    (previous.message ?? '') !== (next.message ?? '') ||
    previous.observedGeneration !== next.observedGeneration
  );
}
