import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import {
  PROTECTED_PREFIX,
  protectedKeysFromFlavorClasses,
  QUARANTINE_TAINT_KEY,
  TOKEN_LABEL_KEY,
} from '../../src/flavor/admission.ts';
import {
  NODE_WEBHOOK_NAME,
  touchesProtectedKeysExpression,
  validatingAdmissionPolicy,
  validatingAdmissionPolicyBinding,
  validatingWebhookConfiguration,
} from '../../src/webhook/registration.ts';

const CONTROLLER = 'system:serviceaccount:nodeflavor:nodeflavor';
const protectedKeys = protectedKeysFromFlavorClasses([
  {
    labels: { 'nodeflavor.io/flavor': 'sweet', 'example.com/tier': 'gold' },
    annotations: { 'example.com/trust-note': 'x' },
    taints: [{ key: 'example.com/dedicated' }],
  },
]);
const guard = { protectedKeys, controllerUsername: CONTROLLER, adminGroups: ['nodeflavor-admins'] };
const service = { namespace: 'nodeflavor', name: 'nodeflavor-webhook', port: 443, path: '/validate/nodes' };

const webhookConfig = validatingWebhookConfiguration({
  name: 'nodeflavor',
  caBundle: 'Q0E=',
  service,
  ...guard,
});
const webhook = webhookConfig.webhooks[0]!;
const policy = validatingAdmissionPolicy({ name: 'nodeflavor-nodes', ...guard });

/** Every CEL expression of a builder's output, with where it sits. */
function expressions(): [string, string][] {
  return [
    ...webhook.matchConditions.map((c): [string, string] => [
      `webhook matchCondition ${c.name}`,
      c.expression,
    ]),
    ...policy.spec.matchConditions.map((c): [string, string] => [
      `policy matchCondition ${c.name}`,
      c.expression,
    ]),
    ...policy.spec.variables.map((v): [string, string] => [`policy variable ${v.name}`, v.expression]),
    ...policy.spec.validations.flatMap((v, i): [string, string][] => [
      [`policy validation ${i}`, v.expression],
      [`policy validation ${i} message`, v.messageExpression],
    ]),
  ];
}

