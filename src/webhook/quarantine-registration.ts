// The objects that quarantine a Node from its first version (ADR 0012), pure:
//   - webhook mode: a MutatingWebhookConfiguration that sends the webhook a kubelet's Node CREATE
//     unless the Node already carries both the quarantine taint and the joined mark (so plain
//     nodes that register already quarantined cost nothing); the webhook reads the NodeNameClaim
//     from the API server and adds what is missing;
//   - policy mode: a MutatingAdmissionPolicy whose parameters are the NodeNameClaims (the binding
//     selects them all): the API server evaluates it once per claim, and only the claim named
//     like the Node being registered matches, so the mutation is the same as the webhook's,
//     without a webhook on the wire.
// Both fail closed (failurePolicy Fail) and are re-invoked if a later mutation changed the Node.
import {
  JOINED_LABEL_KEY,
  JOINED_LABEL_VALUE,
  NODE_NAME_CLAIM_KIND,
  API_VERSION as NODEFLAVOR_API_VERSION,
  QUARANTINE_TAINT_KEY,
} from '../flavor/resources.ts';
import {
  API_VERSION,
  COMMON_LABELS,
  DEFAULT_TIMEOUT_SECONDS,
  IS_KUBELET,
  lit,
  type MatchCondition,
  NEW_TAINTS,
  type WebhookServiceReference,
} from './registration.ts';

export const REGISTRATION_WEBHOOK_NAME = 'registration.nodeflavor.io';

/** A kubelet's Node CREATE: the one write a Node's first version comes from. */
const REGISTRATION_RULES = [
  {
    apiGroups: [''],
    apiVersions: ['v1'],
    operations: ['CREATE' as const],
    resources: ['nodes'],
    scope: 'Cluster' as const,
  },
];

const QUARANTINED = `${NEW_TAINTS}.exists(t, t.key == ${lit(QUARANTINE_TAINT_KEY)} && t.effect == "NoSchedule")`;
const MARKED = `has(object.metadata.labels) && ${lit(JOINED_LABEL_KEY)} in object.metadata.labels && object.metadata.labels[${lit(JOINED_LABEL_KEY)}] == ${lit(JOINED_LABEL_VALUE)}`;

const REGISTRATION_CONDITIONS: MatchCondition[] = [
  { name: 'kubelet-registration', expression: IS_KUBELET },
  // Already quarantined and marked: nothing to add, so no call (and no dependency) at all.
  { name: 'not-quarantined-and-marked', expression: `!(${QUARANTINED} && ${MARKED})` },
];

export interface MutatingWebhookConfiguration {
  apiVersion: typeof API_VERSION;
  kind: 'MutatingWebhookConfiguration';
  metadata: { name: string; labels: Record<string, string> };
  webhooks: {
    name: string;
    clientConfig: { caBundle?: string; service?: WebhookServiceReference; url?: string };
    rules: typeof REGISTRATION_RULES;
    failurePolicy: 'Fail';
    matchPolicy: 'Equivalent';
    sideEffects: 'None';
    timeoutSeconds: number;
    admissionReviewVersions: ['v1'];
    reinvocationPolicy: 'IfNeeded';
    namespaceSelector: Record<string, never>;
    objectSelector: Record<string, never>;
    matchConditions: MatchCondition[];
  }[];
}

export function mutatingWebhookConfiguration(opts: {
  name: string;
  caBundle?: string;
  service?: WebhookServiceReference;
  url?: string;
}): MutatingWebhookConfiguration {
  if ((opts.service === undefined) === (opts.url === undefined))
    throw new Error('webhook registration needs exactly one of service or url');
  const clientConfig: MutatingWebhookConfiguration['webhooks'][number]['clientConfig'] = {};
  if (opts.caBundle !== undefined) clientConfig.caBundle = opts.caBundle;
  if (opts.service !== undefined) clientConfig.service = { ...opts.service };
  if (opts.url !== undefined) clientConfig.url = opts.url;
  return {
    apiVersion: API_VERSION,
    kind: 'MutatingWebhookConfiguration',
    metadata: { name: opts.name, labels: { ...COMMON_LABELS } },
    webhooks: [
      {
        name: REGISTRATION_WEBHOOK_NAME,
        clientConfig,
        rules: structuredClone(REGISTRATION_RULES),
        failurePolicy: 'Fail',
        matchPolicy: 'Equivalent',
        sideEffects: 'None',
        timeoutSeconds: DEFAULT_TIMEOUT_SECONDS,
        admissionReviewVersions: ['v1'],
        // Another mutation after ours (a later webhook) could drop the taint: we run again.
        reinvocationPolicy: 'IfNeeded',
        namespaceSelector: {},
        objectSelector: {},
        matchConditions: structuredClone(REGISTRATION_CONDITIONS),
      },
    ],
  };
}

