// The FlavorClass status reconciler, the one writer of FlavorClass status: how many verified
// Nodes carry each flavor (the count kept by indexes.nodeFlavors, fed by the Node cache, so a
// count costs nothing per reconcile) and whether the spec it observed can be applied. It runs on
// the leader only, with its own queue (wiring.ts), and writes through the term's fenced
// KubeConfig like every other leader write; a status equal to the stored one is not written.
// Node churn is coalesced: a class's count is written at most about once per CLASS_COALESCE_MS
// while nodes of it join or leave.

import { clusterApiSyncedKeys, syncRules } from '../flavor/capi-synced-keys.ts';
import { classStatusChanged, desiredClassStatus } from '../flavor/class-status.ts';
import { FlavorClassConditionType, type FlavorClassStatus } from '../flavor/resources.ts';
import type { StoredFlavorClass } from '../kube/flavor-classes.ts';
import type { ControllerContext } from './context.ts';

export const CLASS_COALESCE_MS = 1_000;

type ClassWithStatus = StoredFlavorClass & { status?: FlavorClassStatus };

export async function reconcileClassStatus(ctx: ControllerContext, name: string): Promise<undefined> {
  const stored = ctx.caches.classes.get(name) as ClassWithStatus | undefined;
  if (!stored) return;
  const desired = desiredClassStatus({
    generation: stored.metadata.generation,
    spec: stored.spec,
    nodes: ctx.indexes.nodeFlavors.count(name),
    current: stored.status,
    now: ctx.now(),
    syncedKeys: clusterApiSyncedKeys(
      stored.spec ?? {},
      syncRules(ctx.config.capiSyncedLabelPatterns, ctx.config.capiSyncedAnnotationPatterns),
    ),
  });
  if (!classStatusChanged(stored.status, desired)) return;
  // Served from the cache until the watch brings it: a reconcile in between starts from it.
  ctx.caches.classes.assume(await ctx.api.writeClassStatus(stored, desired));
  const conflict = (status: FlavorClassStatus | undefined) =>
    status?.conditions?.find((c) => c.type === FlavorClassConditionType.ClusterAPISyncConflict)?.message;
  const now = conflict(desired);
  if (now !== undefined && now !== conflict(stored.status))
    ctx.events.emit(
      {
        apiVersion: 'nodeflavor.io/v1alpha1',
        kind: 'FlavorClass',
        name,
        // The cache keeps the whole metadata; StoredFlavorClass types only what the rest reads.
        uid: (stored.metadata as { uid?: string }).uid ?? '',
      },
      'Warning',
      FlavorClassConditionType.ClusterAPISyncConflict,
      now,
    );
}
