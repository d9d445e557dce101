import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { parseConfig } from '../../src/config.ts';
import { protectedKeysFromFlavorClasses } from '../../src/flavor/admission.ts';
import { driftedFields } from '../../src/kube/admission-registration.ts';
import {
  desiredRegistration,
  INJECT_CA_ANNOTATION,
  type RegistrationObject,
  webhookUrl,
} from '../../src/webhook/desired-registration.ts';
import { listenAddress } from '../../src/webhook/index.ts';
import type { ValidatingWebhookConfiguration } from '../../src/webhook/registration.ts';

const keys = protectedKeysFromFlavorClasses([{ labels: { 'example.com/tier': 'gold' } }]);
const CA = '-----BEGIN CERTIFICATE-----\nQ0E=\n-----END CERTIFICATE-----\n';

const webhookOf = (objects: RegistrationObject[]) =>
  (
    objects.find(
      (o) => o.kind === 'ValidatingWebhookConfiguration',
    ) as unknown as ValidatingWebhookConfiguration
  ).webhooks[0]!;

describe('desiredRegistration', () => {
  test('mode webhook: the webhook configuration; the policy and binding are to be removed', () => {
    const desired = desiredRegistration(parseConfig({ admissionMode: 'webhook' }), keys, CA);
    assert.deepEqual(
      desired.apply.map((o) => o.kind),
      ['ValidatingWebhookConfiguration'],
    );
    assert.deepEqual(desired.remove, [
      { kind: 'ValidatingAdmissionPolicy', name: 'nodeflavor' },
      { kind: 'ValidatingAdmissionPolicyBinding', name: 'nodeflavor' },
    ]);
    const webhook = webhookOf(desired.apply);
    assert.deepEqual(webhook.clientConfig.service, {
      namespace: 'nodeflavor',
      name: 'nodeflavor-webhook',
      port: 443,
      path: '/validate-nodes',
    });
    assert.equal(Buffer.from(webhook.clientConfig.caBundle ?? '', 'base64').toString(), CA);
    // The controller identity the matchCondition skips comes from namespace and ServiceAccount.
    assert.match(JSON.stringify(webhook.matchConditions), /system:serviceaccount:nodeflavor:nodeflavor/);
  });

  test('mode policy: the policy and its binding; the webhook configuration is to be removed', () => {
    const desired = desiredRegistration(
      parseConfig({ admissionMode: 'policy', webhookConfigName: 'g' }),
      keys,
      undefined,
    );
    assert.deepEqual(
      desired.apply.map((o) => [o.kind, o.metadata.name]),
      [
        ['ValidatingAdmissionPolicy', 'g'],
        ['ValidatingAdmissionPolicyBinding', 'g'],
      ],
    );
    assert.deepEqual(desired.remove, [{ kind: 'ValidatingWebhookConfiguration', name: 'g' }]);
  });

  test('mode both: all three, nothing removed', () => {
    const desired = desiredRegistration(parseConfig({ admissionMode: 'both' }), keys, CA);
    assert.equal(desired.apply.length, 3);
    assert.deepEqual(desired.remove, []);
  });

  test('cert-manager: no caBundle of ours, the inject-ca-from annotation instead', () => {
    const config = parseConfig({ tlsMode: 'cert-manager', namespace: 'nf', tlsSecret: 'hook-tls' });
    const desired = desiredRegistration(config, keys, CA);
    assert.equal(webhookOf(desired.apply).clientConfig.caBundle, undefined);
    assert.deepEqual(desired.apply[0]?.metadata.annotations, { [INJECT_CA_ANNOTATION]: 'nf/hook-tls' });
  });

  test('a webhook URL replaces the Service reference; a bare URL gets the path', () => {
    const desired = desiredRegistration(parseConfig({ webhookUrl: 'https://127.0.0.1:9443' }), keys, CA);
    const webhook = webhookOf(desired.apply);
    assert.equal(webhook.clientConfig.url, 'https://127.0.0.1:9443/validate-nodes');
    assert.equal(webhook.clientConfig.service, undefined);
    assert.equal(webhookUrl('https://h:1/custom'), 'https://h:1/custom');
  });
});

describe('driftedFields', () => {
  const desired = desiredRegistration(parseConfig({}), keys, CA).apply[0]!;
  const live = () =>
    structuredClone(desired) as unknown as {
      metadata: { name: string };
      webhooks: Record<string, unknown>[];
    };

  test('an object as we applied it (metadata aside) has no drift', () => {
    const same = { ...live(), metadata: { name: 'nodeflavor', resourceVersion: '9', managedFields: [] } };
    assert.deepEqual(driftedFields(desired, same), []);
  });

  test('an added matchCondition or a narrowed selector is drift', () => {
    const added = live();
    (added.webhooks[0]!.matchConditions as object[]).push({ name: 'off', expression: 'false' });
    assert.deepEqual(driftedFields(desired, added), ['webhooks']);
    const narrowed = live();
    narrowed.webhooks[0]!.objectSelector = { matchLabels: { skip: 'me' } };
    assert.deepEqual(driftedFields(desired, narrowed), ['webhooks']);
  });

  test('a caBundle is drift when it is ours, not when cert-manager injects it', () => {
    const tampered = live();
    (tampered.webhooks[0]!.clientConfig as { caBundle: string }).caBundle = 'eA==';
    assert.deepEqual(driftedFields(desired, tampered), ['webhooks']);
    const injectedDesired = desiredRegistration(parseConfig({ tlsMode: 'cert-manager' }), keys, undefined)
      .apply[0]!;
    const injected = structuredClone(injectedDesired) as unknown as typeof tampered;
    (injected.webhooks[0]!.clientConfig as { caBundle: string }).caBundle = 'eA==';
    assert.deepEqual(driftedFields(injectedDesired, injected), []);
  });
});

describe('listenAddress', () => {
  test('all interfaces, IPv4, IPv6', () => {
    assert.deepEqual(listenAddress(':9443'), { port: 9443 });
    assert.deepEqual(listenAddress('127.0.0.1:0'), { host: '127.0.0.1', port: 0 });
    assert.deepEqual(listenAddress('[::1]:9443'), { host: '::1', port: 9443 });
  });
});
