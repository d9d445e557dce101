// The one write nodeflavor makes to a FlavorClass: its status (Helm or an admin owns the spec).

import {
  API_VERSION,
  FLAVOR_CLASS_KIND,
  FLAVOR_CLASS_PLURAL,
  type FlavorClassStatus,
  GROUP,
  VERSION,
} from '../flavor/resources.ts';
import { kubeJson } from '../runtime/fetch.ts';
import type { KubeConfig } from '../runtime/kubeconfig.ts';

/**
 * Replaces the status of the FlavorClass as cached (a PUT of /status with its resourceVersion:
 * a class changed since answers 409, and the caller retries from the fresher cache). Returns the
 * stored FlavorClass.
 */
export async function writeFlavorClassStatus(
  kubeConfig: KubeConfig,
  flavorClass: { metadata: { name: string; resourceVersion?: string }; spec?: unknown },
  status: FlavorClassStatus,
): Promise<unknown> {
  const { name, resourceVersion } = flavorClass.metadata;
  return kubeJson(
    kubeConfig,
    'PUT',
    `/apis/${GROUP}/${VERSION}/${FLAVOR_CLASS_PLURAL}/${encodeURIComponent(name)}/status`,
    {
      action: `update the status of FlavorClass ${name}`,
      body: {
        apiVersion: API_VERSION,
        kind: FLAVOR_CLASS_KIND,
        metadata: { name, resourceVersion },
        spec: flavorClass.spec ?? {},
        status,
      },
    },
  );
}
