// The objects that put the admission guard in front of the API server, built as pure functions of
// the protected key sets so they can never drift from decideNodeAdmission (src/flavor/admission.ts):
//   - a ValidatingWebhookConfiguration whose CEL matchConditions send the webhook ONLY writes that
//     touch protected keys and are not the controller's own, so kubelet heartbeats and status
//     updates, and the controller's writes, never wait on (or fail with) the webhook;
//   - a ValidatingAdmissionPolicy + binding stating the same rules in CEL, for clusters that would
//     rather not run a webhook (or want both). The key lists are baked in; the controller re-applies
//     the policy when FlavorClasses change.
// Every CEL expression is guarded so it cannot error on a missing field: with failurePolicy Fail an
// evaluation error would reject the write.
import {
  JOINED_LABEL_KEY,
  type ProtectedKeys,
  QUARANTINE_TAINT_KEY,
  TOKEN_LABEL_KEY,
} from '../flavor/admission.ts';

export const NODE_WEBHOOK_NAME = 'nodes.nodeflavor.io';
export const API_VERSION = 'admissionregistration.k8s.io/v1';
export const DEFAULT_TIMEOUT_SECONDS = 5;
export const COMMON_LABELS = {
  'app.kubernetes.io/name': 'nodeflavor',
  'app.kubernetes.io/component': 'admission',
};

export interface MatchCondition {
  name: string;
  expression: string;
}

/** Which requests a webhook or policy is asked about. */
export interface ResourceRule {
  apiGroups: string[];
  apiVersions: string[];
  operations: ('CREATE' | 'UPDATE')[];
  resources: string[];
  scope: 'Cluster';
}

export interface WebhookServiceReference {
  namespace: string;
  name: string;
  port: number;
  path: string;
}

export interface ValidatingWebhookConfiguration {
  apiVersion: typeof API_VERSION;
  kind: 'ValidatingWebhookConfiguration';
  metadata: { name: string; labels: Record<string, string> };
  webhooks: {
    name: string;
    clientConfig: { caBundle?: string; service?: WebhookServiceReference; url?: string };
    rules: ResourceRule[];
    failurePolicy: 'Fail';
    matchPolicy: 'Equivalent';
    sideEffects: 'None';
    timeoutSeconds: number;
    admissionReviewVersions: ['v1'];
    /** Stated (they are the API server's defaults) so that a narrowed selector shows up as drift. */
    namespaceSelector: Record<string, never>;
    objectSelector: Record<string, never>;
    matchConditions: MatchCondition[];
  }[];
}

export interface ValidatingAdmissionPolicy {
  apiVersion: typeof API_VERSION;
  kind: 'ValidatingAdmissionPolicy';
  metadata: { name: string; labels: Record<string, string> };
  spec: {
    /** A policy evaluated once per parameter object of this kind (class-keys-policy.ts). */
    paramKind?: { apiVersion: string; kind: string };
    failurePolicy: 'Fail';
    matchConstraints: {
      resourceRules: ResourceRule[];
      matchPolicy: 'Equivalent';
      namespaceSelector: Record<string, never>;
      objectSelector: Record<string, never>;
    };
    matchConditions: MatchCondition[];
    variables: { name: string; expression: string }[];
    validations: { expression: string; messageExpression: string; message: string; reason: 'Forbidden' }[];
  };
}

interface ValidatingAdmissionPolicyBinding {
  apiVersion: typeof API_VERSION;
  kind: 'ValidatingAdmissionPolicyBinding';
  metadata: { name: string; labels: Record<string, string> };
  spec: { policyName: string; validationActions: ['Deny'] };
}

/** Who the rules trust, and what they protect: shared by the webhook and the policy. */
interface GuardRuleOptions {
  protectedKeys: ProtectedKeys;
  controllerUsername: string;
  adminGroups: string[];
}

interface WebhookOptions extends GuardRuleOptions {
  name: string;
  /** Base64 PEM of the CA that signed the webhook's serving certificate. */
  caBundle?: string;
  service?: WebhookServiceReference;
  url?: string;
  timeoutSeconds?: number;
}

interface PolicyOptions extends GuardRuleOptions {
  name: string;
}

