// A FlavorClass's status, decided purely: how many verified Nodes carry the flavor now, and a
// Ready condition saying whether the controller can apply the spec it observed (cert-manager's
// shape: observedGeneration on the status and on the condition, lastTransitionTime kept while the
// condition's status stays). The FlavorClass status reconciler (src/controller/class-status.ts)
// gathers the inputs from the caches and writes the result only when it differs.
import { type SyncedKey, syncConflictMessage } from './capi-synced-keys.ts';
import { sameJson } from './json-equal.ts';
import {
  type Condition,
  FlavorClassConditionType,
  FlavorClassSpecSchema,
  type FlavorClassStatus,
  QUARANTINE_TAINT_KEY,
} from './resources.ts';
import { rfc3339 } from './rfc3339.ts';
import { parseVerificationRecord, VERIFIED_ANNOTATION } from './verification-record.ts';

/** What of a Node says which flavor it carries. */
export interface NodeFlavorFacts {
  annotations?: Record<string, string>;
  taints?: { key: string }[];
}

/**
 * The FlavorClass a Node carries: the class its verification record names, unless the Node is
 * quarantined (a Node the controller stripped loses the record too; the taint covers the moment
 * between). Only the controller writes the record and the guard keeps everyone else off it, so
 * its presence is what "verified" means here; whether it is genuine is the node reconciler's
 * question, which removes a record that is not.
 */
export function carriedFlavor(node: NodeFlavorFacts): string | undefined {
  if (node.taints?.some((t) => t.key === QUARANTINE_TAINT_KEY)) return undefined;
  return parseVerificationRecord(node.annotations?.[VERIFIED_ANNOTATION])?.flavorClass;
}

export interface ClassStatusInput {
  generation: number | undefined;
  /** The spec as stored (unchecked: an object stored before a stricter CRD may not pass today). */
  spec: unknown;
  /** Verified Nodes that carry the flavor now. */
  nodes: number;
  current: FlavorClassStatus | undefined;
  now: Date;
  /** The class's keys Cluster API also writes to Nodes (clusterApiSyncedKeys); none when absent. */
  syncedKeys?: SyncedKey[];
}

function readyCondition(spec: unknown): Omit<Condition, 'lastTransitionTime' | 'observedGeneration'> {
  const parsed = FlavorClassSpecSchema.safeParse(spec ?? {});
  if (parsed.success)
    return {
      type: FlavorClassConditionType.Ready,
      status: 'True',
      reason: 'Accepted',
      message: 'the spec is valid: the controller applies it to every verified node of this flavor',
    };
  const issue = parsed.error.issues[0];
  const where = issue && issue.path.length > 0 ? `spec.${issue.path.join('.')}: ` : '';
  return {
    type: FlavorClassConditionType.Ready,
    status: 'False',
    reason: 'InvalidSpec',
    message: `${where}${issue?.message ?? 'invalid'}: writes of this flavor to nodes fail until the FlavorClass is fixed (re-apply it; the CRD validates it)`,
  };
}

/** Present only while some keys clash with Cluster API's label sync (a warning, not a state). */
function syncConflictCondition(
  keys: SyncedKey[] | undefined,
): Omit<Condition, 'lastTransitionTime' | 'observedGeneration'> | undefined {
  if (!keys || keys.length === 0) return undefined;
  return {
    type: FlavorClassConditionType.ClusterAPISyncConflict,
    status: 'True',
    reason: 'KeysInSyncedDomains',
    message: syncConflictMessage(keys),
  };
}

/** The status the FlavorClass should have. */
export function desiredClassStatus(input: ClassStatusInput): FlavorClassStatus {
  const stamped = (condition: Omit<Condition, 'lastTransitionTime' | 'observedGeneration'>): Condition => {
    const previous = input.current?.conditions?.find((c) => c.type === condition.type);
    return {
      ...condition,
      ...(input.generation === undefined ? {} : { observedGeneration: input.generation }),
      lastTransitionTime:
        previous && previous.status === condition.status ? previous.lastTransitionTime : rfc3339(input.now),
    };
  };
  const conflict = syncConflictCondition(input.syncedKeys);
  return {
    ...(input.generation === undefined ? {} : { observedGeneration: input.generation }),
    nodes: input.nodes,
    conditions: [stamped(readyCondition(input.spec)), ...(conflict ? [stamped(conflict)] : [])],
  };
}

/** Whether the stored status differs from the desired one (as the API server compares: key order aside). */
export function classStatusChanged(
  current: FlavorClassStatus | undefined,
  desired: FlavorClassStatus,
): boolean {
  return !sameJson(current ?? {}, desired);
}
