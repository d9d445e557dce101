import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import fc from 'fast-check';
import {
  type AdmissionPolicy,
  decideNodeAdmission,
  diffProtected,
  isKubelet,
  isProtectedKey,
  type NodeAdmissionRequest,
  type NodeView,
  PROTECTED_PREFIX,
  type ProtectedKeys,
  protectedKeysFromFlavorClasses,
  QUARANTINE_TAINT_KEY,
  TOKEN_LABEL_KEY,
} from '../../src/flavor/admission.ts';

const CONTROLLER = 'system:serviceaccount:nodeflavor:nodeflavor';
const ADMINS = 'nodeflavor-admins';
const TOKEN_VALUE = 'SECRETTOKENVALUEAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA';
const FLAVOR_VALUE = 'sweet-alias-7f3a';

const keys: ProtectedKeys = protectedKeysFromFlavorClasses([
  {
    labels: { 'nodeflavor.io/flavor': 'sweet', 'example.com/tier': 'gold' },
    annotations: { 'example.com/trust-note': 'x' },
    taints: [{ key: 'example.com/dedicated' }],
  },
  { labels: { 'nodeflavor.io/flavor': 'sour' } },
]);
const policy: AdmissionPolicy = {
  controllerUsernames: [CONTROLLER],
  adminGroups: [ADMINS],
  protectedKeys: keys,
};

const kubelet = {
  username: 'system:node:n1',
  groups: ['system:nodes', 'system:authenticated'],
  nodeName: 'n1',
};
const user = { username: 'alice', groups: ['system:authenticated'], nodeName: 'n1' };

function node(parts: Partial<NodeView> = {}): NodeView {
  return { labels: {}, annotations: {}, taints: [], ...parts };
}

/** A registered node: ordinary kubelet labels, a flavor applied, still quarantined. */
const registered = node({
  labels: {
    'kubernetes.io/hostname': 'n1',
    'nodeflavor.io/flavor': FLAVOR_VALUE,
    'example.com/tier': 'gold',
  },
  annotations: { 'node.alpha.kubernetes.io/ttl': '0' },
  taints: [{ key: QUARANTINE_TAINT_KEY, effect: 'NoSchedule' }],
});

function withLabels(base: NodeView, labels: Record<string, string>): NodeView {
  return { ...base, labels };
}

interface Want {
  allowed: boolean;
  reason: string;
  /** Substrings the denial message must contain. */
  mentions?: string[];
}

interface Case {
  request: NodeAdmissionRequest;
  want: Want;
}

const { 'nodeflavor.io/flavor': _flavor, ...labelsWithoutFlavor } = registered.labels;

