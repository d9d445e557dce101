// The protected key sets, kept current from a watch on FlavorClasses: for running the admission
// guard without the controller (whose FlavorClass cache otherwise feeds it), and for tests.

import {
  type FlavorClassKeys,
  type ProtectedKeys,
  protectedKeysFromFlavorClasses,
} from '../flavor/admission.ts';
import type { KubeConfig } from './kubeconfig.ts';
import { ListWatch, type RestartReason } from './listwatch.ts';

/** Where the admission guard reads the keys it protects; `onChange` fires after they changed. */
export interface ProtectedKeysSource {
  protectedKeys(): ProtectedKeys;
  /** May return an unsubscribe function, which the guard calls when it stops. */
  onChange(listener: () => void): unknown;
  /** Resolves once the keys reflect every FlavorClass (the guard waits for it before serving). */
  ready?: Promise<void>;
}

interface FlavorClassObject {
  metadata?: { name?: string; resourceVersion?: string };
  spec?: FlavorClassKeys;
}

const FLAVOR_CLASSES_PATH = '/apis/nodeflavor.io/v1alpha1/flavorclasses';

export function watchProtectedKeys(
  kubeConfig: KubeConfig,
  onRestart?: (reason: RestartReason, error?: Error) => void,
): ProtectedKeysSource & { onChange(listener: () => void): () => void; stop(): void } {
  const listeners: (() => void)[] = [];
  let keys = protectedKeysFromFlavorClasses([]);
  let fingerprint = keysFingerprint(keys);
  const cache: ListWatch<FlavorClassObject> = new ListWatch<FlavorClassObject>({
    kubeConfig,
    path: FLAVOR_CLASSES_PATH,
    // Only the key names matter here; values (possibly opaque aliases) are dropped on receipt.
    transform: (raw) => {
      const object = raw as FlavorClassObject;
      return { metadata: object.metadata ?? {}, spec: keysOnly(object.spec) };
    },
    onEvent: () => {
      const next = protectedKeysFromFlavorClasses(cache.list().map((c) => c.spec ?? {}));
      const nextFingerprint = keysFingerprint(next);
      keys = next;
      // A relabelled description or a status update changes no key: nobody needs to hear of it.
      if (nextFingerprint === fingerprint) return;
      fingerprint = nextFingerprint;
      for (const listener of listeners) listener();
    },
    ...(onRestart === undefined ? {} : { onRestart }),
  });
  const ready = cache.start();
  return {
    protectedKeys: () => keys,
    onChange: (listener) => {
      listeners.push(listener);
      return () => {
        const index = listeners.indexOf(listener);
        if (index >= 0) listeners.splice(index, 1);
      };
    },
    ready,
    stop: () => cache.stop(),
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
