// Quarantine from a Node's very first version, pure (ADR 0012). A node administrator writes the
// JoinConfiguration: it can drop the quarantine taint, the token label, or both, and can make its
// kubelet report Ready at once; a scheduler acts on the first version of a Node it is sent. So
// the quarantine is not asked of the node: admission adds it when a kubelet registers a Node
// whose name was claimed through nodeflavor (a NodeNameClaim, held or released: that machine got
// its certificate from a nodeflavor token) or that presents a flavor token. Kubernetes does the
// same for its own not-ready taint (the TaintNodesByCondition admission plugin).
import { type NodeView, QUARANTINE_TAINT_KEY } from './admission.ts';
import { JOINED_LABEL_KEY, JOINED_LABEL_VALUE, TOKEN_LABEL_KEY } from './resources.ts';

export const QUARANTINE_TAINT = { key: QUARANTINE_TAINT_KEY, effect: 'NoSchedule' } as const;

type PatchOp = { op: 'add'; path: string; value: unknown };

/** RFC 6901: a map key as one JSON Pointer segment. */
function pointer(key: string): string {
  return key.replaceAll('~', '~0').replaceAll('/', '~1');
}

/** Whether a Node registered under these facts came through nodeflavor. */
export function joinedThroughNodeflavor(node: NodeView, nameClaimed: boolean): boolean {
  return nameClaimed || Object.hasOwn(node.labels, TOKEN_LABEL_KEY);
}

/**
 * The JSON patch that quarantines and marks a Node being registered by its kubelet: the
 * quarantine taint (NoSchedule) and the joined label, each only if missing. Empty when the Node
 * did not come through nodeflavor, or already carries both. `hasLabels`/`hasTaints` say whether
 * the request's object has those fields at all (a JSON patch cannot add into a missing map).
 */
export function registrationPatch(
  node: NodeView,
  shape: { hasLabels: boolean; hasSpec: boolean; hasTaints: boolean },
  nameClaimed: boolean,
): PatchOp[] {
  if (!joinedThroughNodeflavor(node, nameClaimed)) return [];
  const ops: PatchOp[] = [];
  const quarantined = node.taints.some(
    (t) => t.key === QUARANTINE_TAINT.key && t.effect === QUARANTINE_TAINT.effect,
  );
  if (!quarantined) {
    const taint = { ...QUARANTINE_TAINT };
    if (shape.hasTaints) ops.push({ op: 'add', path: '/spec/taints/-', value: taint });
    else if (shape.hasSpec) ops.push({ op: 'add', path: '/spec/taints', value: [taint] });
    else ops.push({ op: 'add', path: '/spec', value: { taints: [taint] } });
  }
  if (node.labels[JOINED_LABEL_KEY] !== JOINED_LABEL_VALUE) {
    if (shape.hasLabels)
      ops.push({
        op: 'add',
        path: `/metadata/labels/${pointer(JOINED_LABEL_KEY)}`,
        value: JOINED_LABEL_VALUE,
      });
    else ops.push({ op: 'add', path: '/metadata/labels', value: { [JOINED_LABEL_KEY]: JOINED_LABEL_VALUE } });
  }
  return ops;
}
