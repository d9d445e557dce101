// The admission guard's judgement, pure: which protected keys a Node write touches, and whether
// the writer may touch them. A flavor is only true if nobody but the controller can write it, so
// kubelets (which NodeRestriction lets label themselves with any non-kubernetes.io key) and
// ordinary users are refused; writes that leave protected keys alone always pass, so kubelet
// heartbeats and status updates never depend on us. src/webhook/review.ts feeds this from
// AdmissionReviews; src/webhook/registration.ts states the same rules in CEL for the API server.

export const PROTECTED_PREFIX = 'nodeflavor.io/';

// The protected label a kubelet may set (only when it creates its Node; its value is secret),
// the taint it may register with (only the controller lifts it), and the joined mark (admission
// adds it at registration to a Node whose name was claimed through nodeflavor; a kubelet that
// sets it itself only keeps the operator off its own node).
import {
  JOINED_LABEL_KEY,
  NODE_USER_PREFIX,
  NODES_GROUP,
  QUARANTINE_TAINT_KEY,
  TOKEN_LABEL_KEY,
} from './resources.ts';

export { JOINED_LABEL_KEY, QUARANTINE_TAINT_KEY, TOKEN_LABEL_KEY };

export interface NodeTaint {
  key: string;
  value?: string;
  effect: string;
}

/** The parts of a Node the guard looks at. */
export interface NodeView {
  labels: Record<string, string>;
  annotations: Record<string, string>;
  taints: NodeTaint[];
}

/** Keys only the controller may write: explicit keys (from FlavorClasses) plus everything under `prefix`. */
export interface ProtectedKeys {
  labels: ReadonlySet<string>;
  annotations: ReadonlySet<string>;
  taints: ReadonlySet<string>;
  prefix: string;
}

export interface AdmissionPolicy {
  controllerUsernames: string[];
  adminGroups: string[];
  protectedKeys: ProtectedKeys;
}

type ProtectedKind = 'label' | 'annotation' | 'taint';
type ChangeType = 'added' | 'changed' | 'removed';

/** One protected key touched by a write. Never carries a value: label values may be secret. */
interface ProtectedChange {
  kind: ProtectedKind;
  key: string;
  change: ChangeType;
  /** Taints only: a taint is identified by key and effect. */
  effect?: string;
}

// Reasons become metric labels and Event reasons, so the set is small and fixed.
const ALLOW_REASONS = ['NoProtectedChange', 'Controller', 'AdminGroup', 'KubeletRegistration'] as const;
const DENY_REASONS = [
  'Unauthorized',
  'KubeletProtectedKey',
  'KubeletTokenLabelOnUpdate',
  'QuarantineTaintRemoval',
  'KubeletOtherNode',
  'MalformedRequest',
] as const;
type AllowReason = (typeof ALLOW_REASONS)[number];
type DenyReason = (typeof DENY_REASONS)[number];

export type NodeAdmissionDecision =
  | { allowed: true; reason: AllowReason }
  | { allowed: false; reason: DenyReason; message: string };

type AdmissionOperation = 'CREATE' | 'UPDATE' | 'DELETE' | 'CONNECT';

export interface NodeAdmissionRequest {
  operation: AdmissionOperation;
  subresource?: string;
  username: string;
  groups: string[];
  /** The request's name: the Node being written. */
  nodeName: string;
  oldNode?: NodeView;
  newNode?: NodeView;
}

/** The FlavorClass fields that name keys; values do not matter to the guard. */
export interface FlavorClassKeys {
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
  taints?: { key: string }[];
}

export function protectedKeysFromFlavorClasses(classes: readonly FlavorClassKeys[]): ProtectedKeys {
  return {
    labels: new Set(classes.flatMap((c) => Object.keys(c.labels ?? {}))),
    annotations: new Set(classes.flatMap((c) => Object.keys(c.annotations ?? {}))),
    taints: new Set([QUARANTINE_TAINT_KEY, ...classes.flatMap((c) => (c.taints ?? []).map((t) => t.key))]),
    prefix: PROTECTED_PREFIX,
  };
}

