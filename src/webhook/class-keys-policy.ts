// A FlavorClass's keys guarded from the class's first second (issue 25, item 7), pure. The guard's
// key lists (the webhook's matchConditions, the generated policy) follow FlavorClasses only when
// the leader applies the registration again; until then a kubelet could set a new class's label.
// This ValidatingAdmissionPolicy takes the FlavorClasses themselves as its parameters (its binding
// selects them all), so the API server checks every Node write against every class it knows, with
// no registration to wait for: only the controller (and the admin groups) may set, change or
// remove a key a FlavorClass names. Keys the main guard already covers (the classes it was
// generated from) are left to it, with its precise reasons and metrics: this policy bites only in
// the window until the registration follows a new class, and is regenerated with it. The
// controller strips a key set before the class existed as soon as the class appears (event-keys.ts
// enqueues the Nodes that carry its keys).
import type { ProtectedKeys } from '../flavor/admission.ts';
import { FLAVOR_CLASS_KIND, API_VERSION as NODEFLAVOR_API_VERSION } from '../flavor/resources.ts';
import {
  API_VERSION,
  COMMON_LABELS,
  keyTests,
  NEW_TAINTS,
  newMap,
  nodeMatchConstraints,
  OLD_TAINTS,
  oldMap,
  taintValue,
  trustedWriterConditions,
  type ValidatingAdmissionPolicy,
} from './registration.ts';

/** The policy (and binding) name beside the guard's own: `<name>-class-keys`. */
export function classKeysPolicyName(name: string): string {
  return `${name}-class-keys`;
}

interface ClassKeysPolicyBinding {
  apiVersion: typeof API_VERSION;
  kind: 'ValidatingAdmissionPolicyBinding';
  metadata: { name: string; labels: Record<string, string> };
  spec: {
    policyName: string;
    paramRef: { selector: Record<string, never>; parameterNotFoundAction: 'Allow' };
    validationActions: ['Deny'];
  };
}

const sameTaint = (a: string, b: string) =>
  `${a}.key == ${b}.key && ${a}.effect == ${b}.effect && ${taintValue(a)} == ${taintValue(b)}`;

export function classKeysPolicy(opts: {
  name: string;
  controllerUsername: string;
  adminGroups: string[];
  /** The keys the main guard protects already (left to it). */
  covered: ProtectedKeys;
}): ValidatingAdmissionPolicy {
  const covered = keyTests(opts.covered);
  const conditions = trustedWriterConditions(opts);
  // Heartbeats and status updates change none of these: the policy is not even evaluated.
  conditions.push({
    name: 'changes-labels-annotations-or-taints',
    expression: `request.operation == "CREATE" || ${newMap('labels')} != ${oldMap('labels')} || ${newMap('annotations')} != ${oldMap('annotations')} || ${NEW_TAINTS} != ${OLD_TAINTS}`,
  });
  const changedIn = (field: 'labels' | 'annotations') => {
    const Field = field === 'labels' ? 'Labels' : 'Annotations';
    const after = `variables.new${Field}`;
    const before = `variables.old${Field}`;
    const guarded = field === 'labels' ? covered.label('k') : covered.annotation('k');
    return `(has(params.spec) && has(params.spec.${field}) ? params.spec.${field} : {}).filter(k, !${guarded} && ((k in ${after}) != (k in ${before}) || (k in ${after} && ${after}[k] != ${before}[k])))`;
  };
  return {
    apiVersion: API_VERSION,
    kind: 'ValidatingAdmissionPolicy',
    metadata: { name: classKeysPolicyName(opts.name), labels: { ...COMMON_LABELS } },
    spec: {
      paramKind: { apiVersion: NODEFLAVOR_API_VERSION, kind: FLAVOR_CLASS_KIND },
      failurePolicy: 'Fail',
      matchConstraints: nodeMatchConstraints(),
      matchConditions: conditions,
      variables: [
        { name: 'newLabels', expression: newMap('labels') },
        { name: 'oldLabels', expression: oldMap('labels') },
        { name: 'newAnnotations', expression: newMap('annotations') },
        { name: 'oldAnnotations', expression: oldMap('annotations') },
        { name: 'newTaints', expression: NEW_TAINTS },
        { name: 'oldTaints', expression: OLD_TAINTS },
        { name: 'labelsChanged', expression: changedIn('labels') },
        { name: 'annotationsChanged', expression: changedIn('annotations') },
        {
          name: 'taintsChanged',
          expression:
            '(has(params.spec) && has(params.spec.taints) ? params.spec.taints.map(c, c.key) : []).filter(key, ' +
            `!${covered.taint('key')} && (` +
            `variables.newTaints.exists(t, t.key == key && !variables.oldTaints.exists(o, ${sameTaint('o', 't')})) || ` +
            `variables.oldTaints.exists(o, o.key == key && !variables.newTaints.exists(t, ${sameTaint('t', 'o')}))))`,
        },
      ],
      validations: [
        {
          expression:
            'size(variables.labelsChanged) + size(variables.annotationsChanged) + size(variables.taintsChanged) == 0',
          messageExpression:
            "'Unauthorized: ' + (variables.labelsChanged.map(k, 'label \"' + k + '\"') + variables.annotationsChanged.map(k, 'annotation \"' + k + '\"') + variables.taintsChanged.map(k, 'taint \"' + k + '\"')).join(', ') + ' of FlavorClass ' + params.metadata.name + ' set, changed or removed by user \"' + request.userInfo.username + '\": only the nodeflavor controller or a member of an admin group may do that'",
          message:
            'Unauthorized: only the nodeflavor controller or a member of an admin group may set, change or remove the labels, annotations and taints a FlavorClass names',
          reason: 'Forbidden',
        },
      ],
    },
  };
}

export function classKeysPolicyBinding(opts: { name: string }): ClassKeysPolicyBinding {
  return {
    apiVersion: API_VERSION,
    kind: 'ValidatingAdmissionPolicyBinding',
    metadata: { name: classKeysPolicyName(opts.name), labels: { ...COMMON_LABELS } },
    spec: {
      policyName: classKeysPolicyName(opts.name),
      // Every FlavorClass is a parameter; none: nothing to guard beyond the main rules.
      paramRef: { selector: {}, parameterNotFoundAction: 'Allow' },
      validationActions: ['Deny'],
    },
  };
}
