// The admission guard on the real control plane, once as the webhook and once as the
// ValidatingAdmissionPolicy: real kubelet identities (simulated kubelets that did the real TLS
// bootstrap), an ordinary user who may patch nodes, the controller's ServiceAccount and an admin
// group, every patch type, both nodes and nodes/status. The operator side runs in this process
// with the controller ServiceAccount's token and exactly the RBAC the chart grants, so missing
// permissions fail here too. Webhook mode also checks that heartbeats survive a dead webhook and
// that certificate renewals fail no request.
import assert from 'node:assert/strict';
import { randomInt } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { after, before, describe, it } from 'node:test';
import { isDeepStrictEqual } from 'node:util';
import { AdmissionregistrationV1Api, RbacAuthorizationV1Api, type V1Node } from '@kubernetes/client-node';
import { pino } from 'pino';
import { Registry } from 'prom-client';
import { type Config, parseConfig } from '../../src/config.ts';
import { JOINED_LABEL_KEY, QUARANTINE_TAINT_KEY, TOKEN_LABEL_KEY } from '../../src/flavor/admission.ts';
import { watchProtectedKeys } from '../../src/kube/protected-keys-source.ts';
import { kubeJson } from '../../src/runtime/fetch.ts';
import { KubeError } from '../../src/runtime/kube-error.ts';
import { removeAdmissionRegistration } from '../../src/webhook/admission-registration.ts';
import { type RunningAdmission, startAdmission } from '../../src/webhook/index.ts';
import type { HttpResult, KubeHttp } from './kubelet-sim/http.ts';
import { parseJoinConfiguration } from './kubelet-sim/join-config.ts';
import { SimulatedKubelet } from './kubelet-sim/kubelet.ts';
import {
  deleteObjects,
  freePort,
  type Identity,
  messageOf,
  NODE_EDITOR_RULES,
  operatorClusterRules,
  operatorNamespaceRules,
  servedSerial,
  serviceAccountIdentity,
} from './support/admission.ts';
import { createBootstrapToken, joinConfiguration, tokenKubeConfig } from './support/bootstrap.ts';
import type { E2EEnvironment } from './support/environment.ts';
import { firstVersionOf } from './support/first-version.ts';
import { applyFlavorClass, deleteFlavorClass } from './support/nodeflavor.ts';
import { FLAVOR_LABEL, operatorFixture } from './support/operator-fixture.ts';
import { uniqueName, waitFor } from './support/wait.ts';

const TIER_LABEL = 'example.com/tier';
const TRUST_ANNOTATION = 'example.com/trust-note';
const DEDICATED_TAINT = 'example.com/dedicated';
const BASE32 = 'abcdefghijklmnopqrstuvwxyz234567';
/** A flavor token as a node presents it: its value is secret and must never reach a log line. */
const FLAVOR_TOKEN = Array.from({ length: 52 }, () => BASE32[randomInt(32)]).join('');
const QUARANTINE = { key: QUARANTINE_TAINT_KEY, effect: 'NoSchedule' };
const MERGE = 'application/merge-patch+json';
const JSON_PATCH = 'application/json-patch+json';
const STRATEGIC = 'application/strategic-merge-patch+json';
const APPLY = 'application/apply-patch+yaml';

const run = uniqueName('adm');
const MODES = ['webhook', 'policy'] as const;
const registrationName = (mode: string) => `nodeflavor-${run}-${mode}`;
/** Stands for the chart's ClusterRole, which owns the registration (deleted by helm uninstall). */
const ownerName = (mode: string) => `${registrationName(mode)}-owner`;
const flavorClass = `sweet-${run}`;
const created: object[] = [];
const logLines: string[] = [];

const fx = operatorFixture({
  logPrefix: 'nodeflavor-admission-',
  flavorClasses: {
    [flavorClass]: {
      labels: { [FLAVOR_LABEL]: 'sweet', [TIER_LABEL]: 'gold' },
      annotations: { [TRUST_ANNOTATION]: 'vetted' },
      taints: [{ key: DEDICATED_TAINT, value: 'sweet', effect: 'NoSchedule' }],
    },
  },
  // The guard runs in this process, as the ServiceAccount below with exactly the chart's RBAC.
  operatorIdentity: false,
});
const { kubelets } = fx;
let env: E2EEnvironment;
let operator: Identity;
let admin: Identity;
let user: Identity;
/** May create (and patch) FlavoredTokens, and no more: no `use` on any FlavorClass, no Secrets. */
let creator: Identity;
/** May create and patch FlavoredTokens and `use` the file's FlavorClass. */
let classUser: Identity;
let keys: ReturnType<typeof watchProtectedKeys>;