// Leases are a different resource, so kubelet heartbeats never match; nodes/status is listed
// because its strategy lets labels and annotations change too.
export const NODE_RULES: ResourceRule[] = [
  {
    apiGroups: [''],
    apiVersions: ['v1'],
    operations: ['CREATE', 'UPDATE'],
    resources: ['nodes', 'nodes/status'],
    scope: 'Cluster',
  },
];

export function validatingWebhookConfiguration(opts: WebhookOptions): ValidatingWebhookConfiguration {
  checkGuardOptions(opts);
  if ((opts.service === undefined) === (opts.url === undefined)) {
    throw new Error('webhook registration needs exactly one of service or url');
  }
  const timeoutSeconds = opts.timeoutSeconds ?? DEFAULT_TIMEOUT_SECONDS;
  if (!Number.isInteger(timeoutSeconds) || timeoutSeconds < 1 || timeoutSeconds > 30) {
    throw new RangeError(`webhook timeoutSeconds must be an integer from 1 to 30, got ${timeoutSeconds}`);
  }
  const clientConfig: ValidatingWebhookConfiguration['webhooks'][number]['clientConfig'] = {};
  if (opts.caBundle !== undefined) clientConfig.caBundle = opts.caBundle;
  if (opts.service !== undefined) clientConfig.service = { ...opts.service };
  if (opts.url !== undefined) clientConfig.url = opts.url;
  return {
    apiVersion: API_VERSION,
    kind: 'ValidatingWebhookConfiguration',
    metadata: { name: opts.name, labels: { ...COMMON_LABELS } },
    webhooks: [
      {
        name: NODE_WEBHOOK_NAME,
        clientConfig,
        rules: structuredClone(NODE_RULES),
        failurePolicy: 'Fail',
        matchPolicy: 'Equivalent',
        sideEffects: 'None',
        timeoutSeconds,
        admissionReviewVersions: ['v1'],
        // Every Node, whatever its labels: an object selector would let a node opt out of the guard.
        namespaceSelector: {},
        objectSelector: {},
        matchConditions: guardMatchConditions(opts),
      },
    ],
  };
}

/** Every Node write (nodes and nodes/status), whatever its labels: what a Node policy matches. */
export function nodeMatchConstraints(): ValidatingAdmissionPolicy['spec']['matchConstraints'] {
  return {
    resourceRules: structuredClone(NODE_RULES),
    matchPolicy: 'Equivalent',
    namespaceSelector: {},
    objectSelector: {},
  };
}

export function validatingAdmissionPolicy(opts: PolicyOptions): ValidatingAdmissionPolicy {
  checkGuardOptions(opts);
  return {
    apiVersion: API_VERSION,
    kind: 'ValidatingAdmissionPolicy',
    metadata: { name: opts.name, labels: { ...COMMON_LABELS } },
    spec: {
      failurePolicy: 'Fail',
      matchConstraints: nodeMatchConstraints(),
      matchConditions: guardMatchConditions(opts),
      variables: policyVariables(opts),
      validations: policyValidations(),
    },
  };
}

export function validatingAdmissionPolicyBinding(opts: {
  name: string;
  policyName: string;
}): ValidatingAdmissionPolicyBinding {
  return {
    apiVersion: API_VERSION,
    kind: 'ValidatingAdmissionPolicyBinding',
    metadata: { name: opts.name, labels: { ...COMMON_LABELS } },
    spec: { policyName: opts.policyName, validationActions: ['Deny'] },
  };
}

function checkGuardOptions(opts: GuardRuleOptions): void {
  if (opts.controllerUsername === '') throw new Error('controllerUsername must not be empty');
  // An empty prefix would protect every key, and then every kubelet status update is refused.
  if (opts.protectedKeys.prefix === '') throw new Error('protectedKeys.prefix must not be empty');
}

// ---- CEL text -------------------------------------------------------------------------------

/** A CEL string literal: every escape JSON emits (\" \\ \n \uXXXX) is also a CEL escape. */
export function lit(value: string): string {
  return JSON.stringify(value);
}

export function litList(values: readonly string[]): string {
  return `[${values.map(lit).join(', ')}]`;
}

/** The sorted explicit keys the prefix does not already cover (sorted: re-applying is a no-op). */
function extraKeys(keys: ReadonlySet<string>, prefix: string): string[] {
  return [...keys].filter((k) => !k.startsWith(prefix)).sort();
}

export interface KeyTests {
  label: (v: string) => string;
  annotation: (v: string) => string;
  taint: (v: string) => string;
}

