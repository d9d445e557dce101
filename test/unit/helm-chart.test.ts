// The Helm chart in deploy/helm/nodeflavor, checked with the pinned helm binary (built from Go
// modules into the cache by `make binaries`): `helm lint` is clean, `helm template` renders with
// the default values and with every mode, and the rendered objects hold what a platform team
// checks first — the pod's security context, two replicas with a PodDisruptionBudget, probes,
// RBAC with exactly the verbs the code uses and no wildcard, no HMAC key Secret, flags that name
// the objects the chart creates. A typo in values fails against values.schema.json.
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { cpSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { before, describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { parseAllDocuments } from 'yaml';
import { parseRunFlags } from '../../src/cli/run-flags.ts';
import { type Config, parseConfig } from '../../src/config.ts';
import { DEFAULT_TRUSTED_NODE_LABELS, TRUSTED_NODE_LABEL_PATTERN } from '../../src/flavor/placement.ts';
import { JOINED_LABEL_KEY } from '../../src/flavor/resources.ts';
import { binaryPaths } from '../e2e/cluster/versions.ts';

const run = promisify(execFile);
const root = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
const chart = join(root, 'deploy', 'helm', 'nodeflavor');
const helm = binaryPaths().helm;
const RELEASE = 'nodeflavor';
const NAMESPACE = 'nodeflavor-system';

// biome-ignore lint/suspicious/noExplicitAny: rendered Kubernetes objects are untyped YAML.
type K8sObject = any;

interface HelmResult {
  code: number;
  stdout: string;
  stderr: string;
}

async function helmRun(args: string[]): Promise<HelmResult> {
  try {
    const { stdout, stderr } = await run(helm, args, { cwd: root, maxBuffer: 16 * 1024 * 1024 });
    return { code: 0, stdout, stderr };
  } catch (error) {
    const failed = error as { code?: number | string; stdout?: string; stderr?: string };
    if (typeof failed.code !== 'number') throw error;
    return { code: failed.code, stdout: failed.stdout ?? '', stderr: failed.stderr ?? '' };
  }
}

const JWT_VALUES = [
  '--set=issuer.auth.mode=jwt',
  '--set=issuer.auth.jwt.jwksSecret=portal-jwks',
  '--set=issuer.auth.jwt.issuer=https://idp.example.com',
  '--set=issuer.auth.jwt.audience=nodeflavor',
];

// Every configuration rendered once (concurrently), shared by the tests.
const renders = new Map<string, Promise<K8sObject[]>>();
function render(...setArgs: string[]): Promise<K8sObject[]> {
  const key = setArgs.join(' ');
  let rendered = renders.get(key);
  if (!rendered) {
    rendered = helmRun(['template', RELEASE, chart, '--namespace', NAMESPACE, ...setArgs]).then((result) => {
      assert.equal(result.code, 0, `helm template ${key} failed:\n${result.stderr}`);
      return parseAllDocuments(result.stdout)
        .map((doc) => {
          assert.deepEqual(doc.errors, [], `helm template ${key} rendered invalid YAML`);
          return doc.toJS();
        })
        .filter((object) => object !== null);
    });
    renders.set(key, rendered);
  }
  return rendered;
}

function only(objects: K8sObject[], kind: string, name?: string): K8sObject {
  const found = objects.filter((o) => o.kind === kind && (name === undefined || o.metadata.name === name));
  assert.equal(found.length, 1, `expected exactly one ${kind}${name ? ` ${name}` : ''}, got ${found.length}`);
  return found[0];
}

function container(objects: K8sObject[]): K8sObject {
  return only(objects, 'Deployment').spec.template.spec.containers[0];
}

function args(objects: K8sObject[]): string[] {
  return container(objects).args;
}

/** The value of `--name=value` in the container args (undefined when absent). */
function flag(objects: K8sObject[], name: string): string | undefined {
  const prefix = `--${name}=`;
  const found = args(objects).filter((a) => a.startsWith(prefix));
  assert.ok(found.length <= 1, `--${name} given more than once`);
  return found[0]?.slice(prefix.length);
}

/** Every rule of a Role/ClusterRole as one sorted string per (group, resource, name): easy to compare. */
function grants(role: K8sObject): string[] {
  const lines: string[] = [];
  for (const rule of role.rules) {
    for (const group of rule.apiGroups) {
      for (const resource of rule.resources) {
        const names: string[] = rule.resourceNames ?? ['*any*'];
        for (const name of names) {
          lines.push(`${group || 'core'} ${resource} ${name}: ${[...rule.verbs].sort().join(',')}`);
        }
      }
    }
  }
  return lines.sort();
}

function roleGrants(objects: K8sObject[], kind: 'Role' | 'ClusterRole', name: string): string[] {
  return grants(only(objects, kind, name));
}

interface NodeLike {
  labels: Record<string, string>;
  taints: { key: string; value?: string; effect: string }[];
}

/**
 * Whether kube-scheduler's filters could place `pod` on `node`, as far as the pod spec decides it:
 * nodeName, nodeSelector, the required node affinity (terms ORed, expressions ANDed) and
 * NoSchedule/NoExecute taints against tolerations. Preferences never filter.
 */
function schedulable(pod: K8sObject, node: NodeLike): boolean {
  if (pod.nodeName !== undefined) return false;
  for (const [key, value] of Object.entries(pod.nodeSelector ?? {})) {
    if (node.labels[key] !== value) return false;
  }
  const required = pod.affinity?.nodeAffinity?.requiredDuringSchedulingIgnoredDuringExecution;
  if (required) {
    const matches = (e: K8sObject): boolean => {
      const value = node.labels[e.key];
      switch (e.operator) {
        case 'Exists':
          return value !== undefined;
        case 'DoesNotExist':
          return value === undefined;
        case 'In':
          return value !== undefined && e.values.includes(value);
        case 'NotIn':
          return value === undefined || !e.values.includes(value);
        default:
          throw new Error(`operator ${e.operator} is not modelled here`);
      }
    };
    const terms: K8sObject[] = required.nodeSelectorTerms;
    assert.ok(
      terms.every((t) => t.matchFields === undefined),
      'no matchFields in the required terms',
    );
    if (!terms.some((t) => (t.matchExpressions ?? []).every(matches))) return false;
  }
  const tolerated = (taint: NodeLike['taints'][number]) =>
    (pod.tolerations ?? []).some(
      (t: K8sObject) =>
        (t.key === undefined || t.key === taint.key) &&
        (t.effect === undefined || t.effect === '' || t.effect === taint.effect) &&
        (t.operator === 'Exists' || (t.value ?? '') === (taint.value ?? '')),
    );
  return node.taints.every((taint) => taint.effect === 'PreferNoSchedule' || tolerated(taint));
}

// test/e2e/chart-rbac-exact.test.ts proves each of these is used (audit log).
const BASE_CLUSTER_GRANTS = [
  'authentication.k8s.io tokenreviews *any*: create',
  'authorization.k8s.io subjectaccessreviews *any*: create',
  'certificates.k8s.io certificatesigningrequests *any*: list,watch',
  'core events *any*: create,get,patch',
  'core nodes *any*: get,list,patch,watch',
  'nodeflavor.io flavorclasses *any*: get,list,watch',
  'nodeflavor.io flavorclasses/status *any*: update',
  'nodeflavor.io flavoredtokens *any*: create,delete,get,list,patch,watch',
  'nodeflavor.io flavoredtokens/status *any*: update',
  'nodeflavor.io nodenameclaims *any*: create,delete,get,list,update,watch',
];
const CSR_APPROVER_GRANTS = [
  'certificates.k8s.io certificatesigningrequests/approval *any*: update',
  'certificates.k8s.io signers kubernetes.io/kube-apiserver-client-kubelet: approve',
];

/** The admission guard applies its mode's objects and deletes the other mode's: all three kinds, one name. */
const ADMISSION_GRANTS = [
  'validatingwebhookconfigurations',
  'validatingadmissionpolicies',
  'validatingadmissionpolicybindings',
  'mutatingwebhookconfigurations',
  'mutatingadmissionpolicies',
  'mutatingadmissionpolicybindings',
]
  .flatMap((r) => [
    `admissionregistration.k8s.io ${r} *any*: create`,
    `admissionregistration.k8s.io ${r} ${RELEASE}: delete,get,list,patch,update,watch`,
  ])
  // The FlavorClass-keys and FlavoredToken policies and their bindings, in every mode (never
  // deleted by the process).
  .concat(
    ['validatingadmissionpolicies', 'validatingadmissionpolicybindings'].flatMap((r) =>
      ['class-keys', 'flavored-tokens'].map(
        (p) => `admissionregistration.k8s.io ${r} ${RELEASE}-${p}: get,list,patch,update,watch`,
      ),
    ),
  )
  // Its own ClusterRole, by name: the registration's owner (--registration-owner).
  .concat([`rbac.authorization.k8s.io clusterroles ${RELEASE}: get`]);

// Every mode the chart has: each must render, and the invariants below hold in all of them.
const MODES: Record<string, string[]> = {
  default: [],
  'admission webhook': ['--set=admission.mode=webhook'],
  'admission policy': ['--set=admission.mode=policy'],
  'admission both': ['--set=admission.mode=both'],
  'admission off': ['--set=admission.enabled=false', '--set=controller.allowUnguardedNodes=true'],
  'tls self': ['--set=tls.mode=self'],
  'tls cert-manager': ['--set=tls.mode=cert-manager'],
  'tls cert-manager, own issuer': [
    '--set=tls.mode=cert-manager',
    '--set=tls.certManager.issuerRef.name=corp-ca',
    '--set=tls.certManager.issuerRef.kind=ClusterIssuer',
  ],
  'issuer jwt': JWT_VALUES,
  'service monitor': ['--set=metrics.serviceMonitor.enabled=true'],
  'issuer ingress': ['--set=issuer.ingress.enabled=true'],
  'csr approver off': ['--set=controller.csrApprover=false'],
  'kubeadm bootstrap group': ['--set=joins.bootstrapGroup=system:bootstrappers:kubeadm:default-node-token'],
  'token discovery': ['--set=joins.discovery=token'],
  'no leader election, one replica': ['--set=controller.leaderElect=false', '--set=replicaCount=1'],
  'own trusted node labels': [
    '--set-json=placement.trustedNodeLabels=["node-role.kubernetes.io/infra","node-restriction.kubernetes.io/ops"]',
  ],
  'own affinity': [
    `--set-json=affinity=${JSON.stringify({
      nodeAffinity: {
        preferredDuringSchedulingIgnoredDuringExecution: [
          {
            weight: 10,
            preference: { matchExpressions: [{ key: 'example.com/pool', operator: 'In', values: ['ops'] }] },
          },
        ],
      },
      podAffinity: {
        preferredDuringSchedulingIgnoredDuringExecution: [
          {
            weight: 5,
            podAffinityTerm: {
              topologyKey: 'topology.kubernetes.io/zone',
              labelSelector: { matchLabels: { app: 'portal' } },
            },
          },
        ],
      },
      podAntiAffinity: {
        requiredDuringSchedulingIgnoredDuringExecution: [
          { topologyKey: 'kubernetes.io/hostname', labelSelector: { matchLabels: { app: 'noisy' } } },
        ],
        preferredDuringSchedulingIgnoredDuringExecution: [
          {
            weight: 20,
            podAffinityTerm: {
              topologyKey: 'topology.kubernetes.io/zone',
              labelSelector: { matchLabels: { app: 'nodeflavor' } },
            },
          },
        ],
      },
    })}`,
  ],
  'flavor classes': [
    '--set-json=flavorClasses=[{"name":"sweet","description":"ours","labels":{"example.com/trust":"a7"},"taints":[{"key":"example.com/trust","value":"a7","effect":"NoSchedule"}]},{"name":"sour","annotations":{"example.com/note":"x"}}]',
  ],
};

describe('helm chart deploy/helm/nodeflavor', () => {
  before(() => {
    if (!existsSync(helm)) {
      throw new Error(`${helm} is missing: run 'make binaries' (builds helm from the Go module proxy)`);
    }
    for (const values of Object.values(MODES)) void render(...values).catch(() => {});
  });

  test('crds/ holds exact copies of deploy/crds (copy them again after changing a CRD)', () => {
    const source = join(root, 'deploy', 'crds');
    const copies = join(chart, 'crds');
    const files = readdirSync(source).filter((f) => f.endsWith('.yaml'));
    assert.ok(files.length >= 2);
    assert.deepEqual(
      readdirSync(copies).sort(),
      files.sort(),
      'the chart has other CRD files than deploy/crds',
    );
    for (const file of files) {
      assert.ok(
        readFileSync(join(copies, file)).equals(readFileSync(join(source, file))),
        `${join('deploy/helm/nodeflavor/crds', file)} drifted from deploy/crds/${file}: cp deploy/crds/*.yaml deploy/helm/nodeflavor/crds/`,
      );
    }
  });

  test('helm lint is clean, also with --strict', async () => {
    for (const extra of [[], ['--strict']]) {
      const result = await helmRun(['lint', chart, ...extra]);
      assert.equal(result.code, 0, `helm lint ${extra.join(' ')} failed:\n${result.stdout}${result.stderr}`);
      assert.match(result.stdout, /1 chart\(s\) linted, 0 chart\(s\) failed/);
      assert.doesNotMatch(result.stdout, /\[(WARNING|ERROR)\]/);
    }
  });

  test('helm lint --strict passes with every mode', async () => {
    const results = await Promise.all(
      Object.entries(MODES).map(async ([mode, values]) => ({
        mode,
        result: await helmRun(['lint', '--strict', chart, ...values]),
      })),
    );
    for (const { mode, result } of results) {
      assert.equal(result.code, 0, `helm lint --strict (${mode}) failed:\n${result.stdout}${result.stderr}`);
    }
  });

  test('every mode renders; no wildcard, no Secret, standard labels on every object', async () => {
    for (const [mode, values] of Object.entries(MODES)) {
      const objects = await render(...values);
      assert.ok(objects.length > 10, `${mode}: only ${objects.length} objects`);
      for (const object of objects) {
        const where = `${mode}: ${object.kind} ${object.metadata.name}`;
        // The HMAC key Secret is created by the process, never rendered by Helm (nor any Secret).
        assert.notEqual(object.kind, 'Secret', `${where}: the chart must not render Secrets`);
        assert.equal(object.data, undefined, `${where} carries data`);
        assert.equal(object.stringData, undefined, `${where} carries stringData`);
        const labels = object.metadata.labels ?? {};
        assert.equal(labels['app.kubernetes.io/name'], 'nodeflavor', where);
        assert.equal(labels['app.kubernetes.io/instance'], RELEASE, where);
        assert.equal(labels['app.kubernetes.io/managed-by'], 'Helm', where);
        assert.equal(labels['app.kubernetes.io/version'], '0.1.0', where);
        assert.match(labels['helm.sh/chart'] ?? '', /^nodeflavor-/, where);
      }
      for (const role of objects.filter((o) => o.kind === 'Role' || o.kind === 'ClusterRole')) {
        for (const rule of role.rules) {
          for (const field of ['apiGroups', 'resources', 'verbs', 'resourceNames', 'nonResourceURLs']) {
            assert.ok(
              !(rule[field] ?? []).includes('*'),
              `${mode}: ${role.kind} ${role.metadata.name} has * in ${field}`,
            );
          }
          assert.equal(rule.nonResourceURLs, undefined);
        }
      }
    }
  });

  test('Deployment: 2 replicas, leader election, non-root, read-only, no capabilities, seccomp, probes', async () => {
    const objects = await render();
    const deployment = only(objects, 'Deployment');
    assert.equal(deployment.metadata.namespace, NAMESPACE);
    assert.equal(deployment.spec.replicas, 2);
    const pod = deployment.spec.template.spec;
    assert.equal(pod.automountServiceAccountToken, true);
    assert.equal(pod.serviceAccountName, RELEASE);
    assert.equal(pod.securityContext.runAsNonRoot, true);
    assert.equal(pod.securityContext.runAsUser, 65532);
    assert.equal(pod.securityContext.seccompProfile.type, 'RuntimeDefault');
    assert.equal(pod.containers.length, 1);
    const c = container(objects);
    assert.equal(c.image, 'nodeflavor:0.1.0');
    assert.deepEqual(c.securityContext, {
      runAsNonRoot: true,
      runAsUser: 65532,
      runAsGroup: 65532,
      readOnlyRootFilesystem: true,
      allowPrivilegeEscalation: false,
      privileged: false,
      capabilities: { drop: ['ALL'] },
      seccompProfile: { type: 'RuntimeDefault' },
    });
    const ports = Object.fromEntries(c.ports.map((p: K8sObject) => [p.name, p.containerPort]));
    assert.deepEqual(ports, { metrics: 8080, webhook: 9443, issuer: 8443 });
    assert.deepEqual(c.livenessProbe.httpGet, { path: '/healthz', port: 'metrics' });
    // A slow start is not a dead process: liveness only begins once the start-up probe passed,
    // which allows minutes, and then it restarts only after a minute and more of silence.
    assert.deepEqual(c.startupProbe.httpGet, { path: '/healthz', port: 'metrics' });
    assert.ok(
      c.startupProbe.periodSeconds * c.startupProbe.failureThreshold >= 120,
      'start-up may take 2 min',
    );
    assert.ok(
      c.livenessProbe.periodSeconds * c.livenessProbe.failureThreshold >= 60,
      'liveness tolerates 1 min',
    );
    assert.deepEqual(c.readinessProbe.httpGet, { path: '/readyz', port: 'metrics' });
    assert.ok(c.resources.requests.cpu && c.resources.requests.memory, 'resource requests');
    assert.ok(c.resources.limits.cpu && c.resources.limits.memory, 'resource limits');
    const env = Object.fromEntries(c.env.map((e: K8sObject) => [e.name, e.valueFrom?.fieldRef?.fieldPath]));
    assert.equal(env.POD_NAMESPACE, 'metadata.namespace');
    const antiAffinity = pod.affinity.podAntiAffinity.preferredDuringSchedulingIgnoredDuringExecution[0];
    assert.equal(antiAffinity.podAffinityTerm.topologyKey, 'kubernetes.io/hostname');
    assert.deepEqual(
      antiAffinity.podAffinityTerm.labelSelector.matchLabels,
      deployment.spec.selector.matchLabels,
    );
    // Only a scratch emptyDir is writable.
    assert.deepEqual(
      pod.volumes.map((v: K8sObject) => Object.keys(v).filter((k) => k !== 'name')[0]),
      ['emptyDir'],
    );

    assert.equal(args(objects)[0], 'run');
    assert.ok(args(objects).includes('--leader-elect'));
    // nodeflavor's own bootstrap group, and nodeflavor its only approver (name squatting).
    assert.ok(args(objects).includes('--csr-approver'));
    assert.equal(flag(objects, 'bootstrap-group'), 'system:bootstrappers:nodeflavor');
    // File discovery: issued tokens add nothing to kube-public/cluster-info.
    assert.equal(flag(objects, 'join-discovery'), 'file');
    assert.equal(flag(objects, 'namespace'), NAMESPACE);
    assert.equal(flag(objects, 'service-account'), RELEASE);
    assert.equal(flag(objects, 'metrics-address'), ':8080');
    assert.equal(flag(objects, 'webhook-address'), ':9443');
    assert.equal(flag(objects, 'issuer-address'), ':8443');
    assert.equal(flag(objects, 'admission-mode'), 'webhook');
    // The registration is owned by the chart's ClusterRole, so helm uninstall takes it along.
    assert.equal(flag(objects, 'registration-owner'), RELEASE);
    assert.ok(only(objects, 'ClusterRole', RELEASE), 'the owner is a ClusterRole the chart creates');
    assert.equal(flag(objects, 'tls-mode'), 'self');
    assert.equal(flag(objects, 'issuer-auth'), 'tokenreview');
    assert.equal(flag(objects, 'webhook-service'), `${RELEASE}-webhook`);
    assert.equal(flag(objects, 'key-secret'), `${RELEASE}-hmac-keys`);
    // Every flag is a kebab-case key of src/config.ts (or one of its --no- negations).
    const configKeys = readFileSync(join(root, 'src', 'config.ts'), 'utf8');
    for (const arg of args(objects).slice(1)) {
      const key = /^--(?:no-)?([a-z-]+)/.exec(arg)?.[1] ?? '';
      const camel = key.replace(/-([a-z])/g, (_m, c: string) => c.toUpperCase());
      const singular = { adminGroup: 'adminGroups', trustedNodeLabel: 'trustedNodeLabels' }[camel] ?? camel;
      assert.match(configKeys, new RegExp(`^  ${singular}: `, 'm'), `${arg} is not a key of src/config.ts`);
    }
  });

  test('the names the process is given are the objects the chart makes', async () => {
    const objects = await render('--set=tls.mode=cert-manager');
    const sa = only(objects, 'ServiceAccount');
    assert.equal(flag(objects, 'service-account'), sa.metadata.name);
    const operatorBindings = objects.filter(
      (o) =>
        (o.kind === 'RoleBinding' || o.kind === 'ClusterRoleBinding') &&
        !o.subjects.some((s: K8sObject) => s.kind === 'Group'), // the join group's (tested below)
    );
    assert.ok(operatorBindings.length >= 4);
    for (const binding of operatorBindings) {
      assert.deepEqual(binding.subjects, [
        { kind: 'ServiceAccount', name: sa.metadata.name, namespace: NAMESPACE },
      ]);
      only(objects, binding.roleRef.kind, binding.roleRef.name);
    }
    only(objects, 'Service', flag(objects, 'webhook-service'));
    const webhookCert = only(objects, 'Certificate', flag(objects, 'tls-secret'));
    assert.equal(webhookCert.spec.secretName, flag(objects, 'tls-secret'));
    const issuerCert = only(objects, 'Certificate', flag(objects, 'issuer-tls-secret'));
    assert.equal(issuerCert.spec.secretName, flag(objects, 'issuer-tls-secret'));
    const lease = only(objects, 'Role', `${RELEASE}-leader-election`);
    assert.deepEqual(lease.rules[1].resourceNames, [flag(objects, 'leader-election-id')]);
    const issuerCa = only(objects, 'Role', `${RELEASE}-issuer-ca`);
    assert.deepEqual(issuerCa.rules[1].resourceNames, [flag(objects, 'issuer-ca-config-map')]);
    assert.equal(flag(objects, 'issuer-audience'), 'nodeflavor-issuer');
  });

  test('PodDisruptionBudget keeps one replica; none for a single replica', async () => {
    const objects = await render();
    const pdb = only(objects, 'PodDisruptionBudget');
    assert.equal(pdb.spec.minAvailable, 1);
    assert.deepEqual(pdb.spec.selector.matchLabels, only(objects, 'Deployment').spec.selector.matchLabels);
    const single = await render(...MODES['no leader election, one replica']!);
    assert.equal(single.filter((o) => o.kind === 'PodDisruptionBudget').length, 0);
    assert.ok(args(single).includes('--no-leader-elect'));
    assert.equal(single.filter((o) => o.metadata.name === `${RELEASE}-leader-election`).length, 0);
  });

  test('Services: webhook 443 → 9443, issuer 443 → 8443, metrics 8080', async () => {
    const objects = await render();
    const c = container(objects);
    const selector = only(objects, 'Deployment').spec.selector.matchLabels;
    const expect = {
      [`${RELEASE}-webhook`]: [443, 9443],
      [`${RELEASE}-issuer`]: [443, 8443],
      [`${RELEASE}-metrics`]: [8080, 8080],
    };
    for (const [name, [port, target]] of Object.entries(expect)) {
      const service = only(objects, 'Service', name);
      assert.deepEqual(service.spec.selector, selector);
      assert.equal(service.spec.ports.length, 1);
      assert.equal(service.spec.ports[0].port, port);
      const named = c.ports.find((p: K8sObject) => p.name === service.spec.ports[0].targetPort);
      assert.equal(named?.containerPort, target, `${name} targets ${service.spec.ports[0].targetPort}`);
    }
  });

  test('RBAC: exactly the verbs the code uses (default values)', async () => {
    const objects = await render();
    assert.deepEqual(
      roleGrants(objects, 'ClusterRole', RELEASE),
      [...BASE_CLUSTER_GRANTS, ...CSR_APPROVER_GRANTS, ...ADMISSION_GRANTS].sort(),
    );
    // Its own Secrets only, by name (create cannot be scoped).
    assert.deepEqual(roleGrants(objects, 'Role', `${RELEASE}-secrets`), [
      'core secrets *any*: create',
      // The key ring is watched (and created on first install), never edited by the process.
      `core secrets ${RELEASE}-hmac-keys: list,watch`,
      `core secrets ${RELEASE}-issuer-tls: get,list,update,watch`,
      `core secrets ${RELEASE}-webhook-tls: get,list,update,watch`,
    ]);
    assert.equal(only(objects, 'Role', `${RELEASE}-secrets`).metadata.namespace, NAMESPACE);
    assert.deepEqual(roleGrants(objects, 'Role', `${RELEASE}-leader-election`), [
      'coordination.k8s.io leases *any*: create',
      `coordination.k8s.io leases ${RELEASE}-controller: get,update`,
    ]);
    assert.equal(only(objects, 'Role', `${RELEASE}-leader-election`).metadata.namespace, NAMESPACE);
    assert.deepEqual(roleGrants(objects, 'Role', `${RELEASE}-bootstrap-tokens`), [
      'core secrets *any*: create,delete',
    ]);
    assert.equal(only(objects, 'Role', `${RELEASE}-bootstrap-tokens`).metadata.namespace, 'kube-system');
    assert.deepEqual(roleGrants(objects, 'Role', `${RELEASE}-cluster-info`), [
      'core configmaps cluster-info: get',
    ]);
    assert.equal(only(objects, 'Role', `${RELEASE}-cluster-info`).metadata.namespace, 'kube-public');
    // The issuer CA for portals: one ConfigMap by name (create cannot be scoped), certificate only.
    assert.deepEqual(roleGrants(objects, 'Role', `${RELEASE}-issuer-ca`), [
      'core configmaps *any*: create',
      `core configmaps ${RELEASE}-issuer-ca: get,update`,
    ]);
    assert.equal(only(objects, 'Role', `${RELEASE}-issuer-ca`).metadata.namespace, NAMESPACE);
    assert.equal(objects.filter((o) => o.kind === 'Role').length, 6);
    assert.equal(objects.filter((o) => o.kind === 'ClusterRole').length, 2);
  });

  test('RBAC: CSR approval rules unless controller.csrApprover is off', async () => {
    for (const [mode, values] of Object.entries(MODES)) {
      const cluster = roleGrants(await render(...values), 'ClusterRole', RELEASE);
      const present = CSR_APPROVER_GRANTS.filter((g) => cluster.includes(g));
      const wanted = mode === 'csr approver off' ? [] : CSR_APPROVER_GRANTS;
      assert.deepEqual(present, wanted, mode);
    }
    const off = await render('--set=controller.csrApprover=false');
    assert.ok(args(off).includes('--no-csr-approver'));
    assert.ok(
      !roleGrants(off, 'ClusterRole', RELEASE).some((g) =>
        / (certificatesigningrequests\/approval|signers) /.test(g),
      ),
    );
    assert.deepEqual(
      roleGrants(await render(), 'ClusterRole', RELEASE),
      [...BASE_CLUSTER_GRANTS, ...CSR_APPROVER_GRANTS, ...ADMISSION_GRANTS].sort(),
    );
  });

  test('joins: the bootstrap group gets what kubeadm join needs, never CSR auto-approval', async () => {
    const objects = await render();
    const group = 'system:bootstrappers:nodeflavor';
    const bindings = objects.filter(
      (o) =>
        (o.kind === 'ClusterRoleBinding' || o.kind === 'RoleBinding') &&
        o.subjects?.some((s: K8sObject) => s.kind === 'Group' && s.name === group),
    );
    assert.deepEqual(
      bindings.map((b) => `${b.kind} ${b.metadata.namespace ?? ''} -> ${b.roleRef.name}`).sort(),
      [
        `ClusterRoleBinding  -> ${RELEASE}-join-get-nodes`,
        'ClusterRoleBinding  -> system:node-bootstrapper',
        `RoleBinding kube-system -> ${RELEASE}-join-config`,
      ],
    );
    assert.ok(!bindings.some((b) => /nodeclient/.test(b.roleRef.name)), 'never the auto-approval roles');
    assert.deepEqual(roleGrants(objects, 'ClusterRole', `${RELEASE}-join-get-nodes`), [
      'core nodes *any*: get',
    ]);
    assert.deepEqual(roleGrants(objects, 'Role', `${RELEASE}-join-config`), [
      'core configmaps kubeadm-config: get',
      'core configmaps kubelet-config: get',
    ]);
    // kubeadm's own group is bound by kubeadm: nothing rendered for it.
    const kubeadm = await render(...(MODES['kubeadm bootstrap group'] as string[]));
    assert.equal(flag(kubeadm, 'bootstrap-group'), 'system:bootstrappers:kubeadm:default-node-token');
    assert.ok(!kubeadm.some((o) => o.metadata.name === `${RELEASE}-join-config`));
  });

  test('joins.discovery: token discovery is opt-in; anything else fails the schema', async () => {
    assert.equal(flag(await render(...(MODES['token discovery'] as string[])), 'join-discovery'), 'token');
    await assert.rejects(render('--set=joins.discovery=https'), /discovery/);
  });

  test('admission.mode: the flag and the webhook Service follow the mode; RBAC covers every mode', async () => {
    const cases: [string, string[], boolean][] = [
      ['webhook', MODES['admission webhook']!, true],
      ['policy', MODES['admission policy']!, false],
      ['both', MODES['admission both']!, true],
    ];
    for (const [mode, values, webhookService] of cases) {
      const objects = await render(...values);
      assert.equal(flag(objects, 'admission-mode'), mode);
      assert.equal(flag(objects, 'webhook-config-name'), RELEASE);
      assert.deepEqual(
        roleGrants(objects, 'ClusterRole', RELEASE),
        // Every mode: the process also deletes the other mode's objects.
        [...BASE_CLUSTER_GRANTS, ...CSR_APPROVER_GRANTS, ...ADMISSION_GRANTS].sort(),
        mode,
      );
      const services = objects.filter(
        (o) => o.kind === 'Service' && o.metadata.name === `${RELEASE}-webhook`,
      );
      assert.equal(services.length, webhookService ? 1 : 0, mode);
    }
    const off = await render(...MODES['admission off']!);
    assert.ok(args(off).includes('--no-webhook'));
    assert.ok(args(off).includes('--allow-unguarded-nodes'));
    assert.ok(!args(await render()).includes('--allow-unguarded-nodes'));
    assert.equal(flag(off, 'admission-mode'), undefined);
    assert.deepEqual(
      roleGrants(off, 'ClusterRole', RELEASE),
      [...BASE_CLUSTER_GRANTS, ...CSR_APPROVER_GRANTS].sort(),
    );
  });

  test('runs the operator only on trusted nodes: a required node affinity, never a preference', async () => {
    const objects = await render();
    const pod = only(objects, 'Deployment').spec.template.spec;
    assert.deepEqual(pod.tolerations, [
      { key: 'node-role.kubernetes.io/control-plane', operator: 'Exists', effect: 'NoSchedule' },
    ]);
    // One term per trusted key (terms are ORed), each also excluding every node that joined
    // through nodeflavor; nothing else can put a pod on a node (no nodeName, no matchFields).
    assert.deepEqual(pod.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution, {
      nodeSelectorTerms: DEFAULT_TRUSTED_NODE_LABELS.map((key) => ({
        matchExpressions: [
          { key, operator: 'Exists' },
          { key: JOINED_LABEL_KEY, operator: 'DoesNotExist' },
        ],
      })),
    });
    assert.deepEqual(DEFAULT_TRUSTED_NODE_LABELS, [
      'node-role.kubernetes.io/control-plane',
      'node-restriction.kubernetes.io/nodeflavor-system',
    ]);
    assert.equal(pod.nodeName, undefined);
    assert.equal(pod.affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution, undefined);
    // The spread stays a preference: it can never outweigh a requirement.
    const spread = pod.affinity.podAntiAffinity.preferredDuringSchedulingIgnoredDuringExecution;
    assert.equal(spread.length, 1);
    assert.equal(spread[0].podAffinityTerm.topologyKey, 'kubernetes.io/hostname');
    // The process gets the same keys and its Node's name, and checks that Node again at start.
    assert.deepEqual(
      args(objects).filter((a) => a.startsWith('--trusted-node-label=')),
      DEFAULT_TRUSTED_NODE_LABELS.map((key) => `--trusted-node-label=${key}`),
    );
    const env = container(objects).env.find((e: K8sObject) => e.name === 'NODE_NAME');
    assert.deepEqual(env, { name: 'NODE_NAME', valueFrom: { fieldRef: { fieldPath: 'spec.nodeName' } } });
    // Kubernetes expands $(NODE_NAME) in args from the container's env.
    assert.equal(flag(objects, 'node-name'), '$(NODE_NAME)');
    const expanded = args(objects)
      .slice(1)
      .map((a) => a.replace('$(NODE_NAME)', 'n1'));
    const config = parseConfig(parseRunFlags(expanded, {}));
    assert.deepEqual(config.trustedNodeLabels, DEFAULT_TRUSTED_NODE_LABELS);
    assert.equal(config.nodeName, 'n1');
    assert.equal(config.allowUntrustedNode, false);
  });

  test('in every mode, the scheduler can place a replica only on a trusted node that did not join through nodeflavor', async () => {
    const CONTROL_PLANE = 'node-role.kubernetes.io/control-plane';
    const SYSTEM = 'node-restriction.kubernetes.io/nodeflavor-system';
    const NO_SCHEDULE = (key: string) => ({ key, effect: 'NoSchedule' });
    const nodes: { name: string; labels: Record<string, string>; taints: K8sObject[]; eligible: boolean }[] =
      [
        {
          name: 'control plane',
          labels: { [CONTROL_PLANE]: '' },
          taints: [NO_SCHEDULE(CONTROL_PLANE)],
          eligible: true,
        },
        { name: 'marked system node', labels: { [SYSTEM]: 'true' }, taints: [], eligible: true },
        { name: 'plain worker', labels: { 'kubernetes.io/hostname': 'w' }, taints: [], eligible: false },
        // The node of issue 25: verified, of a flavor without taints, nothing to stop a pod.
        {
          name: 'flavored, no taints',
          labels: { [JOINED_LABEL_KEY]: 'true', 'example.com/trust': 'a7' },
          taints: [],
          eligible: false,
        },
        {
          name: 'joined, labelled system',
          labels: { [JOINED_LABEL_KEY]: 'true', [SYSTEM]: 'true' },
          taints: [],
          eligible: false,
        },
        {
          name: 'joined, control-plane label',
          labels: { [JOINED_LABEL_KEY]: '', [CONTROL_PLANE]: '' },
          taints: [],
          eligible: false,
        },
        {
          name: 'quarantined',
          labels: { [JOINED_LABEL_KEY]: 'true' },
          taints: [NO_SCHEDULE('nodeflavor.io/unverified')],
          eligible: false,
        },
        // A kubelet may set node.kubernetes.io/* on itself: such a label proves nothing.
        {
          name: 'self-labelled',
          labels: { 'node.kubernetes.io/nodeflavor-system': 'true' },
          taints: [],
          eligible: false,
        },
      ];
    for (const [mode, values] of Object.entries(MODES)) {
      if (mode === 'own trusted node labels') continue; // its keys differ (below)
      const pod = only(await render(...values), 'Deployment').spec.template.spec;
      for (const node of nodes) {
        assert.equal(schedulable(pod, node), node.eligible, `${mode}: ${node.name}`);
      }
    }
    const own = only(await render(...MODES['own trusted node labels']!), 'Deployment').spec.template.spec;
    const INFRA = { 'node-role.kubernetes.io/infra': '' };
    assert.equal(schedulable(own, { labels: INFRA, taints: [] }), true);
    assert.equal(
      schedulable(own, { labels: { 'node-restriction.kubernetes.io/ops': 'x' }, taints: [] }),
      true,
    );
    assert.equal(schedulable(own, { labels: { ...INFRA, [JOINED_LABEL_KEY]: 'true' }, taints: [] }), false);
    assert.equal(
      schedulable(own, { labels: { [SYSTEM]: 'true' }, taints: [] }),
      false,
      'only the keys given',
    );
  });

  test('placement.trustedNodeLabels: the keys become the terms and the flags', async () => {
    const objects = await render(...MODES['own trusted node labels']!);
    const keys = ['node-role.kubernetes.io/infra', 'node-restriction.kubernetes.io/ops'];
    const terms = only(objects, 'Deployment').spec.template.spec.affinity.nodeAffinity
      .requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms;
    assert.deepEqual(
      terms.map((t: K8sObject) => t.matchExpressions),
      keys.map((key) => [
        { key, operator: 'Exists' },
        { key: JOINED_LABEL_KEY, operator: 'DoesNotExist' },
      ]),
    );
    assert.deepEqual(parseConfig(parseRunFlags(args(objects).slice(1), {})).trustedNodeLabels, keys);
  });

  test('controller.clusterApiSynced*Patterns: one flag per pattern, a comma inside one kept, read back as given', async () => {
    const objects = await render(
      '--set-json=controller.clusterApiSyncedLabelPatterns=["^team\\\\.example\\\\.com/","^x{1,3}$"]',
      '--set-json=controller.clusterApiSyncedAnnotationPatterns=["^ops/"]',
    );
    const config = parseConfig(parseRunFlags(args(objects).slice(1), {}));
    assert.deepEqual(config.capiSyncedLabelPatterns, ['^team\\.example\\.com/', '^x{1,3}$']);
    assert.deepEqual(config.capiSyncedAnnotationPatterns, ['^ops/']);
    const none = parseConfig(parseRunFlags(args(await render()).slice(1), {}));
    assert.deepEqual(none.capiSyncedLabelPatterns, [], 'none by default');
  });

  test('a trusted label key a kubelet could set on itself fails the install (schema, and the template without it)', async () => {
    const bad = [
      'node.kubernetes.io/nodeflavor-system', // the kubelet's own namespace (--node-labels)
      'kubelet.kubernetes.io/system',
      'kubernetes.io/hostname',
      'example.com/trusted',
      'nodeflavor.io/system',
      'node-role.kubernetes.io/',
      'node-restriction.kubernetes.io',
    ];
    const template = (values: string[], extra: string[] = []) =>
      helmRun(['template', RELEASE, chart, '--namespace', NAMESPACE, ...extra, ...values]);
    for (const key of bad) {
      const values = [
        `--set-json=placement.trustedNodeLabels=${JSON.stringify([DEFAULT_TRUSTED_NODE_LABELS[0], key])}`,
      ];
      const schema = await template(values);
      assert.notEqual(schema.code, 0, `${key} rendered`);
      assert.match(schema.stderr, /values don't meet the specifications of the schema/, key);
      assert.match(schema.stderr, /\/placement\/trustedNodeLabels\/1/, key);
      const templated = await template(values, ['--skip-schema-validation']);
      assert.notEqual(templated.code, 0, `${key} rendered without the schema`);
      assert.ok(
        templated.stderr.includes(
          `placement.trustedNodeLabels: ${JSON.stringify(key)} is a label a kubelet could set on its own Node`,
        ),
        `${key}: ${templated.stderr}`,
      );
      assert.match(templated.stderr, /node-restriction\.kubernetes\.io\/ or node-role\.kubernetes\.io\//);
    }
    const empty = await template(['--set-json=placement.trustedNodeLabels=[]'], ['--skip-schema-validation']);
    assert.notEqual(empty.code, 0);
    assert.match(empty.stderr, /placement\.trustedNodeLabels is empty/);
    assert.match(
      (await template(['--set-json=placement.trustedNodeLabels=[]'])).stderr,
      /\/placement\/trustedNodeLabels/,
    );
  });

  test('the trusted-key pattern is the same in the code, values.schema.json and the template', () => {
    const source = TRUSTED_NODE_LABEL_PATTERN.source.replaceAll('\\/', '/');
    const schema = JSON.parse(readFileSync(join(chart, 'values.schema.json'), 'utf8'));
    assert.equal(schema.properties.placement.properties.trustedNodeLabels.items.pattern, source);
    const template = readFileSync(join(chart, 'templates', 'deployment.yaml'), 'utf8');
    assert.ok(
      template.includes(`regexMatch ${JSON.stringify(source)}`),
      'deployment.yaml checks the same pattern',
    );
  });

  test('affinity: a required node affinity of the user fails, pointing to placement.trustedNodeLabels', async () => {
    const refused = await helmRun([
      'template',
      RELEASE,
      chart,
      '--namespace',
      NAMESPACE,
      `--set-json=affinity=${JSON.stringify({
        nodeAffinity: {
          requiredDuringSchedulingIgnoredDuringExecution: {
            nodeSelectorTerms: [{ matchExpressions: [{ key: 'example.com/pool', operator: 'Exists' }] }],
          },
        },
      })}`,
    ]);
    assert.notEqual(refused.code, 0);
    assert.match(
      refused.stderr,
      /affinity\.nodeAffinity\.requiredDuringSchedulingIgnoredDuringExecution would replace the chart's own required node affinity.*placement\.trustedNodeLabels/,
    );
    // A typo under nodeAffinity is no way around it either.
    const typo = await helmRun([
      'template',
      RELEASE,
      chart,
      '--namespace',
      NAMESPACE,
      '--set-json=affinity={"nodeAffinity":{"requiredDuringScheduling":{}}}',
    ]);
    assert.notEqual(typo.code, 0);
    assert.match(typo.stderr, /additional properties 'requiredDuringScheduling' not allowed/);
  });

  test("affinity: the user's pod (anti-)affinity and preferred node affinity are added; the protection and the spread stay", async () => {
    const objects = await render(...MODES['own affinity']!);
    const affinity = only(objects, 'Deployment').spec.template.spec.affinity;
    const defaults = only(await render(), 'Deployment').spec.template.spec.affinity;
    assert.deepEqual(
      affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution,
      defaults.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution,
    );
    assert.deepEqual(affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution, [
      {
        weight: 10,
        preference: { matchExpressions: [{ key: 'example.com/pool', operator: 'In', values: ['ops'] }] },
      },
    ]);
    assert.equal(affinity.podAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].weight, 5);
    const anti = affinity.podAntiAffinity;
    assert.deepEqual(
      anti.preferredDuringSchedulingIgnoredDuringExecution.map((t: K8sObject) => [
        t.weight,
        t.podAffinityTerm.topologyKey,
      ]),
      [
        [100, 'kubernetes.io/hostname'], // the chart's spread
        [20, 'topology.kubernetes.io/zone'],
      ],
    );
    assert.deepEqual(anti.requiredDuringSchedulingIgnoredDuringExecution, [
      { topologyKey: 'kubernetes.io/hostname', labelSelector: { matchLabels: { app: 'noisy' } } },
    ]);
  });

  test('tolerations of the quarantine taint (or of every taint) are refused', async () => {
    for (const toleration of [
      'tolerations[0].key=nodeflavor.io/unverified,tolerations[0].operator=Exists',
      'tolerations[0].operator=Exists',
    ]) {
      const refused = await helmRun([
        'template',
        RELEASE,
        chart,
        '--namespace',
        NAMESPACE,
        `--set=${toleration}`,
      ]);
      assert.notEqual(refused.code, 0, toleration);
      assert.match(refused.stderr, /must not tolerate the quarantine taint nodeflavor\.io\/unverified/);
    }
  });

  test('admission off without controller.allowUnguardedNodes fails to render, saying what to set', async () => {
    const refused = await helmRun([
      'template',
      RELEASE,
      chart,
      '--namespace',
      NAMESPACE,
      '--set=admission.enabled=false',
    ]);
    assert.notEqual(refused.code, 0);
    assert.match(refused.stderr, /leaves Nodes unguarded.*controller\.allowUnguardedNodes=true/);
    // Without the controller nothing writes flavors: no guard is needed.
    const issuerOnly = await render('--set=admission.enabled=false', '--set=controller.enabled=false');
    assert.ok(!args(issuerOnly).includes('--allow-unguarded-nodes'));
  });

  test('admission.adminGroups become repeated --admin-group flags', async () => {
    const objects = await render('--set=admission.adminGroups={platform-admins,sre}');
    assert.deepEqual(
      args(objects).filter((a) => a.startsWith('--admin-group=')),
      ['--admin-group=platform-admins', '--admin-group=sre'],
    );
  });

  test('tls.mode: self renders no cert-manager objects; cert-manager renders a CA chain and Certificates', async () => {
    const self = await render(...MODES['tls self']!);
    assert.equal(self.filter((o) => String(o.apiVersion).startsWith('cert-manager.io/')).length, 0);
    assert.equal(flag(self, 'tls-mode'), 'self');

    const cm = await render(...MODES['tls cert-manager']!);
    assert.equal(flag(cm, 'tls-mode'), 'cert-manager');
    const selfSigned = only(cm, 'Issuer', `${RELEASE}-selfsigned`);
    assert.deepEqual(selfSigned.spec, { selfSigned: {} });
    const ca = only(cm, 'Certificate', `${RELEASE}-ca`);
    assert.equal(ca.spec.isCA, true);
    assert.equal(ca.spec.issuerRef.name, selfSigned.metadata.name);
    const caIssuer = only(cm, 'Issuer', `${RELEASE}-ca`);
    assert.equal(caIssuer.spec.ca.secretName, ca.spec.secretName);
    const webhook = only(cm, 'Certificate', `${RELEASE}-webhook-tls`);
    assert.equal(webhook.spec.secretName, flag(cm, 'tls-secret'));
    assert.equal(webhook.spec.issuerRef.name, caIssuer.metadata.name);
    assert.ok(webhook.spec.dnsNames.includes(`${RELEASE}-webhook.${NAMESPACE}.svc`));
    assert.ok(webhook.spec.dnsNames.includes(`${RELEASE}-webhook.${NAMESPACE}.svc.cluster.local`));
    const issuer = only(cm, 'Certificate', `${RELEASE}-issuer-tls`);
    assert.ok(issuer.spec.dnsNames.includes(`${RELEASE}-issuer.${NAMESPACE}.svc`));

    const own = await render(...MODES['tls cert-manager, own issuer']!);
    assert.equal(own.filter((o) => o.kind === 'Issuer').length, 0);
    assert.deepEqual(only(own, 'Certificate', `${RELEASE}-webhook-tls`).spec.issuerRef, {
      name: 'corp-ca',
      kind: 'ClusterIssuer',
      group: 'cert-manager.io',
    });
  });

  test('issuer.auth.mode jwt: flags and the JWKS Secret mounted read-only', async () => {
    const objects = await render(...JWT_VALUES);
    assert.equal(flag(objects, 'issuer-auth'), 'jwt');
    assert.equal(flag(objects, 'jwt-jwks-file'), '/etc/nodeflavor/jwt/jwks.json');
    assert.equal(flag(objects, 'jwt-issuer'), 'https://idp.example.com');
    assert.equal(flag(objects, 'jwt-audience'), 'nodeflavor');
    assert.equal(flag(objects, 'jwt-flavors-claim'), 'nodeflavor.io/flavors');
    const pod = only(objects, 'Deployment').spec.template.spec;
    const volume = pod.volumes.find((v: K8sObject) => v.name === 'jwks');
    assert.equal(volume.secret.secretName, 'portal-jwks');
    const mount = container(objects).volumeMounts.find((m: K8sObject) => m.name === 'jwks');
    assert.deepEqual(mount, { name: 'jwks', mountPath: '/etc/nodeflavor/jwt', readOnly: true });
    const defaults = await render();
    assert.equal(flag(defaults, 'jwt-jwks-file'), undefined);
  });

  test('issuer.portal.enabled: off by default (and so in the code); one value turns the page on', async () => {
    const defaults = await render();
    assert.ok(!args(defaults).includes('--issuer-portal'), 'no page unless asked for');
    assert.equal(parseConfig({}).issuerPortal, false, 'nodeflavor run serves no page by default either');
    const on = await render('--set', 'issuer.portal.enabled=true');
    assert.ok(args(on).includes('--issuer-portal'));
    // The flag parses as nodeflavor run parses it.
    assert.equal(parseConfig(parseRunFlags(['--issuer-portal'], {})).issuerPortal, true);
    const noIssuer = await render('--set', 'issuer.portal.enabled=true', '--set', 'issuer.enabled=false');
    assert.ok(!args(noIssuer).includes('--issuer-portal'), 'no page without the issuer');
  });

  test('issuer.attestation: the manufacturer CAs and CRLs go into the ConfigMap and become the file flags', async () => {
    const objects = await render(
      '--set=issuer.attestation.url=https://issuer.example.com',
      '--set=issuer.attestation.tpmManufacturerCAs=ROOT',
      '--set=issuer.attestation.tpmManufacturerCRLs=CRL',
    );
    assert.equal(
      flag(objects, 'tpm-manufacturer-ca-file'),
      '/etc/nodeflavor/attestation/tpm-manufacturers.pem',
    );
    assert.equal(
      flag(objects, 'tpm-manufacturer-crl-file'),
      '/etc/nodeflavor/attestation/tpm-manufacturer-crls.pem',
    );
    const data = only(objects, 'ConfigMap', `${RELEASE}-attestation`).data;
    assert.deepEqual(Object.keys(data).sort(), ['tpm-manufacturer-crls.pem', 'tpm-manufacturers.pem']);
    assert.equal(flag(await render(), 'tpm-manufacturer-crl-file'), undefined);
    // The flags parse as nodeflavor run parses them.
    const config = parseConfig(parseRunFlags(args(objects).slice(1), {}));
    assert.equal(config.tpmManufacturerCrlFile, '/etc/nodeflavor/attestation/tpm-manufacturer-crls.pem');
  });

  test('issuer.limits and issuer.trustedProxies become flags; the chart defaults are the code defaults', async () => {
    const limitKeys = [
      'issuerHeadersTimeout',
      'issuerRequestTimeout',
      'issuerIdleTimeout',
      'issuerMaxConnectionsPerAddress',
      'issuerMaxConnections',
      'issuerTrustedProxies',
      'issuerAuthFailureBurst',
      'issuerAuthFailuresPerSecond',
      'issuerCallerBurst',
      'issuerCallerPerSecond',
      'attestationBurst',
      'attestationPerSecond',
    ] as const;
    const pick = (config: Config) => Object.fromEntries(limitKeys.map((k) => [k, config[k]]));
    const parsed = async (...setArgs: string[]) =>
      parseConfig(parseRunFlags(args(await render(...setArgs)).slice(1), {}));
    assert.deepEqual(pick(await parsed()), pick(parseConfig({})));
    assert.equal(flag(await render(), 'issuer-trusted-proxies'), undefined);
    const set = await parsed(
      '--set=issuer.limits.headersTimeout=2s',
      '--set=issuer.limits.maxConnections=500000',
      '--set-json=issuer.limits.authFailuresPerSecond=0.25',
      '--set=issuer.trustedProxies={10.0.0.0/8,fd00::/8}',
    );
    assert.equal(set.issuerHeadersTimeout, 2_000);
    assert.equal(set.issuerMaxConnections, 500_000);
    assert.equal(set.issuerAuthFailuresPerSecond, 0.25);
    assert.deepEqual(set.issuerTrustedProxies, ['10.0.0.0/8', 'fd00::/8']);
    const off = await render('--set=issuer.enabled=false');
    assert.ok(!args(off).some((a) => a.startsWith('--issuer-max-connections')));
  });

  test('metrics.serviceMonitor.enabled renders a ServiceMonitor for the metrics Service only', async () => {
    assert.equal((await render()).filter((o) => o.kind === 'ServiceMonitor').length, 0);
    const objects = await render(...MODES['service monitor']!);
    const monitor = only(objects, 'ServiceMonitor');
    assert.equal(monitor.apiVersion, 'monitoring.coreos.com/v1');
    assert.equal(monitor.spec.endpoints[0].port, 'metrics');
    assert.equal(monitor.spec.endpoints[0].path, '/metrics');
    const selected = objects.filter(
      (o) =>
        o.kind === 'Service' &&
        Object.entries(monitor.spec.selector.matchLabels).every(([k, v]) => o.metadata.labels[k] === v),
    );
    assert.deepEqual(
      selected.map((s) => s.metadata.name),
      [`${RELEASE}-metrics`],
    );
  });

  test('issuer.ingress.enabled renders an Ingress to the issuer Service', async () => {
    assert.equal((await render()).filter((o) => o.kind === 'Ingress').length, 0);
    const ingress = only(await render(...MODES['issuer ingress']!), 'Ingress');
    const backend = ingress.spec.rules[0].http.paths[0].backend.service;
    assert.deepEqual(backend, { name: `${RELEASE}-issuer`, port: { name: 'https' } });
  });

  test('flavorClasses become FlavorClass objects', async () => {
    const objects = await render(...MODES['flavor classes']!);
    const sweet = only(objects, 'FlavorClass', 'sweet');
    assert.equal(sweet.apiVersion, 'nodeflavor.io/v1alpha1');
    assert.deepEqual(sweet.spec, {
      description: 'ours',
      labels: { 'example.com/trust': 'a7' },
      taints: [{ key: 'example.com/trust', value: 'a7', effect: 'NoSchedule' }],
    });
    assert.deepEqual(only(objects, 'FlavorClass', 'sour').spec, { annotations: { 'example.com/note': 'x' } });
    assert.equal((await render()).filter((o) => o.kind === 'FlavorClass').length, 0);
  });

  test('NOTES.txt renders in every mode, says where the pods may run and how to issue a first token', async () => {
    // helm template does not render NOTES.txt (only install does): render it as a template in a
    // scratch copy of the chart, so a broken NOTES fails here rather than at `helm install`.
    const dir = mkdtempSync(join(tmpdir(), 'nodeflavor-chart-'));
    try {
      const copy = join(dir, 'nodeflavor');
      cpSync(chart, copy, { recursive: true });
      const notes = readFileSync(join(chart, 'templates', 'NOTES.txt'), 'utf8');
      writeFileSync(
        join(copy, 'templates', '_notes-preview.tpl'),
        `{{- define "preview.notes" -}}\n${notes}\n{{- end }}\n`,
      );
      writeFileSync(
        join(copy, 'templates', 'notes-preview.yaml'),
        'apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: notes\ndata:\n  notes: {{ include "preview.notes" . | toJson }}\n',
      );
      const rendered = await Promise.all(
        Object.entries(MODES).map(async ([mode, values]) => {
          const result = await helmRun([
            'template',
            RELEASE,
            copy,
            '--namespace',
            NAMESPACE,
            '--show-only',
            'templates/notes-preview.yaml',
            ...values,
          ]);
          assert.equal(result.code, 0, `NOTES.txt (${mode}) failed:\n${result.stderr}`);
          return { mode, text: String(parseAllDocuments(result.stdout)[0]?.toJS().data.notes) };
        }),
      );
      for (const { mode, text } of rendered) {
        assert.match(text, /kubectl flavor issue --flavor \S+/, mode);
        assert.ok(text.includes(`${NAMESPACE}/${RELEASE}-hmac-keys`), `${mode}: names the HMAC key Secret`);
        assert.match(text, /never by Helm/, mode);
        assert.ok(text.includes(`https://${RELEASE}-issuer.${NAMESPACE}.svc:8443/v1/tokens`), mode);
        assert.doesNotMatch(text, /<no value>/, mode);
        // Where the pods may run, and how to mark a system node when they stay Pending.
        assert.match(text, /Pending/, mode);
        if (mode === 'own trusted node labels') continue;
        assert.match(
          text,
          /^ {2}kubectl label node <name> node-restriction\.kubernetes\.io\/nodeflavor-system=true$/m,
          mode,
        );
        assert.match(text, /Control-plane nodes .* are eligible by default/, mode);
      }
      const own = rendered.find((r) => r.mode === 'own trusted node labels')!.text;
      assert.match(own, /node-role\.kubernetes\.io\/infra, node-restriction\.kubernetes\.io\/ops/);
      assert.match(own, /^ {2}kubectl label node <name> node-restriction\.kubernetes\.io\/ops=true$/m);
      assert.doesNotMatch(own, /Control-plane nodes/);
      // Each command on a line of its own, whatever the keys.
      for (const { mode, text } of rendered) assert.match(text, /^Pods waiting for a node:$/m, mode);
      const withClasses = rendered.find((r) => r.mode === 'flavor classes')!.text;
      assert.match(withClasses, /kubectl flavor issue --flavor sweet/);
      assert.match(withClasses, /create token portal --audience nodeflavor-issuer/);
      // Portals read the CA from the ConfigMap, never from the Secret that holds the CA key.
      for (const { mode, text } of rendered) {
        if (!text.includes('/v1/tokens')) continue;
        assert.match(text, new RegExp(`get configmap ${RELEASE}-issuer-ca`), mode);
        assert.doesNotMatch(text, /get secret \S+-issuer-tls/, mode);
      }
      assert.match(rendered.find((r) => r.mode === 'issuer jwt')!.text, /Bearer \$JWT/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  test('a typo or a bad value in values fails helm template against the schema', async () => {
    const cases: [string[], RegExp][] = [
      [['--set=replicas=2'], /additional properties 'replicas' not allowed/],
      [['--set=admission.mdoe=webhook'], /additional properties 'mdoe' not allowed/],
      [['--set=tls.mode=selfsigned'], /\/tls\/mode/],
      [['--set=issuer.auth.mode=oidc'], /\/issuer\/auth\/mode/],
      [['--set=controller.csrAprover=true'], /additional properties 'csrAprover' not allowed/],
      [['--set=metrics.serviceMonitor.enable=true'], /additional properties 'enable' not allowed/],
      [['--set=admission.adminGroups={system:authenticated}'], /\/admission\/adminGroups\/0/],
      [['--set=controller.bindingGrace=30 seconds'], /\/controller\/bindingGrace/],
      [
        ['--set-json=flavorClasses=[{"name":"sweet","lables":{}}]'],
        /additional properties 'lables' not allowed/,
      ],
      [['--set=issuer.auth.mode=jwt'], /\/issuer\/auth\/jwt\/jwksSecret/],
      [['--set=issuer.limits.headersTimeout=10'], /\/issuer\/limits\/headersTimeout/],
      [['--set=issuer.limits.maxConnection=5'], /additional properties 'maxConnection' not allowed/],
      [['--set=issuer.trustedProxies={ingress-nginx}'], /\/issuer\/trustedProxies\/0/],
    ];
    const results = await Promise.all(
      cases.map(([values]) => helmRun(['template', RELEASE, chart, '--namespace', NAMESPACE, ...values])),
    );
    cases.forEach(([values, message], i) => {
      const result = results[i]!;
      assert.notEqual(result.code, 0, `${values.join(' ')} rendered`);
      assert.match(result.stderr, /values don't meet the specifications of the schema/, values.join(' '));
      assert.match(result.stderr, message, values.join(' '));
    });
  });
});