const cases: Record<string, Case> = {
  'kubelet CREATE with token label and quarantine taint is its registration': {
    request: {
      ...kubelet,
      operation: 'CREATE',
      newNode: node({
        labels: { 'kubernetes.io/hostname': 'n1', [TOKEN_LABEL_KEY]: TOKEN_VALUE },
        taints: [{ key: QUARANTINE_TAINT_KEY, effect: 'NoSchedule' }],
      }),
    },
    want: { allowed: true, reason: 'KubeletRegistration' },
  },
  'kubelet CREATE with only unprotected labels is no protected change': {
    request: {
      ...kubelet,
      operation: 'CREATE',
      newNode: node({ labels: { 'kubernetes.io/hostname': 'n1' } }),
    },
    want: { allowed: true, reason: 'NoProtectedChange' },
  },
  'kubelet CREATE with a flavor label is refused': {
    request: {
      ...kubelet,
      operation: 'CREATE',
      newNode: node({ labels: { [TOKEN_LABEL_KEY]: TOKEN_VALUE, 'nodeflavor.io/flavor': FLAVOR_VALUE } }),
    },
    want: { allowed: false, reason: 'KubeletProtectedKey', mentions: ['label "nodeflavor.io/flavor" added'] },
  },
  'kubelet CREATE with a FlavorClass label outside the prefix is refused': {
    request: { ...kubelet, operation: 'CREATE', newNode: node({ labels: { 'example.com/tier': 'gold' } }) },
    want: { allowed: false, reason: 'KubeletProtectedKey', mentions: ['label "example.com/tier" added'] },
  },
  'kubelet CREATE with a FlavorClass taint is refused': {
    request: {
      ...kubelet,
      operation: 'CREATE',
      newNode: node({ taints: [{ key: 'example.com/dedicated', value: 'x', effect: 'NoSchedule' }] }),
    },
    want: {
      allowed: false,
      reason: 'KubeletProtectedKey',
      mentions: ['taint "example.com/dedicated" (NoSchedule) added'],
    },
  },
  'kubelet CREATE of another Node with the token label is refused': {
    request: {
      ...kubelet,
      nodeName: 'n2',
      operation: 'CREATE',
      newNode: node({ labels: { [TOKEN_LABEL_KEY]: TOKEN_VALUE } }),
    },
    want: { allowed: false, reason: 'KubeletOtherNode', mentions: ['"system:node:n1"', 'Node "n2"'] },
  },
  'kubelet UPDATE adding a flavor label is refused': {
    request: {
      ...kubelet,
      operation: 'UPDATE',
      oldNode: withLabels(registered, labelsWithoutFlavor),
      newNode: registered,
    },
    want: { allowed: false, reason: 'KubeletProtectedKey', mentions: ['label "nodeflavor.io/flavor" added'] },
  },
  'kubelet UPDATE changing a flavor label is refused': {
    request: {
      ...kubelet,
      operation: 'UPDATE',
      oldNode: registered,
      newNode: withLabels(registered, { ...registered.labels, 'nodeflavor.io/flavor': 'other-alias' }),
    },
    want: {
      allowed: false,
      reason: 'KubeletProtectedKey',
      mentions: ['label "nodeflavor.io/flavor" changed'],
    },
  },
  'kubelet UPDATE removing a flavor label is refused': {
    request: {
      ...kubelet,
      operation: 'UPDATE',
      oldNode: registered,
      newNode: withLabels(registered, labelsWithoutFlavor),
    },
    want: {
      allowed: false,
      reason: 'KubeletProtectedKey',
      mentions: ['label "nodeflavor.io/flavor" removed'],
    },
  },
  'kubelet UPDATE through nodes/status changing a flavor label is refused': {
    request: {
      ...kubelet,
      operation: 'UPDATE',
      subresource: 'status',
      oldNode: registered,
      newNode: withLabels(registered, { ...registered.labels, 'nodeflavor.io/flavor': 'other-alias' }),
    },
    want: {
      allowed: false,
      reason: 'KubeletProtectedKey',
      mentions: ['label "nodeflavor.io/flavor" changed'],
    },
  },
  'kubelet UPDATE removing the quarantine taint is refused': {
    request: { ...kubelet, operation: 'UPDATE', oldNode: registered, newNode: { ...registered, taints: [] } },
    want: {
      allowed: false,
      reason: 'QuarantineTaintRemoval',
      mentions: [`taint "${QUARANTINE_TAINT_KEY}" (NoSchedule) removed`],
    },
  },
  'kubelet UPDATE adding the quarantine taint is refused (only at registration)': {
    request: {
      ...kubelet,
      operation: 'UPDATE',
      oldNode: { ...registered, taints: [] },
      newNode: registered,
    },
    want: { allowed: false, reason: 'KubeletProtectedKey', mentions: [`taint "${QUARANTINE_TAINT_KEY}"`] },
  },
  'kubelet UPDATE adding a FlavorClass annotation is refused': {
    request: {
      ...kubelet,
      operation: 'UPDATE',
      oldNode: registered,
      newNode: { ...registered, annotations: { ...registered.annotations, 'example.com/trust-note': 'me' } },
    },
    want: {
      allowed: false,
      reason: 'KubeletProtectedKey',
      mentions: ['annotation "example.com/trust-note" added'],
    },
  },
  'kubelet UPDATE adding an annotation under the prefix is refused': {
    request: {
      ...kubelet,
      operation: 'UPDATE',
      oldNode: registered,
      newNode: { ...registered, annotations: { 'nodeflavor.io/verified-at': 'now' } },
    },
    want: {
      allowed: false,
      reason: 'KubeletProtectedKey',
      mentions: ['annotation "nodeflavor.io/verified-at" added'],
    },
  },
  'kubelet UPDATE setting the token label is refused': {
    request: {
      ...kubelet,
      operation: 'UPDATE',
      oldNode: registered,
      newNode: withLabels(registered, { ...registered.labels, [TOKEN_LABEL_KEY]: TOKEN_VALUE }),
    },
    want: {
      allowed: false,
      reason: 'KubeletTokenLabelOnUpdate',
      mentions: [`label "${TOKEN_LABEL_KEY}" added`],
    },
  },
  'kubelet UPDATE changing the token label is refused': {
    request: {
      ...kubelet,
      operation: 'UPDATE',
      oldNode: withLabels(registered, { ...registered.labels, [TOKEN_LABEL_KEY]: 'OLDTOKENVALUE' }),
      newNode: withLabels(registered, { ...registered.labels, [TOKEN_LABEL_KEY]: TOKEN_VALUE }),
    },
    want: {
      allowed: false,
      reason: 'KubeletTokenLabelOnUpdate',
      mentions: [`label "${TOKEN_LABEL_KEY}" changed`],
    },
  },
  'kubelet UPDATE through nodes/status setting the token label is refused': {
    request: {
      ...kubelet,
      operation: 'UPDATE',
      subresource: 'status',
      oldNode: registered,
      newNode: withLabels(registered, { ...registered.labels, [TOKEN_LABEL_KEY]: TOKEN_VALUE }),
    },
    want: {
      allowed: false,
      reason: 'KubeletTokenLabelOnUpdate',
      mentions: [`label "${TOKEN_LABEL_KEY}" added`],
    },
  },
  'kubelet UPDATE adding a label under the prefix that no FlavorClass names is refused': {
    request: {
      ...kubelet,
      operation: 'UPDATE',
      oldNode: registered,
      newNode: withLabels(registered, { ...registered.labels, 'nodeflavor.io/made-up': 'yes' }),
    },
    want: {
      allowed: false,
      reason: 'KubeletProtectedKey',
      mentions: ['label "nodeflavor.io/made-up" added'],
    },
  },
  'kubelet status update leaving protected keys alone is allowed': {
    request: {
      ...kubelet,
      operation: 'UPDATE',
      subresource: 'status',
      oldNode: registered,
      newNode: {
        ...registered,
        labels: { ...registered.labels, 'node.kubernetes.io/instance-type': 'm5.large' },
        annotations: { 'node.alpha.kubernetes.io/ttl': '15' },
      },
    },
    want: { allowed: true, reason: 'NoProtectedChange' },
  },
  'ordinary user adding a flavor label is refused': {
    request: {
      ...user,
      operation: 'UPDATE',
      oldNode: withLabels(registered, labelsWithoutFlavor),
      newNode: registered,
    },
    want: {
      allowed: false,
      reason: 'Unauthorized',
      mentions: ['label "nodeflavor.io/flavor" added', 'user "alice"'],
    },
  },
  'ordinary user changing a FlavorClass label outside the prefix is refused': {
    request: {
      ...user,
      operation: 'UPDATE',
      oldNode: registered,
      newNode: withLabels(registered, { ...registered.labels, 'example.com/tier': 'platinum' }),
    },
    want: { allowed: false, reason: 'Unauthorized', mentions: ['label "example.com/tier" changed'] },
  },
  'ordinary user removing the quarantine taint is refused': {
    request: { ...user, operation: 'UPDATE', oldNode: registered, newNode: { ...registered, taints: [] } },
    want: {
      allowed: false,
      reason: 'Unauthorized',
      mentions: [`taint "${QUARANTINE_TAINT_KEY}" (NoSchedule) removed`],
    },
  },
  'ordinary user changing only unprotected labels is allowed': {
    request: {
      ...user,
      operation: 'UPDATE',
      oldNode: registered,
      newNode: withLabels(registered, { ...registered.labels, 'team.example.com/owner': 'alice' }),
    },
    want: { allowed: true, reason: 'NoProtectedChange' },
  },
  'a system:node user without group system:nodes is an ordinary user': {
    request: {
      username: 'system:node:n1',
      groups: ['system:authenticated'],
      nodeName: 'n1',
      operation: 'CREATE',
      newNode: node({ labels: { [TOKEN_LABEL_KEY]: TOKEN_VALUE } }),
    },
    want: { allowed: false, reason: 'Unauthorized', mentions: [`label "${TOKEN_LABEL_KEY}" added`] },
  },
  'a bootstrap token user is an ordinary user': {
    request: {
      username: 'system:bootstrap:abcdef',
      groups: ['system:bootstrappers', 'system:bootstrappers:kubeadm:default-node-token'],
      nodeName: 'n1',
      operation: 'CREATE',
      newNode: node({ labels: { [TOKEN_LABEL_KEY]: TOKEN_VALUE } }),
    },
    want: { allowed: false, reason: 'Unauthorized' },
  },
  'the controller may change flavor labels and lift the quarantine': {
    request: {
      username: CONTROLLER,
      groups: ['system:serviceaccounts'],
      nodeName: 'n1',
      operation: 'UPDATE',
      oldNode: withLabels(registered, { ...labelsWithoutFlavor, [TOKEN_LABEL_KEY]: TOKEN_VALUE }),
      newNode: { ...registered, taints: [] },
    },
    want: { allowed: true, reason: 'Controller' },
  },
  'an admin group member may change flavor labels': {
    request: {
      username: 'bob',
      groups: ['system:authenticated', ADMINS],
      nodeName: 'n1',
      operation: 'UPDATE',
      oldNode: registered,
      newNode: withLabels(registered, labelsWithoutFlavor),
    },
    want: { allowed: true, reason: 'AdminGroup' },
  },
  'a kubelet listed in an admin group is still judged as a kubelet': {
    request: {
      ...kubelet,
      groups: [...kubelet.groups, ADMINS],
      operation: 'UPDATE',
      oldNode: registered,
      newNode: withLabels(registered, labelsWithoutFlavor),
    },
    want: { allowed: false, reason: 'KubeletProtectedKey' },
  },
  'an UPDATE without oldObject cannot be judged and is refused': {
    request: { ...user, operation: 'UPDATE', newNode: registered },
    want: { allowed: false, reason: 'MalformedRequest' },
  },
  'a CREATE without object cannot be judged and is refused': {
    request: { ...kubelet, operation: 'CREATE' },
    want: { allowed: false, reason: 'MalformedRequest' },
  },
  'DELETE is not a flavor change': {
    request: { ...kubelet, operation: 'DELETE', oldNode: registered },
    want: { allowed: true, reason: 'NoProtectedChange' },
  },
};