export function isProtectedKey(kind: ProtectedKind, key: string, keys: ProtectedKeys): boolean {
  return key.startsWith(keys.prefix) || explicitKeys(kind, keys).has(key);
}

function explicitKeys(kind: ProtectedKind, keys: ProtectedKeys): ReadonlySet<string> {
  if (kind === 'label') return keys.labels;
  if (kind === 'annotation') return keys.annotations;
  return keys.taints;
}

/** The identity the Node authorizer and NodeRestriction give kubelets: both name and group. */
export function isKubelet(username: string, groups: readonly string[]): boolean {
  return (
    username.startsWith(NODE_USER_PREFIX) &&
    username.length > NODE_USER_PREFIX.length &&
    groups.includes(NODES_GROUP)
  );
}

const EMPTY_NODE: NodeView = { labels: {}, annotations: {}, taints: [] };

/** Protected keys that differ between the two Nodes (no old Node: a CREATE, everything is added). */
export function diffProtected(
  oldNode: NodeView | undefined,
  newNode: NodeView,
  keys: ProtectedKeys,
): ProtectedChange[] {
  const before = oldNode ?? EMPTY_NODE;
  return [
    ...diffStringMap('label', before.labels, newNode.labels, keys),
    ...diffStringMap('annotation', before.annotations, newNode.annotations, keys),
    ...diffTaints(before.taints, newNode.taints, keys),
  ];
}

function diffStringMap(
  kind: 'label' | 'annotation',
  before: Record<string, string>,
  after: Record<string, string>,
  keys: ProtectedKeys,
): ProtectedChange[] {
  const changes: ProtectedChange[] = [];
  // Object.hasOwn, not `in`: a label key such as "constructor" must not match the prototype.
  for (const key of Object.keys(after)) {
    if (!isProtectedKey(kind, key, keys)) continue;
    if (!Object.hasOwn(before, key)) changes.push({ kind, key, change: 'added' });
    else if (before[key] !== after[key]) changes.push({ kind, key, change: 'changed' });
  }
  for (const key of Object.keys(before)) {
    if (isProtectedKey(kind, key, keys) && !Object.hasOwn(after, key)) {
      changes.push({ kind, key, change: 'removed' });
    }
  }
  return changes.sort(byKey);
}

function diffTaints(before: NodeTaint[], after: NodeTaint[], keys: ProtectedKeys): ProtectedChange[] {
  // The API server allows one taint per key and effect, so that pair is a taint's identity;
  // an absent value and an empty one are the same taint.
  const identity = (t: NodeTaint) => `${t.key}\u0000${t.effect}`;
  const protectedOnly = (taints: NodeTaint[]) =>
    new Map(taints.filter((t) => isProtectedKey('taint', t.key, keys)).map((t) => [identity(t), t]));
  const old = protectedOnly(before);
  const next = protectedOnly(after);
  const changes: ProtectedChange[] = [];
  for (const [id, taint] of next) {
    const previous = old.get(id);
    const base = { kind: 'taint' as const, key: taint.key, effect: taint.effect };
    if (previous === undefined) changes.push({ ...base, change: 'added' });
    else if ((previous.value ?? '') !== (taint.value ?? '')) changes.push({ ...base, change: 'changed' });
  }
  for (const [id, taint] of old) {
    if (next.has(id)) continue;
    changes.push({ kind: 'taint', key: taint.key, effect: taint.effect, change: 'removed' });
  }
  return changes.sort(byKey);
}

function byKey(a: ProtectedChange, b: ProtectedChange): number {
  const ka = `${a.key}\u0000${a.effect ?? ''}`;
  const kb = `${b.key}\u0000${b.effect ?? ''}`;
  return ka < kb ? -1 : ka > kb ? 1 : 0;
}

/** `label "nodeflavor.io/flavor" added`, `taint "nodeflavor.io/unverified" (NoSchedule) removed`. */
function describeChange(change: ProtectedChange): string {
  const effect = change.effect === undefined ? '' : ` (${change.effect})`;
  return `${change.kind} "${change.key}"${effect} ${change.change}`;
}

