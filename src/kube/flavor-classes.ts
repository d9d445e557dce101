// The process's one FlavorClass cache: the controller (verdicts, class status), the issuer (the
// class an issuance names) and the admission guard (the keys it protects) all read this watch,
// each adding its own event handler, instead of keeping three watches of the same objects.

import {
  FLAVOR_CLASS_PLURAL,
  type FlavorClass,
  FlavorClassSchema,
  type FlavorClassSpec,
  GROUP,
  VERSION,
} from '../flavor/resources.ts';
import type { KubeConfig } from '../runtime/kubeconfig.ts';
import { ListWatch, type RestartReason, withoutManagedFields } from '../runtime/listwatch.ts';

export interface StoredFlavorClass {
  metadata: { name: string; resourceVersion?: string; generation?: number };
  spec?: FlavorClassSpec;
}

export type FlavorClassCache = ListWatch<StoredFlavorClass>;

/** A FlavorClass cache not yet started: its owner starts and stops it, the others add handlers. */
export function flavorClassCache(
  kubeConfig: KubeConfig,
  onRestart?: (reason: RestartReason, error?: Error) => void,
): FlavorClassCache {
  return new ListWatch<StoredFlavorClass>({
    kubeConfig,
    path: `/apis/${GROUP}/${VERSION}/${FLAVOR_CLASS_PLURAL}`,
    transform: withoutManagedFields<StoredFlavorClass>,
    ...(onRestart ? { onRestart } : {}),
  });
}

/**
 * The class `name` from the cache: `undefined` when the cache cannot answer yet (not synced: ask
 * the API server, never invent an answer), `null` when the class does not exist or does not
 * match the schema.
 */
export function lookupFlavorClass(cache: FlavorClassCache, name: string): FlavorClass | null | undefined {
  if (!cache.hasSynced) return undefined;
  const raw = cache.get(name);
  if (raw === undefined) return null;
  const parsed = FlavorClassSchema.safeParse(raw);
  return parsed.success ? parsed.data : null;
}