describe('decideNodeAdmission', () => {
  for (const [name, { request, want }] of Object.entries(cases)) {
    test(name, () => {
      const got = decideNodeAdmission(request, policy);
      assert.equal(got.allowed, want.allowed, JSON.stringify(got));
      assert.equal(got.reason, want.reason, JSON.stringify(got));
      if (got.allowed) return;
      for (const text of want.mentions ?? [])
        assert.ok(got.message.includes(text), `"${got.message}" lacks ${text}`);
      for (const secret of [TOKEN_VALUE, FLAVOR_VALUE, 'OLDTOKENVALUE', 'other-alias', 'platinum', 'gold']) {
        assert.ok(!got.message.includes(secret), `message leaks a label value: ${got.message}`);
      }
    });
  }

  test('every denial of a multi-key write names every offending key', () => {
    const got = decideNodeAdmission(
      {
        ...kubelet,
        operation: 'UPDATE',
        oldNode: registered,
        newNode: {
          ...registered,
          labels: { ...labelsWithoutFlavor, [TOKEN_LABEL_KEY]: TOKEN_VALUE },
          taints: [],
        },
      },
      policy,
    );
    assert.equal(got.allowed, false);
    if (got.allowed) return;
    for (const text of [
      '"nodeflavor.io/flavor" removed',
      `"${TOKEN_LABEL_KEY}" added`,
      `"${QUARANTINE_TAINT_KEY}"`,
    ]) {
      assert.ok(got.message.includes(text), got.message);
    }
  });
});

