// Where the operator itself may run. It holds the HMAC key ring and may write every Node's flavor,
// so whoever administers the node under its pod can mint any flavor. It runs only on a node that
// someone a kubelet cannot impersonate marked as trusted, and never on one that joined through
// nodeflavor. The chart makes this a required node affinity (deploy/helm/nodeflavor); the process
// checks its own Node again at start (src/cli/startup-checks.ts). Pure: no I/O.
import { JOINED_LABEL_KEY, QUARANTINE_TAINT_KEY } from './resources.ts';

/**
 * Label key prefixes NodeRestriction forbids a kubelet to set, change or remove on its own Node,
 * at CREATE and UPDATE (plugin/pkg/admission/noderestriction: every node-restriction.kubernetes.io/
 * label, and every kubernetes.io / k8s.io label outside the kubelet's own set, which is a few
 * well-known keys plus kubelet.kubernetes.io/ and node.kubernetes.io/). Only these two are taken:
 * `node.kubernetes.io/...` and any key outside kubernetes.io ARE settable by a kubelet
 * (`--node-labels`), so such a label proves nothing about who marked the node.
 */
export const TRUSTED_NODE_LABEL_PREFIXES = [
  'node-restriction.kubernetes.io/',
  'node-role.kubernetes.io/',
] as const;

/**
 * A trusted label key: one of the prefixes, then a label name (63 characters at most, alphanumeric
 * at both ends). values.schema.json and the chart's deployment.yaml carry the same pattern.
 */
export const TRUSTED_NODE_LABEL_PATTERN =
  /^node-(restriction|role)\.kubernetes\.io\/[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$/;

/** How an admin marks a system node: `kubectl label node <name> <this>=true`. */
export const SYSTEM_NODE_LABEL = 'node-restriction.kubernetes.io/nodeflavor-system';

/** kubeadm labels its control-plane nodes with the first; an admin marks a system node with the second. */
export const DEFAULT_TRUSTED_NODE_LABELS: readonly string[] = [
  'node-role.kubernetes.io/control-plane',
  SYSTEM_NODE_LABEL,
];

/** Whether no kubelet can put `key` on its own Node (so a node carrying it was marked by an admin). */
export function isTrustedNodeLabelKey(key: string): boolean {
  return TRUSTED_NODE_LABEL_PATTERN.test(key);
}

/** What the placement checks read of a Node. */
export interface NodePlacementFacts {
  name: string;
  labels: Readonly<Record<string, string>>;
  taints: readonly { key: string; effect?: string }[];
}

/** Why a node is not one the operator may run on; the reason names the check. */
export interface PlacementFailure {
  reason: 'JoinedThroughNodeflavor' | 'Quarantined' | 'NotMarkedTrusted';
  message: string;
}

type PlacementCheck = (node: NodePlacementFacts, trusted: readonly string[]) => PlacementFailure | undefined;

/** Each check alone; the first failure is the verdict (in this order: the strongest reason first). */
export const PLACEMENT_CHAIN: readonly PlacementCheck[] = [
  (node) =>
    node.labels[JOINED_LABEL_KEY] !== undefined
      ? {
          reason: 'JoinedThroughNodeflavor',
          message: `Node ${node.name} carries ${JOINED_LABEL_KEY}: it joined through nodeflavor, and its administrator could read the key ring`,
        }
      : undefined,
  (node) =>
    node.taints.some((t) => t.key === QUARANTINE_TAINT_KEY)
      ? {
          reason: 'Quarantined',
          message: `Node ${node.name} carries the quarantine taint ${QUARANTINE_TAINT_KEY}: it is not verified`,
        }
      : undefined,
  (node, trusted) =>
    trusted.some((key) => node.labels[key] !== undefined)
      ? undefined
      : {
          reason: 'NotMarkedTrusted',
          message: `Node ${node.name} carries none of the trusted labels ${trusted.join(', ')}`,
        },
];

/** Why the operator must not run on `node`, or undefined when it may. */
export function placementFailure(
  node: NodePlacementFacts,
  trusted: readonly string[],
): PlacementFailure | undefined {
  for (const check of PLACEMENT_CHAIN) {
    const failure = check(node, trusted);
    if (failure) return failure;
  }
  return undefined;
}
