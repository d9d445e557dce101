// Typed access to the Cluster API objects `nodeflavor capi` uses, in one place: the list/watch
// caches (trimmed on receipt), the fresh reads and the writes. Writes go through the KubeConfig
// they are given (the leader's fenced one), so a replica that lost the Lease writes nothing more.
//   - KubeadmConfig: a fresh GET, then a PUT with its resourceVersion (finalizer, fill): a write
//     based on anything older than the stored object is refused (409), never merged over it;
//   - conditions: server-side apply of the one condition type this controller owns, on the status
//     subresource (v1beta2 conditions are a list keyed by type: Cluster API's own stay untouched).
import { kubeJson } from '../runtime/fetch.ts';
import type { KubeConfig } from '../runtime/kubeconfig.ts';
import { ListWatch, type ListWatchOptions } from '../runtime/listwatch.ts';
import { type CachedAccessSecret, trimAccessSecret } from './issuer-access.ts';
import {
  BOOTSTRAP_GROUP,
  CAPI_GROUP,
  CAPI_VERSION,
  type CachedCluster,
  CachedClusterSchema,
  type CachedKubeadmConfig,
  CachedKubeadmConfigSchema,
  type CachedMachine,
  CachedMachineSchema,
  type CapiCondition,
  KUBEADM_CONFIG_KIND,
  type MACHINE_KIND,
} from './resources.ts';

export const FIELD_MANAGER = 'nodeflavor-capi';

const KUBEADM_CONFIGS = `/apis/${BOOTSTRAP_GROUP}/${CAPI_VERSION}/kubeadmconfigs`;
const MACHINES = `/apis/${CAPI_GROUP}/${CAPI_VERSION}/machines`;
const CLUSTERS = `/apis/${CAPI_GROUP}/${CAPI_VERSION}/clusters`;

const namespaced = (group: string, plural: string, namespace: string, name: string) =>
  `/apis/${group}/${CAPI_VERSION}/namespaces/${encodeURIComponent(namespace)}/${plural}/${encodeURIComponent(name)}`;

export type RawObject = Record<string, unknown> & {
  metadata: {
    name: string;
    namespace: string;
    uid?: string;
    resourceVersion?: string;
    finalizers?: string[];
    annotations?: Record<string, string>;
  };
};

export interface CapiCaches {
  configs: ListWatch<CachedKubeadmConfig>;
  machines: ListWatch<CachedMachine>;
  clusters: ListWatch<CachedCluster>;
  /** The issuer access Secrets in the controller's own namespace (three keys each, nothing else). */
  access: ListWatch<CachedAccessSecret>;
}

/** Parses with the schema, keeping nothing else: a cached object is as small as what is read of it. */
const trimmed =
  <T>(schema: { parse: (raw: unknown) => T }) =>
  (raw: unknown): T =>
    schema.parse(raw);

export function capiCaches(
  kubeConfig: KubeConfig,
  namespace: string,
  onRestart: ListWatchOptions<{ metadata?: { name?: string } }>['onRestart'],
): CapiCaches {
  const common = { kubeConfig, ...(onRestart ? { onRestart } : {}) };
  return {
    configs: new ListWatch({
      ...common,
      path: KUBEADM_CONFIGS,
      transform: trimmed(CachedKubeadmConfigSchema),
    }),
    machines: new ListWatch({ ...common, path: MACHINES, transform: trimmed(CachedMachineSchema) }),
    clusters: new ListWatch({ ...common, path: CLUSTERS, transform: trimmed(CachedClusterSchema) }),
    access: new ListWatch({
      ...common,
      path: `/api/v1/namespaces/${encodeURIComponent(namespace)}/secrets`,
      transform: trimAccessSecret,
    }),
  };
}

/** The KubeadmConfig as stored now (every field), or undefined when it is gone. */
export async function readKubeadmConfig(
  kubeConfig: KubeConfig,
  namespace: string,
  name: string,
): Promise<RawObject | undefined> {
  try {
    return await kubeJson<RawObject>(
      kubeConfig,
      'GET',
      namespaced(BOOTSTRAP_GROUP, 'kubeadmconfigs', namespace, name),
      {
        action: `read KubeadmConfig ${namespace}/${name}`,
      },
    );
  } catch (error) {
    if ((error as { status?: number }).status === 404) return undefined;
    throw error;
  }
}

/** Writes the whole object back; 409 when it changed since it was read (its resourceVersion). */
export async function updateKubeadmConfig(kubeConfig: KubeConfig, object: RawObject): Promise<RawObject> {
  const { namespace, name } = object.metadata;
  return kubeJson<RawObject>(
    kubeConfig,
    'PUT',
    namespaced(BOOTSTRAP_GROUP, 'kubeadmconfigs', namespace, name),
    {
      action: `update KubeadmConfig ${namespace}/${name}`,
      body: object,
    },
  );
}

/** Applies this controller's one condition on a KubeadmConfig's or a Machine's status. */
export async function applyCondition(
  kubeConfig: KubeConfig,
  kind: typeof KUBEADM_CONFIG_KIND | typeof MACHINE_KIND,
  target: { namespace: string; name: string },
  condition: CapiCondition,
): Promise<unknown> {
  const [group, plural] =
    kind === KUBEADM_CONFIG_KIND ? [BOOTSTRAP_GROUP, 'kubeadmconfigs'] : [CAPI_GROUP, 'machines'];
  return kubeJson(kubeConfig, 'PATCH', `${namespaced(group, plural, target.namespace, target.name)}/status`, {
    action: `set condition ${condition.type} on ${kind} ${target.namespace}/${target.name}`,
    contentType: 'application/apply-patch+yaml',
    query: { fieldManager: FIELD_MANAGER, force: true },
    body: {
      apiVersion: `${group}/${CAPI_VERSION}`,
      kind,
      metadata: { name: target.name, namespace: target.namespace },
      status: { conditions: [condition] },
    },
  });
}

/** The involved object of an Event about a KubeadmConfig or a Machine. */
export function involvedObject(
  kind: typeof KUBEADM_CONFIG_KIND | typeof MACHINE_KIND,
  object: { metadata: { name: string; namespace: string; uid: string } },
) {
  return {
    apiVersion: `${kind === KUBEADM_CONFIG_KIND ? BOOTSTRAP_GROUP : CAPI_GROUP}/${CAPI_VERSION}`,
    kind,
    name: object.metadata.name,
    namespace: object.metadata.namespace,
    uid: object.metadata.uid,
  };
}
