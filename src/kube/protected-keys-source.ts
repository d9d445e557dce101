// The protected key sets, kept current from the FlavorClass cache.

import {
  type FlavorClassKeys,
  type ProtectedKeys,
  protectedKeysFromFlavorClasses,
} from '../flavor/admission.ts';
import type { KubeConfig } from '../runtime/kubeconfig.ts';
import type { RestartReason } from '../runtime/listwatch.ts';
import { type FlavorClassCache, flavorClassCache } from './flavor-classes.ts';

/** Where the admission guard reads the keys it protects; `onChange` fires after they changed. */
export interface ProtectedKeysSource {
  protectedKeys(): ProtectedKeys;
  /** May return an unsubscribe function, which the guard calls when it stops. */
  onChange(listener: () => void): unknown;
  /** Resolves once the keys reflect every FlavorClass (the guard waits for it before serving). */
  ready?: Promise<void>;
}

/**
 * The protected keys kept current from the process's FlavorClass cache (flavor-classes.ts); the
 * cache's owner starts and stops it. `ready` resolves once the cache has its first list.
 */
export function protectedKeysFrom(
  classes: FlavorClassCache,
): ProtectedKeysSource & { onChange(listener: () => void): () => void; stop(): void } {
  const listeners: (() => void)[] = [];
  // Only the key names matter here; values (possibly opaque aliases) are dropped at once.
  const current = () => protectedKeysFromFlavorClasses(classes.list().map((c) => keysOnly(c.spec)));
  let keys = current();
  let fingerprint = keysFingerprint(keys);
  const removeHandler = classes.addEventHandler(() => {
    const next = current();
    const nextFingerprint = keysFingerprint(next);
    keys = next;
    // A relabelled description or a status update changes no key: nobody needs to hear of it.
    if (nextFingerprint === fingerprint) return;
    fingerprint = nextFingerprint;
    for (const listener of listeners) listener();
  });
  return {
    protectedKeys: () => keys,
    onChange: (listener) => {
      listeners.push(listener);
      return () => {
        const index = listeners.indexOf(listener);
        if (index >= 0) listeners.splice(index, 1);
      };
    },
    // A cache stopped before its first list must not let the guard serve with no keys (open).
    ready: classes.waitForSync().then(() => {
      if (!classes.hasSynced) throw new Error('the FlavorClass cache stopped before its first list');
    }),
    stop: removeHandler,
  };
}

/** The protected keys from a FlavorClass watch of their own (tests and benches run the guard alone). */
export function watchProtectedKeys(
  kubeConfig: KubeConfig,
  onRestart?: (reason: RestartReason, error?: Error) => void,
): ProtectedKeysSource & { onChange(listener: () => void): () => void; stop(): void } {
  const classes = flavorClassCache(kubeConfig, onRestart);
  const source = protectedKeysFrom(classes);
  void classes.start();
  return {
    ...source,
    stop: () => {
      source.stop();
      classes.stop();
    },
  };
}

function keysOnly(spec: FlavorClassKeys | undefined): FlavorClassKeys {
  const blank = (map: Record<string, string> | undefined) =>
    Object.fromEntries(Object.keys(map ?? {}).map((key) => [key, '']));
  return {
    labels: blank(spec?.labels),
    annotations: blank(spec?.annotations),
    taints: (spec?.taints ?? []).map((t) => ({ key: t.key })),
  };
}

/** Equal for equal key sets, whatever the order. */
function keysFingerprint(keys: ProtectedKeys): string {
  const sorted = (set: ReadonlySet<string>) => [...set].sort();
  return JSON.stringify([keys.prefix, sorted(keys.labels), sorted(keys.annotations), sorted(keys.taints)]);
}