const CONTROLLER_ONLY = 'only the nodeflavor controller may set, change or remove it';
const KUBELET_ALLOWANCE = `kubelets may set only labels ${TOKEN_LABEL_KEY} and ${JOINED_LABEL_KEY} and taint ${QUARANTINE_TAINT_KEY}, when they register their Node`;

export function decideNodeAdmission(
  request: NodeAdmissionRequest,
  policy: AdmissionPolicy,
): NodeAdmissionDecision {
  const { operation, newNode } = request;
  // Deleting a Node takes its flavor with it, and a re-registered Node needs a fresh token: nothing
  // to guard. The webhook is registered for CREATE and UPDATE only.
  if (operation === 'DELETE' || operation === 'CONNECT') {
    return { allowed: true, reason: 'NoProtectedChange' };
  }
  if (newNode === undefined) return malformed(`${operation} request carries no object`);
  const oldNode = operation === 'CREATE' ? undefined : request.oldNode;
  if (operation === 'UPDATE' && oldNode === undefined) {
    return malformed('UPDATE request carries no oldObject');
  }

  const changes = diffProtected(oldNode, newNode, policy.protectedKeys);
  if (changes.length === 0) return { allowed: true, reason: 'NoProtectedChange' };
  if (policy.controllerUsernames.includes(request.username)) return { allowed: true, reason: 'Controller' };
  // Checked before admin groups: a kubelet never gains more by being listed in one.
  if (isKubelet(request.username, request.groups)) return judgeKubelet(request, changes);
  if (request.groups.some((g) => policy.adminGroups.includes(g))) {
    return { allowed: true, reason: 'AdminGroup' };
  }
  return deny(
    'Unauthorized',
    changes.map(
      (c) =>
        `${describeChange(c)} by user "${request.username}": only the nodeflavor controller or a member of an admin group may set, change or remove it`,
    ),
  );
}

interface Violation {
  reason: DenyReason;
  message: string;
}

function judgeKubelet(request: NodeAdmissionRequest, changes: ProtectedChange[]): NodeAdmissionDecision {
  // NodeRestriction already confines a kubelet to its own Node; we do not rely on it being enabled.
  if (request.username !== `${NODE_USER_PREFIX}${request.nodeName}`) {
    const what = changes.map(describeChange).join(', ');
    return deny('KubeletOtherNode', [
      `${what}: kubelet "${request.username}" may not touch protected keys of Node "${request.nodeName}"`,
    ]);
  }
  const violations = changes.flatMap((c) => kubeletViolation(c, request.operation) ?? []);
  const first = violations[0];
  if (first === undefined) return { allowed: true, reason: 'KubeletRegistration' };
  // The first violation names the reason (metric label); the message lists them all.
  return deny(
    first.reason,
    violations.map((v) => v.message),
  );
}

function kubeletViolation(change: ProtectedChange, operation: AdmissionOperation): Violation | undefined {
  const registering = operation === 'CREATE' && change.change === 'added';
  const what = describeChange(change);
  if (change.kind === 'label' && change.key === TOKEN_LABEL_KEY) {
    if (registering) return undefined;
    return {
      reason: 'KubeletTokenLabelOnUpdate',
      message: `${what} on update: kubelets may set it only when they register (create) their Node; the nodeflavor controller removes it`,
    };
  }
  if (change.kind === 'label' && change.key === JOINED_LABEL_KEY && registering) return undefined;
  if (change.kind === 'taint' && change.key === QUARANTINE_TAINT_KEY) {
    if (registering) return undefined;
    if (change.change === 'removed') {
      return {
        reason: 'QuarantineTaintRemoval',
        message: `${what}: only the nodeflavor controller lifts the quarantine, once it has verified the node's flavor token`,
      };
    }
  }
  return { reason: 'KubeletProtectedKey', message: `${what}: ${CONTROLLER_ONLY}; ${KUBELET_ALLOWANCE}` };
}

function deny(reason: DenyReason, messages: string[]): NodeAdmissionDecision {
  return { allowed: false, reason, message: messages.join('; ') };
}

/** A request the guard cannot judge is refused: unknown means no flavor change. */
export function malformed(message: string): NodeAdmissionDecision {
  return { allowed: false, reason: 'MalformedRequest', message };
}
