// Which of a FlavorClass's keys Cluster API's Machine controller also writes to Nodes, purely. Cluster
// API copies a Machine's labels in its synced domains (and those matching the management cluster's
// --additional-sync-machine-labels) and annotations in node.cluster.x-k8s.io (and those matching
// --additional-sync-machine-annotations) onto the Node it links, adds bookkeeping annotations of its
// own and sets and removes taints under node.cluster.x-k8s.io, all in one patch as the workload
// cluster's admin (core/reconcilers/machine/machine_controller_noderef.go, util/labels,
// util/annotations; v1.14). A FlavorClass key among them is one nodeflavor's guard protects, so the
// guard denies that whole patch: the Node keeps node.cluster.x-k8s.io/uninitialized and never
// becomes schedulable. Also, whoever may edit a MachineDeployment could then write the key; for a
// flavor only nodeflavor may. The FlavorClass status says so (ClusterAPISyncConflict), with an Event.

/** Label domains Cluster API always syncs from Machine to Node (util/labels/helpers.go). */
const SYNCED_LABEL_DOMAINS = ['node-role.kubernetes.io'] as const;
/** Domains synced with their subdomains (`*.node-restriction.kubernetes.io`, ...). */
const SYNCED_LABEL_DOMAIN_SUFFIXES = ['node-restriction.kubernetes.io', 'node.cluster.x-k8s.io'] as const;
const SYNCED_ANNOTATION_DOMAIN_SUFFIXES = ['node.cluster.x-k8s.io'] as const;
/** The annotations Cluster API writes on every Node it links (its bookkeeping). */
const CAPI_NODE_ANNOTATIONS = new Set([
  'cluster.x-k8s.io/cluster-name',
  'cluster.x-k8s.io/cluster-namespace',
  'cluster.x-k8s.io/machine',
  'cluster.x-k8s.io/owner-kind',
  'cluster.x-k8s.io/owner-name',
  'cluster.x-k8s.io/labels-from-machine',
  'cluster.x-k8s.io/annotations-from-machine',
  'cluster.x-k8s.io/taints-from-machine',
]);
/** Cluster API's own taints live here (uninitialized, outdated-revision). */
const CAPI_TAINT_DOMAIN_SUFFIXES = ['node.cluster.x-k8s.io'] as const;

/** The management cluster's extra sync rules (its core manager's --additional-sync-machine-* flags). */
export interface ClusterApiSyncRules {
  labelPatterns: readonly RegExp[];
  annotationPatterns: readonly RegExp[];
}

export const NO_EXTRA_SYNC_RULES: ClusterApiSyncRules = { labelPatterns: [], annotationPatterns: [] };

export interface SyncedKey {
  kind: 'label' | 'annotation' | 'taint';
  key: string;
  /** Why Cluster API writes it, in a few words. */
  why: string;
}

function domainOf(key: string): string {
  return key.includes('/') ? (key.split('/')[0] ?? '') : '';
}

function inDomain(key: string, domain: string): boolean {
  const prefix = domainOf(key);
  return prefix === domain || prefix.endsWith(`.${domain}`);
}

function labelReason(key: string, rules: ClusterApiSyncRules): string | undefined {
  for (const domain of SYNCED_LABEL_DOMAINS) if (domainOf(key) === domain) return `the ${domain} domain`;
  for (const domain of SYNCED_LABEL_DOMAIN_SUFFIXES) if (inDomain(key, domain)) return `the ${domain} domain`;
  const pattern = rules.labelPatterns.find((p) => p.test(key));
  return pattern ? `--additional-sync-machine-labels ${pattern.source}` : undefined;
}

function annotationReason(key: string, rules: ClusterApiSyncRules): string | undefined {
  if (CAPI_NODE_ANNOTATIONS.has(key)) return "Cluster API's own bookkeeping annotation";
  for (const domain of SYNCED_ANNOTATION_DOMAIN_SUFFIXES)
    if (inDomain(key, domain)) return `the ${domain} domain`;
  const pattern = rules.annotationPatterns.find((p) => p.test(key));
  return pattern ? `--additional-sync-machine-annotations ${pattern.source}` : undefined;
}

/** The FlavorClass keys Cluster API also writes to Nodes (none for a class that keeps clear of it). */
export function clusterApiSyncedKeys(
  spec: { labels?: Record<string, string>; annotations?: Record<string, string>; taints?: { key: string }[] },
  rules: ClusterApiSyncRules = NO_EXTRA_SYNC_RULES,
): SyncedKey[] {
  const found: SyncedKey[] = [];
  for (const key of Object.keys(spec.labels ?? {})) {
    const why = labelReason(key, rules);
    if (why) found.push({ kind: 'label', key, why });
  }
  for (const key of Object.keys(spec.annotations ?? {})) {
    const why = annotationReason(key, rules);
    if (why) found.push({ kind: 'annotation', key, why });
  }
  for (const { key } of spec.taints ?? []) {
    if (CAPI_TAINT_DOMAIN_SUFFIXES.some((domain) => inDomain(key, domain)))
      found.push({ kind: 'taint', key, why: "Cluster API's own taint domain" });
  }
  return found;
}

/** The condition's message for keys found (one sentence a user can act on). */
export function syncConflictMessage(keys: SyncedKey[]): string {
  const listed = keys.map((k) => `${k.kind} ${k.key} (${k.why})`).join(', ');
  return `Cluster API writes these keys to the Nodes of the Machines it manages: ${listed}. nodeflavor's guard denies Cluster API's whole Node patch when it touches one, so such a Node keeps node.cluster.x-k8s.io/uninitialized and never becomes schedulable, and anyone who may edit a MachineDeployment could set the key: use keys outside Cluster API's synced domains (docs/cluster-api.md#coexistence-with-cluster-apis-label-sync)`;
}

/** Compiles the configured patterns (Go RE2 syntax, which JavaScript reads the same for these uses). */
export function syncRules(
  labelPatterns: readonly string[],
  annotationPatterns: readonly string[],
): ClusterApiSyncRules {
  return {
    labelPatterns: labelPatterns.map((p) => new RegExp(p)),
    annotationPatterns: annotationPatterns.map((p) => new RegExp(p)),
  };
}
