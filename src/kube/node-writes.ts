// Writing a Node's flavor: ONE JSON patch per write. It sets the labels and annotations the
// decision wants, removes the keys nodeflavor owns (by claim or by its applied record) and does
// not want (the kubelet's token label, a key a FlavorClass dropped, one an intruder set), and
// changes taints one by one. Its preconditions are the facts the decision rests on (the same
// uid, each removed key's judged value, each removed taint where it stands), not the whole
// Node's resourceVersion: the kubelet's status updates, which land right after registration,
// change none of them, so they do not turn the write into a 409.
import type { DesiredNodeState } from '../flavor/converge.ts';
import { FIELD_MANAGER } from '../flavor/resources.ts';
import { kubeJson } from '../runtime/fetch.ts';
import { KubeError } from '../runtime/kube-error.ts';
import type { KubeConfig } from '../runtime/kubeconfig.ts';

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

type Taint = { key: string; value?: string; effect: string };

const taintId = (t: Taint) => `${t.key}\u0000${t.value ?? ''}\u0000${t.effect}`;

function sameTaints(a: Taint[], b: Taint[]): boolean {
  const x = a.map(taintId).sort();
  const y = b.map(taintId).sort();
  return x.length === y.length && x.every((t, i) => t === y[i]);
}

/**
 * The one write that makes the Node as desired: `test` operations for the facts judged, then
 * the changes. A map or list the Node lacks altogether is added whole, and only then does the
 * resourceVersion become the precondition (nothing else could say it is still absent).
 */
export function nodeStatePatch(node: TrimmedNode, desired: DesiredNodeState): object[] {
  const tests: object[] = [{ op: 'test', path: '/metadata/uid', value: node.metadata.uid }];
  const changes: object[] = [];
  let wholeAdded = false;
  const current = node.spec.taints;
  if (!current) {
    if (desired.taints.length > 0) {
      wholeAdded = true;
      changes.push({ op: 'add', path: '/spec/taints', value: desired.taints });
    }
  } else if (!sameTaints(current, desired.taints)) {
    // Element by element, not the whole list: kube-controller-manager adds and lifts its own
    // taints (node.kubernetes.io/not-ready) in the same seconds, appended after ours, and a test
    // of the whole list made a third of the joins' writes conflicts. Each removed taint is tested
    // where it stands; removals run from the last index down so the others stay where tested.
    const wanted = new Set(desired.taints.map(taintId));
    const have = new Set(current.map(taintId));
    const removed = current.flatMap((t, i) => (wanted.has(taintId(t)) ? [] : [i])).reverse();
    for (const i of removed) tests.push({ op: 'test', path: `/spec/taints/${i}`, value: current[i] });
    for (const i of removed) changes.push({ op: 'remove', path: `/spec/taints/${i}` });
    for (const t of desired.taints)
      if (!have.has(taintId(t))) changes.push({ op: 'add', path: '/spec/taints/-', value: t });
  }
  const fields = [
    ['labels', desired.labels, desired.removeLabels],
    ['annotations', desired.annotations, desired.removeAnnotations],
  ] as const;
  for (const [field, wanted, removals] of fields) {
    const current = node.metadata[field];
    for (const key of removals) {
      const path = `/metadata/${field}/${pointer(key)}`;
      tests.push({ op: 'test', path, value: current?.[key] ?? '' });
      changes.push({ op: 'remove', path });
    }
    const set = Object.entries(wanted).filter(([k, v]) => current?.[k] !== v);
    if (set.length === 0) continue;
    if (current) {
      // `add` on a member that exists replaces its value (RFC 6902).
      for (const [key, value] of set)
        changes.push({ op: 'add', path: `/metadata/${field}/${pointer(key)}`, value });
    } else {
      // The map is absent (a Node registered without annotations): added whole, on condition
      // that it still is (a `test` for null passes on a missing member, checked on 1.37), so the
      // kubelet's status writes meanwhile do not make it a conflict.
      tests.push({ op: 'test', path: `/metadata/${field}`, value: null });
      changes.push({ op: 'add', path: `/metadata/${field}`, value: Object.fromEntries(set) });
    }
  }
  if (wholeAdded)
    tests.push({ op: 'test', path: '/metadata/resourceVersion', value: node.metadata.resourceVersion });
  return [...tests, ...changes];
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
      action: `write the flavor of node ${name}`,
      contentType: 'application/json-patch+json',
      query: { fieldManager: FIELD_MANAGER },
      body: ops,
    });
  } catch (error) {
    if (error instanceof KubeError && error.patchTestFailed) {
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

/** Writes the Node as desired in one request; returns the Node as written (for the cache). */
export async function writeNodeState(
  kubeConfig: KubeConfig,
  node: TrimmedNode,
  desired: DesiredNodeState,
): Promise<TrimmedNode> {
  const name = node.metadata.name;
  return patchOrConflict(
    kubeConfig,
    `/api/v1/nodes/${encodeURIComponent(name)}`,
    name,
    nodeStatePatch(node, desired),
  );
}
