// Writing a Node's flavor: server-side apply under our own field manager for what we want
// (labels and annotations we own come and go with the FlavorClass), with the Node's
// resourceVersion as a precondition so a decision made on a stale cache is never written;
// then an explicit removal of protected keys that someone else owns (the kubelet's token
// label, a label an intruder set), which apply alone cannot remove.
import type { KubeConfig } from '@kubernetes/client-node';
import type { DesiredNodeState } from '../flavor/verdict.ts';
import { kubeJson } from './fetch.ts';

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
    const nulls = (keys: string[]) => Object.fromEntries(keys.map((k) => [k, null]));
    const patched = await kubeJson<TrimmedNode>(kubeConfig, 'PATCH', path, {
      action: `remove protected keys from node ${name}`,
      contentType: 'application/merge-patch+json',
      query: { fieldManager: FIELD_MANAGER },
      body: {
        metadata: {
          uid: node.metadata.uid,
          resourceVersion,
          labels: nulls(desired.removeLabels),
          annotations: nulls(desired.removeAnnotations),
        },
      },
    });
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