describe('diffProtected', () => {
  test('taints are compared by key and effect; a value change is a change', () => {
    const before = node({
      taints: [
        { key: 'example.com/dedicated', value: 'a', effect: 'NoSchedule' },
        { key: QUARANTINE_TAINT_KEY, effect: 'NoSchedule' },
        { key: 'unrelated/taint', effect: 'NoSchedule' },
      ],
    });
    const after = node({
      taints: [
        { key: 'example.com/dedicated', value: 'b', effect: 'NoSchedule' },
        { key: QUARANTINE_TAINT_KEY, effect: 'NoExecute' },
      ],
    });
    assert.deepEqual(diffProtected(before, after, keys), [
      { kind: 'taint', key: 'example.com/dedicated', effect: 'NoSchedule', change: 'changed' },
      { kind: 'taint', key: QUARANTINE_TAINT_KEY, effect: 'NoExecute', change: 'added' },
      { kind: 'taint', key: QUARANTINE_TAINT_KEY, effect: 'NoSchedule', change: 'removed' },
    ]);
  });

  test('an absent taint value equals an empty one', () => {
    const a = node({ taints: [{ key: QUARANTINE_TAINT_KEY, effect: 'NoSchedule' }] });
    const b = node({ taints: [{ key: QUARANTINE_TAINT_KEY, value: '', effect: 'NoSchedule' }] });
    assert.deepEqual(diffProtected(a, b, keys), []);
  });

  test('label keys that are Object.prototype names are ordinary keys', () => {
    const guarded = { ...keys, labels: new Set(['constructor', 'toString']) };
    assert.deepEqual(diffProtected(node(), node({ labels: { constructor: 'x' } }), guarded), [
      { kind: 'label', key: 'constructor', change: 'added' },
    ]);
    assert.deepEqual(diffProtected(node({ labels: { toString: 'x' } }), node(), guarded), [
      { kind: 'label', key: 'toString', change: 'removed' },
    ]);
  });
});

