// Writes this controller's one condition on a KubeadmConfig or a Machine when it changed (server-
// side apply of that entry alone), serving the written object from the cache until the watch
// brings it, and counts it. The caller decides what else a change means (Events, enqueues).
import { applyCondition } from './cluster-api.ts';
import { conditionChanged, type DesiredCondition, nextCondition } from './conditions.ts';
import type { CapiContext } from './context.ts';
import { type CapiCondition, conditionOf, KUBEADM_CONFIG_KIND, type MACHINE_KIND } from './resources.ts';

type Target = {
  metadata: { name: string; namespace: string; generation?: number | undefined };
  status?: { conditions?: CapiCondition[] | undefined } | undefined;
};

/** `{ previous }` when the condition was written (previous: what it said before), else undefined. */
export async function writeCondition(
  ctx: CapiContext,
  kind: typeof KUBEADM_CONFIG_KIND | typeof MACHINE_KIND,
  object: Target,
  desired: DesiredCondition,
): Promise<{ previous: CapiCondition | undefined } | undefined> {
  const previous = conditionOf(object, desired.type);
  const next = nextCondition(previous, desired, ctx.now(), object.metadata.generation);
  if (!conditionChanged(previous, next)) return undefined;
  const written = await applyCondition(ctx.kubeConfig, kind, object.metadata, next);
  (kind === KUBEADM_CONFIG_KIND ? ctx.caches.configs : ctx.caches.machines).assume(written);
  ctx.metrics.conditions.inc({ kind, reason: desired.reason });
  return { previous };
}