before(async () => {
  await fx.ready(); // a top-level before() does not wait for the fixture's
  env = fx.env;
  operator = await serviceAccountIdentity(
    env,
    {
      namespace: `${run}-operator`,
      name: 'nodeflavor',
      clusterRules: [
        ...operatorClusterRules(MODES.map(registrationName), MODES.map(ownerName)),
        // The chart's: the issuer creates FlavoredTokens and records attestations on them.
        { apiGroups: ['nodeflavor.io'], resources: ['flavoredtokens'], verbs: ['create', 'patch', 'delete'] },
      ],
      namespaceRules: operatorNamespaceRules(MODES.map((mode) => `${registrationName(mode)}-tls`)),
    },
    created,
  );
  admin = await serviceAccountIdentity(
    env,
    { namespace: `${run}-admins`, name: 'admin', clusterRules: NODE_EDITOR_RULES },
    created,
  );
  user = await serviceAccountIdentity(
    env,
    { namespace: `${run}-users`, name: 'editor', clusterRules: NODE_EDITOR_RULES },
    created,
  );
  const TOKEN_WRITER = {
    apiGroups: ['nodeflavor.io'],
    resources: ['flavoredtokens'],
    verbs: ['create', 'patch'],
  };
  creator = await serviceAccountIdentity(
    env,
    { namespace: `${run}-creators`, name: 'creator', clusterRules: [TOKEN_WRITER] },
    created,
  );
  classUser = await serviceAccountIdentity(
    env,
    {
      namespace: `${run}-class-users`,
      name: 'portal',
      clusterRules: [
        TOKEN_WRITER,
        {
          apiGroups: ['nodeflavor.io'],
          resources: ['flavorclasses'],
          resourceNames: [flavorClass],
          verbs: ['use'],
        },
      ],
    },
    created,
  );
  keys = watchProtectedKeys(tokenKubeConfig(env, operator.token));
  await keys.ready;
  await waitFor(() => keys.protectedKeys().labels.has(TIER_LABEL), { what: 'the FlavorClass keys' });
});

// After the fixture has stopped the kubelets and deleted their Nodes.
after(async () => {
  keys?.stop();
  await deleteFlavorClass(env, flavorClass);
  await deleteObjects(env, created);
  for (const identity of [operator, admin, user, creator, classUser]) identity?.http.close();
  if (process.env.E2E_ADMISSION_LOG) writeFileSync(process.env.E2E_ADMISSION_LOG, logLines.join(''));
  // Label values are secret: no log line of the operator may carry the token label's value.
  assert.ok(logLines.length > 0, 'the operator logged');
  assert.ok(!logLines.some((line) => line.includes(FLAVOR_TOKEN)), 'a log line carries the flavor token');
});