/** CEL predicates "is `v` a protected label / annotation / taint key", mirroring isProtectedKey. */
export function keyTests(keys: ProtectedKeys): KeyTests {
  const test = (explicit: string[]) => (v: string) => {
    const underPrefix = `${v}.startsWith(${lit(keys.prefix)})`;
    return explicit.length === 0 ? underPrefix : `(${underPrefix} || ${v} in ${litList(explicit)})`;
  };
  return {
    label: test(extraKeys(keys.labels, keys.prefix)),
    annotation: test(extraKeys(keys.annotations, keys.prefix)),
    taint: test(extraKeys(keys.taints, keys.prefix)),
  };
}

// Maps and lists that read as empty when absent. oldObject is null on CREATE, so it is only
// touched behind the operation check (CEL's && does not evaluate past a false left side).
export const newMap = (field: 'labels' | 'annotations') =>
  `(has(object.metadata.${field}) ? object.metadata.${field} : {})`;
export const oldMap = (field: 'labels' | 'annotations') =>
  `(request.operation == "UPDATE" && has(oldObject.metadata.${field}) ? oldObject.metadata.${field} : {})`;
export const NEW_TAINTS = '(has(object.spec) && has(object.spec.taints) ? object.spec.taints : [])';
export const OLD_TAINTS =
  '(request.operation == "UPDATE" && has(oldObject.spec) && has(oldObject.spec.taints) ? oldObject.spec.taints : [])';
/** A taint's value, absent read as "" (the API server omits empty values). */
export const taintValue = (t: string) => `(has(${t}.value) ? ${t}.value : "")`;

function mapTouched(field: 'labels' | 'annotations', isProtected: (v: string) => string): string {
  const after = newMap(field);
  const before = oldMap(field);
  return (
    `${after}.exists(k, ${isProtected('k')} && (!(k in ${before}) || ${before}[k] != ${after}[k]))` +
    ` || ${before}.exists(k, ${isProtected('k')} && !(k in ${after}))`
  );
}

function taintsTouched(isProtected: (v: string) => string): string {
  return (
    `${NEW_TAINTS}.exists(t, ${isProtected('t.key')} && !${OLD_TAINTS}.exists(o, o.key == t.key && o.effect == t.effect && ${taintValue('o')} == ${taintValue('t')}))` +
    ` || ${OLD_TAINTS}.exists(o, ${isProtected('o.key')} && !${NEW_TAINTS}.exists(t, t.key == o.key && t.effect == o.effect))`
  );
}

/** CEL: true when the write adds, changes or removes a protected key (diffProtected is non-empty). */
export function touchesProtectedKeysExpression(keys: ProtectedKeys): string {
  const tests = keyTests(keys);
  return [
    mapTouched('labels', tests.label),
    mapTouched('annotations', tests.annotation),
    taintsTouched(tests.taint),
  ].join(' || ');
}

/** CEL: the request comes from a kubelet (the Node authorizer's identity), as decideNodeAdmission's isKubelet. */
export const IS_KUBELET =
  'has(request.userInfo.username) && request.userInfo.username.startsWith("system:node:") && size(request.userInfo.username) > 12' +
  ' && has(request.userInfo.groups) && "system:nodes" in request.userInfo.groups';

/**
 * The writers every rule trusts, as matchConditions that keep their writes away from the rule
 * (shared by the guard and the FlavorClass-keys policy).
 */
export function trustedWriterConditions(opts: {
  controllerUsername: string;
  adminGroups: readonly string[];
}): MatchCondition[] {
  const conditions: MatchCondition[] = [
    {
      // The controller's writes never depend on the webhook (or the policy) being healthy.
      name: 'not-nodeflavor-controller',
      expression: `!has(request.userInfo.username) || !(request.userInfo.username in ${litList([opts.controllerUsername])})`,
    },
  ];
  if (opts.adminGroups.length > 0) {
    // Nor do an admin group's (decideNodeAdmission allows them whatever they change): they are
    // not slowed by a call whose answer is known, and can repair nodes while the webhook is down.
    // A kubelet in an admin group still goes to the guard, as it gains nothing from the group.
    conditions.push({
      name: 'not-admin-group',
      expression: `!(has(request.userInfo.groups) && request.userInfo.groups.exists(g, g in ${litList(opts.adminGroups)})) || (${IS_KUBELET})`,
    });
  }
  return conditions;
}