describe('validatingWebhookConfiguration', () => {
  test('one webhook for nodes and nodes/status, CREATE and UPDATE, failing closed', () => {
    assert.equal(webhookConfig.apiVersion, 'admissionregistration.k8s.io/v1');
    assert.equal(webhookConfig.kind, 'ValidatingWebhookConfiguration');
    assert.equal(webhookConfig.webhooks.length, 1);
    assert.equal(webhook.name, NODE_WEBHOOK_NAME);
    assert.equal(webhook.failurePolicy, 'Fail');
    assert.equal(webhook.sideEffects, 'None');
    assert.equal(webhook.matchPolicy, 'Equivalent');
    assert.deepEqual(webhook.admissionReviewVersions, ['v1']);
    assert.equal(webhook.timeoutSeconds, 5);
    assert.deepEqual(webhook.rules, [
      {
        apiGroups: [''],
        apiVersions: ['v1'],
        operations: ['CREATE', 'UPDATE'],
        resources: ['nodes', 'nodes/status'],
        scope: 'Cluster',
      },
    ]);
  });

  test('states empty selectors, so a narrowed one (a node opting out) shows up as drift', () => {
    assert.deepEqual(webhook.namespaceSelector, {});
    assert.deepEqual(webhook.objectSelector, {});
  });

  test('never matches leases, so kubelet heartbeats never reach it', () => {
    assert.ok(!JSON.stringify(webhook.rules).includes('lease'));
    assert.ok(!JSON.stringify(policy.spec.matchConstraints).includes('lease'));
  });

  test('client config: service or url, with the CA bundle', () => {
    assert.deepEqual(webhook.clientConfig, { caBundle: 'Q0E=', service });
    const byUrl = validatingWebhookConfiguration({
      name: 'x',
      url: 'https://127.0.0.1:9443/validate',
      ...guard,
    });
    assert.deepEqual(byUrl.webhooks[0]?.clientConfig, { url: 'https://127.0.0.1:9443/validate' });
    assert.throws(
      () => validatingWebhookConfiguration({ name: 'x', ...guard }),
      /exactly one of service or url/,
    );
    assert.throws(
      () => validatingWebhookConfiguration({ name: 'x', service, url: 'https://a', ...guard }),
      /exactly one of service or url/,
    );
  });

  test('timeout must be 1..30 seconds', () => {
    assert.equal(
      validatingWebhookConfiguration({ name: 'x', service, timeoutSeconds: 10, ...guard }).webhooks[0]
        ?.timeoutSeconds,
      10,
    );
    assert.throws(
      () => validatingWebhookConfiguration({ name: 'x', service, timeoutSeconds: 31, ...guard }),
      RangeError,
    );
  });

  test('match conditions skip the controller, admin groups (not kubelets in them) and writes that touch no protected key', () => {
    const [notController, notAdmin, touches] = webhook.matchConditions;
    assert.equal(webhook.matchConditions.length, 3);
    assert.equal(notController?.name, 'not-nodeflavor-controller');
    assert.ok(notController?.expression.includes(JSON.stringify(CONTROLLER)));
    assert.equal(notAdmin?.name, 'not-admin-group');
    assert.ok(notAdmin?.expression.includes(JSON.stringify('nodeflavor-admins')));
    assert.ok(
      notAdmin?.expression.includes('"system:nodes" in request.userInfo.groups'),
      'kubelets still go',
    );
    assert.equal(touches?.name, 'touches-protected-keys');
    assert.equal(touches?.expression, touchesProtectedKeysExpression(protectedKeys));
    const withoutAdmins = validatingWebhookConfiguration({ name: 'x', service, ...guard, adminGroups: [] });
    assert.deepEqual(
      withoutAdmins.webhooks[0]?.matchConditions.map((c) => c.name),
      ['not-nodeflavor-controller', 'touches-protected-keys'],
    );
  });

  test('refuses options that would guard nothing or everything', () => {
    assert.throws(() =>
      validatingWebhookConfiguration({ name: 'x', service, ...guard, controllerUsername: '' }),
    );
    assert.throws(() =>
      validatingWebhookConfiguration({
        name: 'x',
        service,
        ...guard,
        protectedKeys: { ...protectedKeys, prefix: '' },
      }),
    );
  });
});

describe('touchesProtectedKeysExpression', () => {
  const expression = touchesProtectedKeysExpression(protectedKeys);

  test('names the prefix and every explicit key outside it', () => {
    assert.ok(expression.includes(`startsWith(${JSON.stringify(PROTECTED_PREFIX)})`));
    for (const key of ['example.com/tier', 'example.com/trust-note', 'example.com/dedicated']) {
      assert.ok(expression.includes(JSON.stringify(key)), key);
    }
  });

  test('leaves out explicit keys the prefix already covers', () => {
    assert.ok(!expression.includes(JSON.stringify('nodeflavor.io/flavor')));
    assert.ok(!expression.includes(JSON.stringify(QUARANTINE_TAINT_KEY)));
  });

  test('is the same text whatever order the keys came in', () => {
    const reversed = {
      ...protectedKeys,
      labels: new Set([...protectedKeys.labels].reverse()),
      taints: new Set([...protectedKeys.taints].reverse()),
    };
    assert.equal(touchesProtectedKeysExpression(reversed), expression);
  });

  test('guards optional fields and oldObject, which is null on CREATE', () => {
    assert.ok(expression.includes('has(object.metadata.labels)'));
    assert.ok(expression.includes('has(object.spec.taints)'));
    assert.ok(expression.includes('request.operation == "UPDATE" && has(oldObject.metadata.labels)'));
  });
});

