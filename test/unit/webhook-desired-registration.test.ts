import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { describe, test } from 'node:test';
import { parseConfig } from '../../src/config.ts';
import { protectedKeysFromFlavorClasses } from '../../src/flavor/admission.ts';
import { driftedFields } from '../../src/webhook/admission-registration.ts';
import {
  desiredRegistration,
  INJECT_CA_ANNOTATION,
  liveRevision,
  mayWriteRegistration,
  REGISTRATION_REVISION,
  REGISTRATION_REVISION_ANNOTATION,
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
  test('mode webhook: both webhook configurations, the class-keys and flavored-tokens policies; the node policies are to be removed', () => {
    const desired = desiredRegistration(parseConfig({ admissionMode: 'webhook' }), keys, CA);
    assert.deepEqual(
      desired.apply.map((o) => [o.kind, o.metadata.name]),
      [
        ['ValidatingWebhookConfiguration', 'nodeflavor'],
        ['MutatingWebhookConfiguration', 'nodeflavor'],
        ['ValidatingAdmissionPolicy', 'nodeflavor-class-keys'],
        ['ValidatingAdmissionPolicyBinding', 'nodeflavor-class-keys'],
        ['ValidatingAdmissionPolicy', 'nodeflavor-flavored-tokens'],
        ['ValidatingAdmissionPolicyBinding', 'nodeflavor-flavored-tokens'],
      ],
    );
    assert.deepEqual(desired.remove, [
      { kind: 'ValidatingAdmissionPolicy', name: 'nodeflavor' },
      { kind: 'ValidatingAdmissionPolicyBinding', name: 'nodeflavor' },
      { kind: 'MutatingAdmissionPolicy', name: 'nodeflavor' },
      { kind: 'MutatingAdmissionPolicyBinding', name: 'nodeflavor' },
    ]);
    const mutating = desired.apply.find((o) => o.kind === 'MutatingWebhookConfiguration') as unknown as {
      webhooks: { clientConfig: { service: { path: string } }; failurePolicy: string; rules: unknown[] }[];
    };
    assert.equal(mutating.webhooks[0]?.clientConfig.service.path, '/mutate-nodes');
    assert.equal(mutating.webhooks[0]?.failurePolicy, 'Fail');
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
        ['MutatingAdmissionPolicy', 'g'],
        ['MutatingAdmissionPolicyBinding', 'g'],
        ['ValidatingAdmissionPolicy', 'g-class-keys'],
        ['ValidatingAdmissionPolicyBinding', 'g-class-keys'],
        ['ValidatingAdmissionPolicy', 'g-flavored-tokens'],
        ['ValidatingAdmissionPolicyBinding', 'g-flavored-tokens'],
      ],
    );
    assert.deepEqual(desired.remove, [
      { kind: 'ValidatingWebhookConfiguration', name: 'g' },
      { kind: 'MutatingWebhookConfiguration', name: 'g' },
    ]);
  });

  test('mode both: all ten, nothing removed', () => {
    const desired = desiredRegistration(parseConfig({ admissionMode: 'both' }), keys, CA);
    assert.equal(desired.apply.length, 10);
    assert.deepEqual(desired.remove, []);
  });

  test('cert-manager: no caBundle of ours, the inject-ca-from annotation instead', () => {
    const config = parseConfig({ tlsMode: 'cert-manager', namespace: 'nf', tlsSecret: 'hook-tls' });
    const desired = desiredRegistration(config, keys, CA);
    assert.equal(webhookOf(desired.apply).clientConfig.caBundle, undefined);
    for (const webhooks of desired.apply.slice(0, 2))
      assert.deepEqual(webhooks.metadata.annotations, {
        [INJECT_CA_ANNOTATION]: 'nf/hook-tls',
        [REGISTRATION_REVISION_ANNOTATION]: String(REGISTRATION_REVISION),
      });
  });

  test('a webhook URL replaces the Service reference; a bare URL gets the path', () => {
    const desired = desiredRegistration(parseConfig({ webhookUrl: 'https://127.0.0.1:9443' }), keys, CA);
    const webhook = webhookOf(desired.apply);
    assert.equal(webhook.clientConfig.url, 'https://127.0.0.1:9443/validate-nodes');
    assert.equal(webhook.clientConfig.service, undefined);
    assert.equal(webhookUrl('https://h:1/custom'), 'https://h:1/custom');
    assert.equal(
      webhookUrl('https://127.0.0.1:9443', '/mutate-nodes'),
      'https://127.0.0.1:9443/mutate-nodes',
    );
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

describe('registration revision: an older release never rolls back a newer one', () => {
  const at = (revision?: string): { metadata: { annotations: Record<string, string> } } => ({
    metadata: { annotations: revision === undefined ? {} : { [REGISTRATION_REVISION_ANNOTATION]: revision } },
  });

  test('every applied object says which revision generated it', () => {
    const desired = desiredRegistration(parseConfig({ admissionMode: 'both' }), keys, CA, undefined, 7);
    for (const object of desired.apply)
      assert.equal(object.metadata.annotations?.[REGISTRATION_REVISION_ANNOTATION], '7');
  });

  const cases: Record<string, { live: ReturnType<typeof at> | undefined; ours: number; may: boolean }> = {
    'no object yet: ours to make': { live: undefined, ours: 1, may: true },
    'an object of a release before revisions': { live: at(), ours: 1, may: true },
    'the same revision: ours to keep true (drift repair)': { live: at('3'), ours: 3, may: true },
    'an older revision: ours to upgrade': { live: at('2'), ours: 3, may: true },
    'a newer revision: left alone': { live: at('4'), ours: 3, may: false },
    'a revision that is no number counts as none': { live: at('x9'), ours: 1, may: true },
  };
  for (const [name, c] of Object.entries(cases)) {
    test(name, () => assert.equal(mayWriteRegistration(c.live, c.ours), c.may));
  }

  test('liveRevision reads the annotation, 0 when absent or malformed', () => {
    assert.equal(liveRevision(at('12').metadata.annotations), 12);
    assert.equal(liveRevision(undefined), 0);
    assert.equal(liveRevision(at('-1').metadata.annotations), 0);
  });

  // What the rules generate is pinned to the revision: a change to desiredRegistration or
  // registration.ts fails here until REGISTRATION_REVISION is bumped (and this digest updated),
  // so that an older release cannot roll back the new rules during a rolling upgrade.
  test('the generated registration is the one pinned for this revision', () => {
    const config = parseConfig({
      admissionMode: 'both',
      namespace: 'nf',
      adminGroups: ['ops'],
      registrationOwner: 'nf-owner',
    });
    const owner = {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'ClusterRole',
      name: 'nf-owner',
      uid: 'u',
    };
    const digest = createHash('sha256')
      .update(JSON.stringify(desiredRegistration(config, keys, CA, owner)))
      .digest('hex');
    assert.deepEqual(
      { revision: REGISTRATION_REVISION, digest },
      { revision: 3, digest: PINNED_REVISION_3 },
      'the generated registration changed: bump REGISTRATION_REVISION and pin the new digest',
    );
  });
});

// Revision 2 (issue 25): the mutating registration (webhook or policy) and the FlavorClass-keys policy.
// Revision 3 (issue 32): the FlavoredToken policy (`use` on the class to create one; the attested
// annotation the operator's alone).
const PINNED_REVISION_3 = '62a6271a62f9c128ecd01d74e981e9e6e6663c6f35b52567be58d29441c339d9';

describe('listenAddress', () => {
  test('all interfaces, IPv4, IPv6', () => {
    assert.deepEqual(listenAddress(':9443'), { port: 9443 });
    assert.deepEqual(listenAddress('127.0.0.1:0'), { host: '127.0.0.1', port: 0 });
    assert.deepEqual(listenAddress('[::1]:9443'), { host: '::1', port: 9443 });
  });
});