function guardMatchConditions(opts: GuardRuleOptions): MatchCondition[] {
  const conditions = trustedWriterConditions(opts);
  conditions.push({
    name: 'touches-protected-keys',
    expression: touchesProtectedKeysExpression(opts.protectedKeys),
  });
  return conditions;
}

// ---- ValidatingAdmissionPolicy: the rules of decideNodeAdmission, one validation per deny reason.

type Kind = 'label' | 'annotation' | 'taint';
type Change = 'added' | 'changed' | 'removed';
const CHANGE_SUFFIX = { added: 'Added', changed: 'Changed', removed: 'Removed' } as const;

/** CEL: the list `source` (optionally filtered by `keep` over `x`) as describeChange strings. */
function described(source: string, kind: Kind, change: Change, keep?: string): string {
  const item =
    kind === 'taint'
      ? `'taint "' + x.key + '" (' + x.effect + ') ${change}'`
      : `'${kind} "' + x + '" ${change}'`;
  const list = keep === undefined ? source : `${source}.filter(x, ${keep})`;
  return `${list}.map(x, ${item})`;
}

function policyVariables(opts: GuardRuleOptions): { name: string; expression: string }[] {
  const tests = keyTests(opts.protectedKeys);
  const token = lit(TOKEN_LABEL_KEY);
  const joined = lit(JOINED_LABEL_KEY);
  const quarantine = lit(QUARANTINE_TAINT_KEY);
  const mapDiff = (field: 'labels' | 'annotations', test: (v: string) => string) => {
    const Field = field === 'labels' ? 'Labels' : 'Annotations'; // newLabels, labelsAdded, ...
    const after = `variables.new${Field}`;
    const before = `variables.old${Field}`;
    return [
      { name: `new${Field}`, expression: newMap(field) },
      { name: `old${Field}`, expression: oldMap(field) },
      { name: `${field}Added`, expression: `${after}.filter(k, ${test('k')} && !(k in ${before}))` },
      {
        name: `${field}Changed`,
        expression: `${after}.filter(k, ${test('k')} && k in ${before} && ${before}[k] != ${after}[k])`,
      },
      { name: `${field}Removed`, expression: `${before}.filter(k, ${test('k')} && !(k in ${after}))` },
    ];
  };
  const sameTaint = (a: string, b: string) => `${a}.key == ${b}.key && ${a}.effect == ${b}.effect`;
  const allChanges = (kind: Kind, plural: string) =>
    (['added', 'changed', 'removed'] as const).map((c) =>
      described(`variables.${plural}${CHANGE_SUFFIX[c]}`, kind, c),
    );
  const admin =
    opts.adminGroups.length === 0
      ? 'false'
      : `!variables.isKubelet && has(request.userInfo.groups) && request.userInfo.groups.exists(g, g in ${litList(opts.adminGroups)})`;
  return [
    {
      name: 'isController',
      expression: `has(request.userInfo.username) && request.userInfo.username in ${litList([opts.controllerUsername])}`,
    },
    {
      // isKubelet: the Node authorizer's identity, a system:node:<name> user in group system:nodes.
      name: 'isKubelet',
      expression: IS_KUBELET,
    },
    // A kubelet listed in an admin group gains nothing from it, as in decideNodeAdmission.
    { name: 'isAdmin', expression: admin },
    { name: 'asKubelet', expression: '!variables.isController && variables.isKubelet' },
    { name: 'isUpdate', expression: 'request.operation == "UPDATE"' },
    ...mapDiff('labels', tests.label),
    ...mapDiff('annotations', tests.annotation),
    { name: 'newTaints', expression: `${NEW_TAINTS}.filter(t, ${tests.taint('t.key')})` },
    { name: 'oldTaints', expression: `${OLD_TAINTS}.filter(t, ${tests.taint('t.key')})` },
    {
      name: 'taintsAdded',
      expression: `variables.newTaints.filter(t, !variables.oldTaints.exists(o, ${sameTaint('o', 't')}))`,
    },
    {
      name: 'taintsChanged',
      expression: `variables.newTaints.filter(t, variables.oldTaints.exists(o, ${sameTaint('o', 't')} && ${taintValue('o')} != ${taintValue('t')}))`,
    },
    {
      name: 'taintsRemoved',
      expression: `variables.oldTaints.filter(o, !variables.newTaints.exists(t, ${sameTaint('t', 'o')}))`,
    },
    {
      name: 'changes',
      expression: [
        ...allChanges('label', 'labels'),
        ...allChanges('annotation', 'annotations'),
        ...allChanges('taint', 'taints'),
      ].join(' + '),
    },
    {
      name: 'tokenChangedOnUpdate',
      expression: `variables.isUpdate && (${token} in variables.labelsAdded || ${token} in variables.labelsChanged || ${token} in variables.labelsRemoved)`,
    },
    { name: 'quarantineRemoved', expression: `variables.taintsRemoved.exists(t, t.key == ${quarantine})` },
    {
      // What a kubelet changed beyond its allowance and beyond the two rules with their own reasons
      // (token label on update, quarantine removal): mirrors kubeletViolation's KubeletProtectedKey.
      name: 'kubeletForbidden',
      expression: [
        described(
          'variables.labelsAdded',
          'label',
          'added',
          `x != ${token} && (variables.isUpdate || x != ${joined})`,
        ),
        described('variables.labelsChanged', 'label', 'changed', `x != ${token}`),
        described('variables.labelsRemoved', 'label', 'removed', `x != ${token}`),
        ...allChanges('annotation', 'annotations'),
        described('variables.taintsAdded', 'taint', 'added', `variables.isUpdate || x.key != ${quarantine}`),
        described('variables.taintsChanged', 'taint', 'changed'),
        described('variables.taintsRemoved', 'taint', 'removed', `x.key != ${quarantine}`),
      ].join(' + '),
    },
  ];
}