describe('validatingAdmissionPolicy', () => {
  test('fails closed on nodes and nodes/status, CREATE and UPDATE', () => {
    assert.equal(policy.apiVersion, 'admissionregistration.k8s.io/v1');
    assert.equal(policy.kind, 'ValidatingAdmissionPolicy');
    assert.equal(policy.spec.failurePolicy, 'Fail');
    assert.equal(policy.spec.matchConstraints.matchPolicy, 'Equivalent');
    assert.deepEqual(policy.spec.matchConstraints.resourceRules, webhook.rules);
    assert.deepEqual(policy.spec.matchConditions, webhook.matchConditions);
  });

  test('one validation per deny reason, each with a message and messageExpression', () => {
    const reasons = policy.spec.validations.map((v) => v.message.split(':')[0]);
    assert.deepEqual(reasons, [
      'Unauthorized',
      'KubeletOtherNode',
      'KubeletTokenLabelOnUpdate',
      'QuarantineTaintRemoval',
      'KubeletProtectedKey',
    ]);
    for (const v of policy.spec.validations) {
      assert.equal(v.reason, 'Forbidden');
      assert.ok(!/[\r\n]/.test(v.message), 'a static message may not contain line breaks');
    }
  });

  test('variables have unique CEL identifiers and refer only to earlier ones', () => {
    const names = policy.spec.variables.map((v) => v.name);
    assert.equal(new Set(names).size, names.length);
    policy.spec.variables.forEach((v, i) => {
      assert.match(v.name, /^[A-Za-z_][A-Za-z0-9_]*$/);
      for (const [, used] of v.expression.matchAll(/variables\.([A-Za-z0-9_]+)/g)) {
        assert.ok(names.slice(0, i).includes(used ?? ''), `${v.name} uses ${used} before it is defined`);
      }
    });
  });

  test('bakes in the key lists, the kubelet allowances and the trusted identities', () => {
    const text = JSON.stringify(policy);
    for (const needle of [
      'example.com/tier',
      'example.com/trust-note',
      'example.com/dedicated',
      PROTECTED_PREFIX,
      TOKEN_LABEL_KEY,
      QUARANTINE_TAINT_KEY,
      CONTROLLER,
      'nodeflavor-admins',
      'system:nodes',
    ]) {
      assert.ok(text.includes(needle), needle);
    }
  });

  test('without admin groups nobody is an admin', () => {
    const noAdmins = validatingAdmissionPolicy({ name: 'p', ...guard, adminGroups: [] });
    assert.equal(noAdmins.spec.variables.find((v) => v.name === 'isAdmin')?.expression, 'false');
  });
});

test('every CEL expression is a non-empty string with balanced brackets', () => {
  for (const [where, expression] of expressions()) {
    assert.ok(typeof expression === 'string' && expression.trim().length > 0, where);
    // Brackets outside string literals must balance; a cheap guard against a builder typo.
    const code = expression.replace(/"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'/g, '""');
    const depth = { '(': 0, '[': 0, '{': 0 };
    for (const ch of code) {
      if (ch === '(' || ch === '[' || ch === '{') depth[ch]++;
      if (ch === ')') depth['(']--;
      if (ch === ']') depth['[']--;
      if (ch === '}') depth['{']--;
      assert.ok(
        Object.values(depth).every((d) => d >= 0),
        `${where}: unbalanced ${expression}`,
      );
    }
    assert.deepEqual(depth, { '(': 0, '[': 0, '{': 0 }, `${where}: unbalanced ${expression}`);
  }
});

test('the binding denies', () => {
  assert.deepEqual(
    validatingAdmissionPolicyBinding({ name: 'nodeflavor-nodes', policyName: 'nodeflavor-nodes' }),
    {
      apiVersion: 'admissionregistration.k8s.io/v1',
      kind: 'ValidatingAdmissionPolicyBinding',
      metadata: {
        name: 'nodeflavor-nodes',
        labels: { 'app.kubernetes.io/name': 'nodeflavor', 'app.kubernetes.io/component': 'admission' },
      },
      spec: { policyName: 'nodeflavor-nodes', validationActions: ['Deny'] },
    },
  );
});
