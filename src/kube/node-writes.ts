// Writing a Node's flavor: server-side apply under our own field manager for what we want
// (labels and annotations we own come and go with the FlavorClass), with the Node's
// resourceVersion as a precondition so a decision made on a stale cache is never written;
// then an explicit removal of protected keys that someone else owns (the kubelet's token
// label, a label an intruder set), which apply alone cannot remove.

import type { DesiredNodeState } from '../flavor/converge.ts';
import { kubeJson } from './fetch.ts';
import { KubeError } from './kube-error.ts';
import type { KubeConfig } from './kubeconfig.ts';

export const FIELD_MANAGER = 'nodeflavor';

export interface TrimmedNode {
  metadata: {
    name: string;
    uid: string;
    resourceVersion: string;
    creationTimestamp: string;
    labels?: Record<string, string>;
    annotations?: Record<string, string>;
    deletionTimestamp?: string;
  };
  spec: { taints?: { key: string; value?: string; effect: string }[] };
}

/** Keeps what the controller needs of a Node; status and images are most of its size. */
export function trimNode(raw: unknown): TrimmedNode {
  const node = raw as { metadata?: TrimmedNode['metadata']; spec?: TrimmedNode['spec'] };
  const meta = node.metadata ?? ({} as TrimmedNode['metadata']);
  const trimmed: TrimmedNode = {
    metadata: {
      name: meta.name,
      uid: meta.uid,
      resourceVersion: meta.resourceVersion,
      creationTimestamp: meta.creationTimestamp,
    },
    spec: {},
  };
  if (meta.labels) trimmed.metadata.labels = meta.labels;
  if (meta.annotations) trimmed.metadata.annotations = meta.annotations;
  if (meta.deletionTimestamp) trimmed.metadata.deletionTimestamp = meta.deletionTimestamp;
  if (node.spec?.taints) trimmed.spec.taints = node.spec.taints;
  return trimmed;
}

/** RFC 6901: a map key as one JSON Pointer segment. */
function pointer(key: string): string {
  return key.replaceAll('~', '~0').replaceAll('/', '~1');
}

/**
 * The removals as a JSON patch whose preconditions are the facts the decision rests on, not the
 * whole Node's resourceVersion: the same uid, the same taints (the apply that follows writes the
 * complete list computed from them), and each removed key still holding the value that was
 * judged. The kubelet's status updates, which land right after registration (when a new node's
 * first reconcile writes), change none of them, so they no longer turn that write into a 409.
 * Without cached taints to compare, the resourceVersion is the precondition, as before.
 */
export function removalPatch(node: TrimmedNode, desired: DesiredNodeState): object[] {
  const ops: object[] = [{ op: 'test', path: '/metadata/uid', value: node.metadata.uid }];
  if (node.spec.taints && node.spec.taints.length > 0) {
    ops.push({ op: 'test', path: '/spec/taints', value: node.spec.taints });
  } else {
    ops.push({ op: 'test', path: '/metadata/resourceVersion', value: node.metadata.resourceVersion });
  }
  const remove = (field: 'labels' | 'annotations', keys: string[]) => {
    for (const key of keys) {
      const path = `/metadata/${field}/${pointer(key)}`;
      ops.push({ op: 'test', path, value: node.metadata[field]?.[key] ?? '' }, { op: 'remove', path });
    }
  };
  remove('labels', desired.removeLabels);
  remove('annotations', desired.removeAnnotations);
  return ops;
}

/** A JSON patch whose failed `test` (HTTP 422) is reported as the conflict it is (409). */
async function patchOrConflict(
  kubeConfig: KubeConfig,
  path: string,
  name: string,
  ops: object[],
): Promise<TrimmedNode> {
  try {
    return await kubeJson<TrimmedNode>(kubeConfig, 'PATCH', path, {
      action: `remove protected keys from node ${name}`,
      contentType: 'application/json-patch+json',
      query: { fieldManager: FIELD_MANAGER },
      body: ops,
    });
  } catch (error) {
    if (error instanceof KubeError && error.status === 422 && /test/i.test(error.message)) {
      // Not the API server's text: a failed test may quote the value it tested (a flavor token).
      throw new KubeError(
        409,
        'Conflict',
        `node ${name} changed since it was judged (a JSON patch test failed)`,
      );
    }
    throw error;
  }
}

export async function writeNodeState(
  kubeConfig: KubeConfig,
  node: TrimmedNode,
  desired: DesiredNodeState,
): Promise<void> {
  const name = node.metadata.name;
  const path = `/api/v1/nodes/${encodeURIComponent(name)}`;
  let resourceVersion = node.metadata.resourceVersion;
  // Removals first, so that once the flavor shows, the token label is already gone.
  if (desired.removeLabels.length > 0 || desired.removeAnnotations.length > 0) {
    const patched = await patchOrConflict(kubeConfig, path, name, removalPatch(node, desired));
    resourceVersion = patched.metadata.resourceVersion;
  }
  await kubeJson<TrimmedNode>(kubeConfig, 'PATCH', path, {
    action: `apply the flavor of node ${name}`,
    contentType: 'application/apply-patch+yaml',
    query: { fieldManager: FIELD_MANAGER, force: true },
    body: {
      apiVersion: 'v1',
      kind: 'Node',
      metadata: {
        name,
        // Both preconditions: resourceVersion alone does not stop apply from CREATING a Node
        // that was deleted meanwhile (checked on 1.37); a uid makes that a 409 instead.
        uid: node.metadata.uid,
        resourceVersion,
        labels: desired.labels,
        annotations: desired.annotations,
      },
      spec: { taints: desired.taints },
    },
  });
}