describe('protected keys and identities', () => {
  test('FlavorClass keys, everything under the prefix, and the quarantine taint are protected', () => {
    assert.equal(keys.prefix, PROTECTED_PREFIX);
    assert.ok(isProtectedKey('label', 'example.com/tier', keys));
    assert.ok(isProtectedKey('label', 'nodeflavor.io/anything', keys));
    assert.ok(isProtectedKey('annotation', 'nodeflavor.io/anything', keys));
    assert.ok(isProtectedKey('annotation', 'example.com/trust-note', keys));
    assert.ok(isProtectedKey('taint', 'example.com/dedicated', keys));
    assert.ok(isProtectedKey('taint', QUARANTINE_TAINT_KEY, protectedKeysFromFlavorClasses([])));
    assert.ok(!isProtectedKey('label', 'kubernetes.io/hostname', keys));
    // A FlavorClass label key is protected as a label, not as an annotation.
    assert.ok(!isProtectedKey('annotation', 'example.com/tier', keys));
    assert.ok(!isProtectedKey('label', 'sub.nodeflavor.io/x', keys));
  });

  test('a kubelet is a system:node:<name> user in group system:nodes', () => {
    assert.ok(isKubelet('system:node:n1', ['system:nodes']));
    assert.ok(!isKubelet('system:node:n1', ['system:authenticated']));
    assert.ok(!isKubelet('system:node:', ['system:nodes']));
    assert.ok(!isKubelet('alice', ['system:nodes']));
  });
});

describe('property: fail open for liveness', () => {
  const labelKey = fc.oneof(
    fc.string({ maxLength: 12 }),
    fc.constantFrom('constructor', '__proto__', 'kubernetes.io/hostname', 'team.example.com/owner'),
  );
  const unprotectedLabels = fc
    .dictionary(labelKey, fc.string({ maxLength: 8 }))
    .map((m) => Object.fromEntries(Object.entries(m).filter(([k]) => !isProtectedKey('label', k, keys))));
  const protectedLabels = fc.dictionary(
    fc.oneof(
      fc.constantFrom(TOKEN_LABEL_KEY, 'nodeflavor.io/flavor', 'example.com/tier'),
      fc.string({ maxLength: 8 }).map((s) => PROTECTED_PREFIX + s),
    ),
    fc.string({ maxLength: 8 }),
  );
  const anyone = fc.record({
    username: fc.oneof(fc.constantFrom('system:node:n1', 'alice', CONTROLLER), fc.string()),
    groups: fc.subarray(['system:nodes', 'system:authenticated', ADMINS, 'system:masters']),
    nodeName: fc.constantFrom('n1', 'n2'),
    subresource: fc.constantFrom('', 'status'),
  });

  test('any UPDATE that leaves protected labels equal is allowed, whoever sends it', () => {
    fc.assert(
      fc.property(
        anyone,
        protectedLabels,
        unprotectedLabels,
        unprotectedLabels,
        (who, shared, oldRest, newRest) => {
          const taints = [{ key: QUARANTINE_TAINT_KEY, effect: 'NoSchedule' }];
          const decision = decideNodeAdmission(
            {
              ...who,
              operation: 'UPDATE',
              oldNode: node({ labels: { ...oldRest, ...shared }, taints }),
              newNode: node({ labels: { ...newRest, ...shared }, taints }),
            },
            policy,
          );
          assert.deepEqual(decision, { allowed: true, reason: 'NoProtectedChange' });
        },
      ),
      { numRuns: 500 },
    );
  });
});