for (const mode of MODES) {
  describe(`admission guard as ${mode === 'webhook' ? 'a validating webhook' : 'a ValidatingAdmissionPolicy'}`, () => {
    const name = registrationName(mode);
    let config: Config;
    let admission: RunningAdmission;
    let port = 0;
    let registry: Registry;
    /** Joined with the token label and the quarantine taint: the ordinary, allowed registration. */
    let guarded: SimulatedKubelet;

    /** Our guard's refusal (not NodeRestriction's, not RBAC's), naming `key`. */
    const assertRefused = (result: HttpResult, key: string, what: string) => {
      const message = messageOf(result);
      assert.equal(result.status, 403, `${what}: expected 403, got ${result.status}: ${message}`);
      assert.match(
        message,
        mode === 'webhook'
          ? /admission webhook "nodes\.nodeflavor\.io" denied the request/
          : /ValidatingAdmissionPolicy/,
        `${what}: refused by someone else: ${message}`,
      );
      assert.ok(message.includes(`"${key}"`), `${what}: the message does not name ${key}: ${message}`);
    };
    const assertAllowed = (result: HttpResult, what: string) =>
      assert.ok(
        result.status >= 200 && result.status < 300,
        `${what}: HTTP ${result.status}: ${messageOf(result)}`,
      );

    const start = (overrides: { servingCertificateLifetimeMs?: number } = {}) => {
      admission = startAdmission({
        kubeConfig: tokenKubeConfig(env, operator.token),
        config,
        registry,
        logger: pino({ level: 'debug' }, { write: (line: string) => void logLines.push(line) }),
        protectedKeys: keys,
        ...overrides,
      });
      return admission.ready;
    };

    /** Waits until the API server enforces the guard (its informers lag our writes a little). */
    const waitUntilEnforced = async (node: string) => {
      await waitFor(
        async () => {
          const probe = await user.http.request(
            'PATCH',
            `/api/v1/nodes/${node}?dryRun=All`,
            { metadata: { labels: { [FLAVOR_LABEL]: 'probe' } } },
            MERGE,
          );
          return probe.status === 403 && messageOf(probe).includes(FLAVOR_LABEL);
        },
        { what: `the ${mode} to be enforced`, timeoutMs: 30_000 },
      );
    };

    const join = async (
      prefix: string,
      labels: Record<string, string>,
      taints: (typeof QUARANTINE)[] = [],
      nodeName = uniqueName(prefix),
      beforeRegister?: (kubelet: SimulatedKubelet) => Promise<void>,
    ) => {
      const token = await createBootstrapToken(env);
      const kubelet: SimulatedKubelet = new SimulatedKubelet(
        nodeName,
        parseJoinConfiguration(joinConfiguration(env, token.token, { nodeLabels: labels, taints })),
        { timeoutMs: 30_000, ...(beforeRegister ? { beforeRegister: () => beforeRegister(kubelet) } : {}) },
      );
      kubelets.push(kubelet);
      await kubelet.join();
      return kubelet;
    };

    const patchNode = (client: KubeHttp, node: string, body: unknown, type: string, subresource = '') => {
      const query = type === APPLY ? '?fieldManager=e2e&force=true' : '';
      return client.request('PATCH', `/api/v1/nodes/${node}${subresource}${query}`, body, type);
    };

    /** As the controller would: server-side apply with its field manager. */
    const applyAsController = (node: string, metadata: object, spec?: object) =>
      operator.http.request(
        'PATCH',
        `/api/v1/nodes/${node}?fieldManager=nodeflavor&force=true`,
        { apiVersion: 'v1', kind: 'Node', metadata: { name: node, ...metadata }, ...(spec ? { spec } : {}) },
        APPLY,
      );

    before(async () => {
      port = await freePort();
      registry = new Registry();
      await env.kubeConfig.makeApiClient(RbacAuthorizationV1Api).createClusterRole({
        body: { metadata: { name: ownerName(mode) }, rules: [] },
      });
      config = parseConfig({
        namespace: operator.namespace,
        serviceAccount: operator.name,
        admissionMode: mode,
        webhookAddress: `127.0.0.1:${port}`,
        webhookUrl: `https://127.0.0.1:${port}/validate-nodes`,
        webhookConfigName: name,
        tlsSecret: `${name}-tls`,
        adminGroups: [`system:serviceaccounts:${admin.namespace}`],
        resync: '30s',
        registrationOwner: ownerName(mode),
      });
      await start();
      guarded = await join('guarded', { [TOKEN_LABEL_KEY]: FLAVOR_TOKEN }, [QUARANTINE]);
      await waitUntilEnforced(guarded.nodeName);
    });

    after(async () => {
      await admission?.stop();
      await removeAdmissionRegistration(env.kubeConfig, name);
      await env.kubeConfig
        .makeApiClient(RbacAuthorizationV1Api)
        .deleteClusterRole({ name: ownerName(mode) })
        .catch(() => undefined);
      await env.core
        .deleteNamespacedSecret({ name: `${name}-tls`, namespace: operator.namespace })
        .catch(() => undefined);
    });

    // Issue 32: a FlavoredToken bound to a TPM is worth a flavor by itself (the issuer attests it),
    // so `use` on its FlavorClass governs creating one, the direct API included.
    it("a FlavoredToken is created only by whom may use its FlavorClass (the operator exempt); the attested annotation is the operator's", async () => {
      const TOKENS = '/apis/nodeflavor.io/v1alpha1/flavoredtokens';
      const ATTESTED = 'nodeflavor.io/attested';
      const proof = JSON.stringify({ count: 7, at: new Date().toISOString() });
      const record = (tokenName: string, annotations: Record<string, string> = {}) => ({
        apiVersion: 'nodeflavor.io/v1alpha1',
        kind: 'FlavoredToken',
        metadata: { name: tokenName, annotations },
        spec: {
          flavorClassName: flavorClass,
          ttl: '1h',
          attestation: {
            ekPublicKey:
              '-----BEGIN PUBLIC KEY-----\nMIIBIjANBgkqhkiG9w0BAQEFAAOCAQ8AMIIBCgKCAQEA\n-----END PUBLIC KEY-----\n',
            ekCertificateIssuer: 'CN=Example TPM EK CA',
          },
        },
      });
      const policyRefusal = (result: HttpResult, what: string, says: RegExp) => {
        assert.equal(result.status, 403, `${what}: HTTP ${result.status}: ${messageOf(result)}`);
        assert.match(messageOf(result), /ValidatingAdmissionPolicy/, what);
        assert.match(messageOf(result), says, what);
      };
      const names = Array.from({ length: 4 }, () => uniqueName('ft-adm'));
      try {
        // The API server enforces the policy once its informer has it.
        await waitFor(
          async () => {
            const probe = await creator.http.request(
              'POST',
              `${TOKENS}?dryRun=All`,
              record(uniqueName('ft-probe')),
            );
            return probe.status === 403 && messageOf(probe).includes('ValidatingAdmissionPolicy');
          },
          { what: 'the FlavoredToken policy to be enforced', timeoutMs: 30_000 },
        );
        policyRefusal(
          await creator.http.request('POST', TOKENS, record(names[0] as string)),
          'create without use',
          new RegExp(`user "${creator.username}" may not use FlavorClass "${flavorClass}"`),
        );
        const allowed = await classUser.http.request('POST', TOKENS, record(names[1] as string));
        assert.equal(allowed.status, 201, `create with use: ${messageOf(allowed)}`);
        // The issuer's record of TPM proofs: nobody else sets or changes it, use or not.
        policyRefusal(
          await classUser.http.request('POST', TOKENS, record(names[2] as string, { [ATTESTED]: proof })),
          'create with the attested annotation',
          /may not set or change the nodeflavor\.io\/attested annotation/,
        );
        policyRefusal(
          await classUser.http.request(
            'PATCH',
            `${TOKENS}/${names[1]}`,
            { metadata: { annotations: { [ATTESTED]: proof } } },
            MERGE,
          ),
          'patch in the attested annotation',
          /may not set or change the nodeflavor\.io\/attested annotation/,
        );
        // The operator acts for callers it checked: no `use` of its own, and it records proofs.
        const byOperator = await operator.http.request(
          'POST',
          TOKENS,
          record(names[3] as string, { [ATTESTED]: proof }),
        );
        assert.equal(byOperator.status, 201, `the operator: ${messageOf(byOperator)}`);
      } finally {
        for (const tokenName of names)
          await kubeJson(env.kubeConfig, 'DELETE', `${TOKENS}/${tokenName}`).catch(() => undefined);
      }
    });

    it('allows a kubelet to register with only the token label and the quarantine taint', async () => {
      const node = await env.core.readNode({ name: guarded.nodeName });
      assert.equal(node.metadata?.labels?.[TOKEN_LABEL_KEY], FLAVOR_TOKEN);
      assert.ok(node.spec?.taints?.some((t) => t.key === QUARANTINE_TAINT_KEY));
    });

    it('refuses a kubelet registering with a trusted flavor label', async () => {
      await assert.rejects(join('rogue', { [TIER_LABEL]: 'gold' }), (error: Error) => {
        assert.match(error.message, /HTTP 403/);
        assert.ok(error.message.includes(`"${TIER_LABEL}"`), error.message);
        return true;
      });
    });

    for (const subresource of ['', '/status']) {
      const where = subresource === '' ? 'nodes' : 'nodes/status';
      it(`refuses a kubelet adding a trusted label through ${where}, by every patch type`, async () => {
        const node = guarded.nodeName;
        const client = guarded.client();
        const label = { metadata: { labels: { [FLAVOR_LABEL]: 'sweet' } } };
        const variants: [string, unknown, string][] = [
          ['merge patch', label, MERGE],
          [
            'JSON patch',
            [{ op: 'add', path: '/metadata/labels/nodeflavor.io~1flavor', value: 'sweet' }],
            JSON_PATCH,
          ],
          ['strategic merge patch', label, STRATEGIC],
          [
            'server-side apply',
            { apiVersion: 'v1', kind: 'Node', metadata: { name: node, ...label.metadata } },
            APPLY,
          ],
        ];
        for (const [what, body, type] of variants) {
          assertRefused(
            await patchNode(client, node, body, type, subresource),
            FLAVOR_LABEL,
            `${what} on ${where}`,
          );
        }
        const unchanged = await env.core.readNode({ name: node });
        assert.equal(unchanged.metadata?.labels?.[FLAVOR_LABEL], undefined);
      });
    }

    it('refuses a kubelet changing or removing a trusted label the controller set', async () => {
      const kubelet = await join('flavored', { [TOKEN_LABEL_KEY]: FLAVOR_TOKEN }, [QUARANTINE]);
      assertAllowed(
        await applyAsController(kubelet.nodeName, { labels: { [TIER_LABEL]: 'gold' } }),
        'controller apply',
      );
      const client = kubelet.client();
      const change = { metadata: { labels: { [TIER_LABEL]: 'platinum' } } };
      const remove = { metadata: { labels: { [TIER_LABEL]: null } } };
      assertRefused(await patchNode(client, kubelet.nodeName, change, MERGE), TIER_LABEL, 'change');
      assertRefused(await patchNode(client, kubelet.nodeName, remove, MERGE), TIER_LABEL, 'removal');
      assertRefused(
        await patchNode(client, kubelet.nodeName, remove, MERGE, '/status'),
        TIER_LABEL,
        'removal via status',
      );
      const node = await env.core.readNode({ name: kubelet.nodeName });
      assert.equal(node.metadata?.labels?.[TIER_LABEL], 'gold');
    });

    it('refuses a kubelet removing the quarantine taint (NodeRestriction refuses first; our guard backs it)', async () => {
      const result = await patchNode(guarded.client(), guarded.nodeName, { spec: { taints: [] } }, MERGE);
      // A kubelet may not change taints at all after CREATE: NodeRestriction (a mutating-phase plugin)
      // refuses before any validating webhook or policy runs, so the message is NodeRestriction's.
      assert.equal(result.status, 403, messageOf(result));
      assert.match(messageOf(result), /not allowed to modify taints/);
      // The same removal by an ordinary user does reach our guard, which names the taint.
      assertRefused(
        await patchNode(user.http, guarded.nodeName, { spec: { taints: [] } }, MERGE),
        QUARANTINE_TAINT_KEY,
        'user removes the quarantine taint',
      );
      const node = await env.core.readNode({ name: guarded.nodeName });
      assert.ok(node.spec?.taints?.some((t) => t.key === QUARANTINE_TAINT_KEY));
    });

    it('refuses a kubelet adding a trusted annotation', async () => {
      const body = { metadata: { annotations: { [TRUST_ANNOTATION]: 'vetted' } } };
      assertRefused(
        await patchNode(guarded.client(), guarded.nodeName, body, MERGE),
        TRUST_ANNOTATION,
        'annotation',
      );
      assertRefused(
        await patchNode(guarded.client(), guarded.nodeName, body, MERGE, '/status'),
        TRUST_ANNOTATION,
        'annotation via status',
      );
    });

    it('refuses a kubelet setting or changing the token label on update', async () => {
      const plain = await join('plain', {});
      const set = { metadata: { labels: { [TOKEN_LABEL_KEY]: FLAVOR_TOKEN } } };
      assertRefused(
        await patchNode(plain.client(), plain.nodeName, set, MERGE),
        TOKEN_LABEL_KEY,
        'set on update',
      );
      const other = { metadata: { labels: { [TOKEN_LABEL_KEY]: 'a'.repeat(52) } } };
      assertRefused(
        await patchNode(guarded.client(), guarded.nodeName, other, MERGE),
        TOKEN_LABEL_KEY,
        'change',
      );
    });

    /** A claim on `name`, as the controller leaves one (released: the name was used through nodeflavor). */
    const claimName = (name: string) =>
      kubeJson(env.kubeConfig, 'POST', '/apis/nodeflavor.io/v1alpha1/nodenameclaims', {
        body: {
          apiVersion: 'nodeflavor.io/v1alpha1',
          kind: 'NodeNameClaim',
          metadata: { name },
          spec: { releasedAt: new Date().toISOString().replace(/\.\d{3}Z$/, 'Z') },
        },
      });

    const registrations: [string, Record<string, string>, (typeof QUARANTINE)[]][] = [
      ['both the quarantine taint and the token label dropped', {}, []],
      ['the token label dropped', {}, [QUARANTINE]],
      ['the quarantine taint dropped', { [TOKEN_LABEL_KEY]: FLAVOR_TOKEN }, []],
    ];
    for (const [what, labels, taints] of registrations) {
      it(`quarantines a Node registered under a claimed name with ${what}, from its first version`, async () => {
        const name = uniqueName('claimed');
        await claimName(name);
        const first = await firstVersionOf(env, name);
        // In a real join the claim precedes the registration by a CSR's approval and signing; here
        // by a few milliseconds. Policy mode's parameters come from the API server's own informer,
        // so the registration waits until a dry run of it (as this kubelet) is quarantined.
        const claimSeen = async (kubelet: SimulatedKubelet) => {
          await waitFor(
            async () => {
              const dryRun = await kubelet.client().request('POST', '/api/v1/nodes?dryRun=All', {
                apiVersion: 'v1',
                kind: 'Node',
                metadata: { name, labels },
                spec: { taints },
              });
              const node = dryRun.body as V1Node | undefined;
              return (node?.spec?.taints ?? []).some((t) => t.key === QUARANTINE_TAINT_KEY);
            },
            { what: 'admission to see the claim', timeoutMs: 15_000, intervalMs: 50 },
          );
        };
        await join('claimed', labels, taints, name, claimSeen);
        const node = await first();
        assert.ok(
          (node.spec?.taints ?? []).some((t) => t.key === QUARANTINE_TAINT_KEY && t.effect === 'NoSchedule'),
          `the first version carries the quarantine: ${JSON.stringify(node.spec?.taints)}`,
        );
        assert.equal(node.metadata?.labels?.[JOINED_LABEL_KEY], 'true', 'and the joined mark');
        await kubeJson(env.kubeConfig, 'DELETE', `/apis/nodeflavor.io/v1alpha1/nodenameclaims/${name}`);
      });
    }

    it('leaves a Node registered under a name nobody claimed, without a token label, as its kubelet sent it', async () => {
      const name = uniqueName('plain');
      const first = await firstVersionOf(env, name);
      await join('plain', { 'example.com/rack': 'r1' }, [], name);
      const node = await first();
      assert.ok(!(node.spec?.taints ?? []).some((t) => t.key === QUARANTINE_TAINT_KEY));
      assert.equal(node.metadata?.labels?.[JOINED_LABEL_KEY], undefined);
      assert.equal(node.metadata?.labels?.['example.com/rack'], 'r1');
    });

    it('guards the keys of a FlavorClass created while no operator runs (nothing can re-apply the registration)', async () => {
      await admission.stop();
      const fresh = uniqueName('fresh');
      const key = `example.com/${fresh}`;
      try {
        await applyFlavorClass(env, fresh, { labels: { [key]: 'a7' } });
        // By the API server alone, as soon as its own FlavorClass informer (the policy's parameters)
        // has the class: a dry run shows when, then a kubelet and an ordinary user adding the key.
        const created = Date.now();
        await waitFor(
          async () =>
            (
              await patchNode(
                guarded.client(),
                guarded.nodeName,
                { metadata: { labels: { [key]: 'a7' } } },
                MERGE,
                '?dryRun=All',
              )
            ).status === 403,
          { what: "the policy to have the new class's keys", timeoutMs: 15_000, intervalMs: 20 },
        );
        process.stdout.write(
          `ℹ the class-keys policy refused the new key ${Date.now() - created} ms after the class was created\n`,
        );
        for (const [who, client] of [
          ['kubelet', guarded.client()],
          ['user', user.http],
        ] as const) {
          const refused = await patchNode(
            client,
            guarded.nodeName,
            { metadata: { labels: { [key]: 'a7' } } },
            MERGE,
          );
          assert.equal(refused.status, 403, `${who}: HTTP ${refused.status} ${messageOf(refused)}`);
          assert.ok(messageOf(refused).includes(`"${key}"`), messageOf(refused));
          assert.match(messageOf(refused), /of FlavorClass /);
        }
        const node = await env.core.readNode({ name: guarded.nodeName });
        assert.equal(node.metadata?.labels?.[key], undefined);
      } finally {
        await deleteFlavorClass(env, fresh);
        await start();
        await waitUntilEnforced(guarded.nodeName);
      }
    });

    it('refuses an ordinary user who may otherwise patch nodes', async () => {
      const node = guarded.nodeName;
      assertAllowed(
        await patchNode(user.http, node, { metadata: { labels: { 'example.com/rack': 'r1' } } }, MERGE),
        'an unprotected label',
      );
      const flavor = { metadata: { labels: { [FLAVOR_LABEL]: 'sweet' } } };
      assertRefused(
        await patchNode(user.http, node, flavor, MERGE),
        FLAVOR_LABEL,
        'user adds a flavor label',
      );
      assertRefused(
        await patchNode(user.http, node, flavor, MERGE, '/status'),
        FLAVOR_LABEL,
        'user via status',
      );
      const taint = {
        spec: { taints: [QUARANTINE, { key: DEDICATED_TAINT, value: 'sweet', effect: 'NoSchedule' }] },
      };
      assertRefused(
        await patchNode(user.http, node, taint, MERGE),
        DEDICATED_TAINT,
        'user adds a flavor taint',
      );
    });

    it("allows the controller's ServiceAccount to apply a flavor and lift the quarantine", async () => {
      const kubelet = await join('verified', { [TOKEN_LABEL_KEY]: FLAVOR_TOKEN }, [QUARANTINE]);
      const result = await applyAsController(
        kubelet.nodeName,
        {
          labels: { [FLAVOR_LABEL]: 'sweet', [TIER_LABEL]: 'gold' },
          annotations: { [TRUST_ANNOTATION]: 'vetted' },
        },
        { taints: [{ key: DEDICATED_TAINT, value: 'sweet', effect: 'NoSchedule' }] },
      );
      assertAllowed(result, 'controller apply');
      // ...and removes the token label, as the controller does once the node is verified.
      assertAllowed(
        await patchNode(
          operator.http,
          kubelet.nodeName,
          { metadata: { labels: { [TOKEN_LABEL_KEY]: null } } },
          MERGE,
        ),
        'controller removes the token label',
      );
      const node = await env.core.readNode({ name: kubelet.nodeName });
      assert.equal(node.metadata?.labels?.[FLAVOR_LABEL], 'sweet');
      assert.equal(node.metadata?.labels?.[TOKEN_LABEL_KEY], undefined);
      assert.deepEqual(
        node.spec?.taints?.map((t) => t.key),
        [DEDICATED_TAINT],
      );
    });

    it('allows a member of an admin group', async () => {
      const change = { metadata: { labels: { [TIER_LABEL]: 'silver', [FLAVOR_LABEL]: 'sweet' } } };
      assertAllowed(await patchNode(admin.http, guarded.nodeName, change, MERGE), 'admin sets labels');
      assertAllowed(
        await patchNode(
          admin.http,
          guarded.nodeName,
          { metadata: { labels: { [TIER_LABEL]: null, [FLAVOR_LABEL]: null } } },
          MERGE,
        ),
        'admin removes labels',
      );
    });

    it('allows kubelet status reports and Lease renewals', async () => {
      await guarded.reportStatus();
      await guarded.renewLease();
      await guarded.renewLease();
      const node = await env.core.readNode({ name: guarded.nodeName });
      assert.ok(node.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True'));
    });

    it('restores a registration someone tampered with', async () => {
      const api = '/apis/admissionregistration.k8s.io/v1';
      const off = { name: 'tampered', expression: 'false' };
      const edits: [string, object[]][] =
        mode === 'webhook'
          ? [
              [
                `${api}/validatingwebhookconfigurations/${name}`,
                [
                  { op: 'add', path: '/webhooks/0/matchConditions/-', value: off },
                  {
                    op: 'replace',
                    path: '/webhooks/0/objectSelector',
                    value: { matchLabels: { skip: 'me' } },
                  },
                  {
                    op: 'replace',
                    path: '/webhooks/0/clientConfig/caBundle',
                    value: Buffer.from('x').toString('base64'),
                  },
                ],
              ],
            ]
          : [
              [
                `${api}/validatingadmissionpolicies/${name}`,
                [{ op: 'add', path: '/spec/matchConditions/-', value: off }],
              ],
              [
                `${api}/validatingadmissionpolicybindings/${name}`,
                [{ op: 'replace', path: '/spec/validationActions', value: ['Audit'] }],
              ],
            ];
      const before = await Promise.all(edits.map(([path]) => kubeJson<object>(env.kubeConfig, 'GET', path)));
      for (const [path, patch] of edits) {
        await kubeJson(env.kubeConfig, 'PATCH', path, { body: patch, contentType: JSON_PATCH });
      }
      await waitFor(
        async () => {
          const now = await Promise.all(edits.map(([path]) => kubeJson<object>(env.kubeConfig, 'GET', path)));
          return now.every((live, i) => isDeepStrictEqual(guardFields(live), guardFields(before[i] ?? {})));
        },
        { what: `the ${mode} registration to be restored`, timeoutMs: 15_000 },
      );
      await waitUntilEnforced(guarded.nodeName);
    });

    /** Last in each mode: it deletes the registration, as helm uninstall does. */
    const uninstallTest = () =>
      it('the registration is owned by the (chart) ClusterRole and goes when it goes, as on helm uninstall', async () => {
        const owner = await env.kubeConfig
          .makeApiClient(RbacAuthorizationV1Api)
          .readClusterRole({ name: ownerName(mode) });
        const kinds =
          mode === 'webhook'
            ? ['validatingwebhookconfigurations']
            : ['validatingadmissionpolicies', 'validatingadmissionpolicybindings'];
        const read = (kind: string) =>
          kubeJson<{ metadata: { ownerReferences?: { kind: string; name: string; uid: string }[] } }>(
            env.kubeConfig,
            'GET',
            `/apis/admissionregistration.k8s.io/v1/${kind}/${name}`,
          );
        for (const kind of kinds) {
          const refs = (await read(kind)).metadata.ownerReferences ?? [];
          assert.deepEqual(
            refs.map((r) => [r.kind, r.name, r.uid]),
            [['ClusterRole', ownerName(mode), owner.metadata?.uid]],
            `${kind} is owned by the ClusterRole`,
          );
        }
        // helm uninstall: the Deployment goes (the process stops), then the RBAC objects.
        await admission.stop();
        await env.kubeConfig
          .makeApiClient(RbacAuthorizationV1Api)
          .deleteClusterRole({ name: ownerName(mode) });
        await waitFor(
          async () => {
            for (const kind of kinds) {
              const gone = await read(kind).then(
                () => false,
                (error: unknown) => error instanceof KubeError && error.status === 404,
              );
              if (!gone) return false;
            }
            return true;
          },
          { what: `the garbage collector to delete the ${mode} registration`, timeoutMs: 30_000 },
        );
      });

    if (mode !== 'webhook') {
      uninstallTest();
      return;
    }

    it('with the webhook process stopped: heartbeats, the controller and admins pass; other protected changes are refused', async () => {
      await admission.stop();
      await guarded.reportStatus();
      await guarded.renewLease();
      assertAllowed(
        await patchNode(
          guarded.client(),
          guarded.nodeName,
          { metadata: { labels: { 'example.com/zone': 'a' } } },
          MERGE,
        ),
        'an unprotected kubelet label',
      );
      assertAllowed(
        await applyAsController(guarded.nodeName, { annotations: { [TRUST_ANNOTATION]: 'vetted' } }),
        'the controller does not depend on the webhook',
      );
      const result = await patchNode(
        guarded.client(),
        guarded.nodeName,
        { metadata: { labels: { [FLAVOR_LABEL]: 'sweet' } } },
        MERGE,
      );
      assert.ok(result.status >= 400, `a protected change passed a dead webhook: HTTP ${result.status}`);
      assert.match(messageOf(result), /failed calling webhook "nodes\.nodeflavor\.io"/);
      const ordinary = await patchNode(
        user.http,
        guarded.nodeName,
        { metadata: { labels: { [FLAVOR_LABEL]: 'sweet' } } },
        MERGE,
      );
      assert.ok(ordinary.status >= 400, `an ordinary user passed a dead webhook: HTTP ${ordinary.status}`);
      // An admin group's writes are allowed whatever they change, so they do not wait on the
      // webhook at all (matchConditions): an admin can repair a node while the webhook is down.
      assertAllowed(
        await patchNode(
          admin.http,
          guarded.nodeName,
          { metadata: { annotations: { [TRUST_ANNOTATION]: 'repaired' } } },
          MERGE,
        ),
        'an admin group member, with the webhook down',
      );
    });

    it('renews the serving certificate twice under a stream of reviews without one failed request', async (t) => {
      // Restarted with a 9 s lifetime: the 30-day certificate is replaced at once (same CA), then
      // every 6 s (two thirds of the lifetime), leaving 3 s in which the old one is still valid.
      const before = await readCaBundle(name);
      await start({ servingCertificateLifetimeMs: 9_000 });
      await waitUntilEnforced(guarded.nodeName);
      assert.equal(await readCaBundle(name), before, 'a renewal must keep the CA (and so the caBundle)');

      const caPem = Buffer.from(before, 'base64').toString('utf8');
      const serials = new Set<string>();
      const failures: string[] = [];
      let reviews = 0;
      let running = true;
      const kubeletStream = async () => {
        while (running) {
          const result = await patchNode(
            guarded.client(),
            guarded.nodeName,
            { metadata: { labels: { [FLAVOR_LABEL]: 'sweet' } } },
            MERGE,
          ).catch((error: Error) => ({ status: 0, body: undefined, text: error.message }));
          reviews += 1;
          const message = messageOf(result);
          if (result.status !== 403 || !message.includes('denied the request'))
            failures.push(`${result.status}: ${message}`);
        }
      };
      const adminStream = async () => {
        for (let i = 0; running; i++) {
          const body = { metadata: { labels: { [TIER_LABEL]: i % 2 === 0 ? 'gold' : 'silver' } } };
          const result = await patchNode(admin.http, guarded.nodeName, body, MERGE).catch((error: Error) => ({
            status: 0,
            body: undefined,
            text: error.message,
          }));
          reviews += 1;
          if (result.status !== 200) failures.push(`admin ${result.status}: ${messageOf(result)}`);
        }
      };
      // New handshakes, verified the way the API server verifies them (against the caBundle).
      const handshakes = async () => {
        while (running) {
          await servedSerial(port, caPem).then(
            (serial) => serials.add(serial),
            (error: Error) => failures.push(`handshake: ${error.message}`),
          );
        }
      };
      const streams = [kubeletStream(), kubeletStream(), adminStream(), handshakes()];
      try {
        await waitFor(() => serials.size >= 3, {
          what: 'two certificate renewals',
          timeoutMs: 40_000,
          intervalMs: 200,
        });
      } finally {
        running = false;
        await Promise.all(streams);
      }
      t.diagnostic(
        `${reviews} reviews and ${serials.size} serving certificates, ${failures.length} failures`,
      );
      assert.deepEqual(failures.slice(0, 5), [], `${failures.length} of ${reviews} requests failed`);
      assert.ok(reviews >= 20, `only ${reviews} reviews went through the renewals`);
      assert.equal(await readCaBundle(name), before, 'the caBundle stayed');
      const changes = await registry.getSingleMetricAsString('nodeflavor_webhook_certificate_changes_total');
      assert.match(changes, /nodeflavor_webhook_certificate_changes_total \d+/);
    });

    uninstallTest();
  });
}

/** The parts of a registration object that decide what is guarded (not metadata, not status). */
function guardFields(object: object): unknown {
  const { webhooks, spec } = object as { webhooks?: unknown; spec?: unknown };
  return webhooks ?? spec;
}

async function readCaBundle(name: string): Promise<string> {
  const response = await env.kubeConfig
    .makeApiClient(AdmissionregistrationV1Api)
    .readValidatingWebhookConfiguration({ name });
  return response.webhooks?.[0]?.clientConfig.caBundle ?? '';
}