interface MutatingAdmissionPolicy {
  apiVersion: typeof API_VERSION;
  kind: 'MutatingAdmissionPolicy';
  metadata: { name: string; labels: Record<string, string> };
  spec: {
    paramKind: { apiVersion: string; kind: string };
    matchConstraints: {
      resourceRules: typeof REGISTRATION_RULES;
      matchPolicy: 'Equivalent';
      namespaceSelector: Record<string, never>;
      objectSelector: Record<string, never>;
    };
    matchConditions: MatchCondition[];
    failurePolicy: 'Fail';
    reinvocationPolicy: 'IfNeeded';
    mutations: { patchType: 'JSONPatch'; jsonPatch: { expression: string } }[];
  };
}

interface MutatingAdmissionPolicyBinding {
  apiVersion: typeof API_VERSION;
  kind: 'MutatingAdmissionPolicyBinding';
  metadata: { name: string; labels: Record<string, string> };
  spec: {
    policyName: string;
    paramRef: { selector: Record<string, never>; parameterNotFoundAction: 'Allow' };
  };
}

const TAINT = `Object.spec.taints{key: ${lit(QUARANTINE_TAINT_KEY)}, effect: "NoSchedule"}`;
/** RFC 6901 pointer of the joined label inside metadata.labels. */
const JOINED_POINTER = `/metadata/labels/${JOINED_LABEL_KEY.replaceAll('~', '~0').replaceAll('/', '~1')}`;

/** CEL: the JSON patch registrationPatch makes (src/flavor/registration-quarantine.ts). */
const PATCH_EXPRESSION = [
  `(${QUARANTINED} ? [] : has(object.spec) && has(object.spec.taints)`,
  `  ? [JSONPatch{op: "add", path: "/spec/taints/-", value: ${TAINT}}]`,
  `  : has(object.spec)`,
  `  ? [JSONPatch{op: "add", path: "/spec/taints", value: [${TAINT}]}]`,
  `  : [JSONPatch{op: "add", path: "/spec", value: Object.spec{taints: [${TAINT}]}}])`,
  `+ (${MARKED} ? [] : has(object.metadata.labels)`,
  `  ? [JSONPatch{op: "add", path: ${lit(JOINED_POINTER)}, value: ${lit(JOINED_LABEL_VALUE)}}]`,
  `  : [JSONPatch{op: "add", path: "/metadata/labels", value: {${lit(JOINED_LABEL_KEY)}: ${lit(JOINED_LABEL_VALUE)}}}])`,
].join('\n');

export function quarantineAdmissionPolicy(opts: { name: string }): MutatingAdmissionPolicy {
  return {
    apiVersion: API_VERSION,
    kind: 'MutatingAdmissionPolicy',
    metadata: { name: opts.name, labels: { ...COMMON_LABELS } },
    spec: {
      paramKind: { apiVersion: NODEFLAVOR_API_VERSION, kind: NODE_NAME_CLAIM_KIND },
      matchConstraints: {
        resourceRules: structuredClone(REGISTRATION_RULES),
        matchPolicy: 'Equivalent',
        namespaceSelector: {},
        objectSelector: {},
      },
      matchConditions: [
        ...structuredClone(REGISTRATION_CONDITIONS),
        // Evaluated once per claim: only the claim of this very name applies.
        { name: 'claimed-name', expression: 'params.metadata.name == object.metadata.name' },
      ],
      failurePolicy: 'Fail',
      reinvocationPolicy: 'IfNeeded',
      mutations: [{ patchType: 'JSONPatch', jsonPatch: { expression: PATCH_EXPRESSION } }],
    },
  };
}

export function quarantineAdmissionPolicyBinding(opts: {
  name: string;
  policyName: string;
}): MutatingAdmissionPolicyBinding {
  return {
    apiVersion: API_VERSION,
    kind: 'MutatingAdmissionPolicyBinding',
    metadata: { name: opts.name, labels: { ...COMMON_LABELS } },
    // Every claim is a parameter; none (a cluster where nothing joined yet): nothing to do.
    spec: { policyName: opts.policyName, paramRef: { selector: {}, parameterNotFoundAction: 'Allow' } },
  };
}