function policyValidations(): ValidatingAdmissionPolicy['spec']['validations'] {
  const rule = (expression: string, messageExpression: string, message: string) => ({
    expression,
    messageExpression,
    message,
    reason: 'Forbidden' as const,
  });
  return [
    rule(
      'variables.isController || variables.isKubelet || variables.isAdmin || size(variables.changes) == 0',
      `'Unauthorized: ' + variables.changes.join(', ') + ' by user "' + request.userInfo.username + '": only the nodeflavor controller or a member of an admin group may set, change or remove it'`,
      'Unauthorized: only the nodeflavor controller or a member of an admin group may set, change or remove nodeflavor-protected labels, annotations and taints',
    ),
    rule(
      '!variables.asKubelet || size(variables.changes) == 0 || request.userInfo.username == "system:node:" + request.name',
      `'KubeletOtherNode: ' + variables.changes.join(', ') + ': kubelet "' + request.userInfo.username + '" may not touch protected keys of Node "' + request.name + '"'`,
      'KubeletOtherNode: a kubelet may not touch protected keys of another Node',
    ),
    rule(
      '!variables.asKubelet || !variables.tokenChangedOnUpdate',
      `'KubeletTokenLabelOnUpdate: label "${TOKEN_LABEL_KEY}" ' + (${lit(TOKEN_LABEL_KEY)} in variables.labelsAdded ? 'added' : ${lit(TOKEN_LABEL_KEY)} in variables.labelsChanged ? 'changed' : 'removed') + ' on update: kubelets may set it only when they register (create) their Node; the nodeflavor controller removes it'`,
      `KubeletTokenLabelOnUpdate: kubelets may set label ${TOKEN_LABEL_KEY} only when they register (create) their Node`,
    ),
    rule(
      '!variables.asKubelet || !variables.quarantineRemoved',
      `'QuarantineTaintRemoval: taint "${QUARANTINE_TAINT_KEY}" removed: only the nodeflavor controller lifts the quarantine, once it has verified the flavor token'`,
      `QuarantineTaintRemoval: only the nodeflavor controller may remove taint ${QUARANTINE_TAINT_KEY}`,
    ),
    rule(
      '!variables.asKubelet || size(variables.kubeletForbidden) == 0',
      `'KubeletProtectedKey: ' + variables.kubeletForbidden.join(', ') + ': only the nodeflavor controller may set, change or remove it; kubelets may set only labels ${TOKEN_LABEL_KEY} and ${JOINED_LABEL_KEY} and taint ${QUARANTINE_TAINT_KEY}, when they register their Node'`,
      `KubeletProtectedKey: kubelets may set only labels ${TOKEN_LABEL_KEY} and ${JOINED_LABEL_KEY} and taint ${QUARANTINE_TAINT_KEY}, when they register their Node`,
    ),
  ];
}
