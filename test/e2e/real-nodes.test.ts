// nodeflavor as users run it, on real nodes: `helm install` of the chart runs the operator as Pods
// on a plain-joined "system" node; a real `kubeadm join --config` of what the issuer API hands out
// (file discovery: the JoinConfiguration and the discovery kubeconfig, no signature in
// cluster-info) brings up a real kubelet that the in-cluster operator verifies and flavors; kube-scheduler
// places the README's workload there, never on an unverified node, and no longer once the flavor
// is revoked. The file runs its own control plane (with kube-scheduler): a first install needs a
// cluster no other test has touched. Needs root on Linux with the Debian packages `make tools`
// installs; elsewhere it is skipped with the reason.
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { promisify } from 'node:util';
import type { V1Node, V1Pod } from '@kubernetes/client-node';
import { parse, parseAllDocuments, stringify } from 'yaml';
import { kubeJson } from '../../src/runtime/fetch.ts';
import { skipUnless } from '../support/skip.ts';
import { applyObjects } from './cluster/apply.ts';
import { ControlPlane } from './cluster/controlplane.ts';
import { binaryPaths } from './cluster/versions.ts';
import { KubeHttp } from './kubelet-sim/http.ts';
import { buildOperatorImage } from './realnode/operator-image.ts';
import { PAUSE_IMAGE, type RealNode, RealNodeHost, realNodesUnsupported } from './realnode/real-node.ts';
import { serviceAddress, serviceRequest } from './realnode/service-endpoint.ts';
import { createBootstrapToken, joinConfiguration } from './support/bootstrap.ts';
import { type E2EEnvironment, loadEnvironment } from './support/environment.ts';
import { firstVersionOf } from './support/first-version.ts';
import { waitFor } from './support/wait.ts';

const run = promisify(execFile);
const unsupported = skipUnless('the real-node suite (test/e2e/real-nodes.test.ts)', realNodesUnsupported());
const NAMESPACE = 'nodeflavor-system';
const RELEASE = 'nodeflavor';
const IMAGE = 'nodeflavor:e2e';
const QUARANTINE = 'nodeflavor.io/unverified';
const JOINED = 'nodeflavor.io/joined';
const SYSTEM_MARK = 'node-restriction.kubernetes.io/nodeflavor-system';
/** A flavor without taints: a verified node of it attracts every Pod that selects nothing. */
const MILD = 'mild';
const TOKEN_LABEL = 'nodeflavor.io/token';
const MERGE = 'application/merge-patch+json';
const JSON_PATCH = 'application/json-patch+json';
const STRATEGIC = 'application/strategic-merge-patch+json';
const APPLY = 'application/apply-patch+yaml';
const readme = readFileSync(join(import.meta.dirname, '..', '..', 'README.md'), 'utf8');

/** The first YAML block of the README with this kind: the tests run what the README tells users. */
function readmeObject(kind: string): Record<string, unknown> {
  for (const block of readme.matchAll(/```yaml\n([\s\S]*?)```/g)) {
    for (const doc of parseAllDocuments(block[1] ?? '')) {
      const object = doc.toJS() as Record<string, unknown> | null;
      if (object?.kind === kind) return object;
    }
  }
  throw new Error(`README.md has no yaml block of kind ${kind}`);
}

describe('real nodes: the chart as Pods, a real kubeadm join, kube-scheduler', { skip: unsupported }, () => {
  let plane: ControlPlane;
  let env: E2EEnvironment;
  let host: RealNodeHost;
  let imageDir: string;
  let portalToken: string;
  let issuerCa: string;
  let flavored: RealNode;
  let flavoredTokenId: string;
  let flavoredTokenID: string;
  let unverified: RealNode;
  const helm = (...args: string[]) =>
    run(binaryPaths().helm, [...args, '--kubeconfig', plane.kubeconfigPath, '--namespace', NAMESPACE], {
      maxBuffer: 16 * 1024 * 1024,
    });

  interface Issued {
    id: string;
    tokenID: string;
    joinConfiguration: string;
    discoveryKubeconfig: string;
    cloudInit: string;
  }

  async function issuerCall(method: string, path: string, body?: unknown): Promise<string> {
    const issuer = await serviceAddress(env, NAMESPACE, `${RELEASE}-issuer`, 'https');
    const answer = await serviceRequest(issuer, issuerCa, method, path, {
      bearer: portalToken,
      ...(body === undefined ? {} : { body }),
    });
    assert.equal(answer.status, method === 'POST' ? 201 : 200, answer.text);
    return answer.text;
  }

  async function issue(flavorClassName = 'sweet'): Promise<Issued> {
    return JSON.parse(await issuerCall('POST', '/v1/tokens', { flavorClassName, ttl: '1h' })) as Issued;
  }

  /** The issued JoinConfiguration as a node administrator rewrote it: taints and/or labels dropped. */
  function rewritten(joinConfiguration: string, drop: { taint: boolean; tokenLabel: boolean }): string {
    const config = parse(joinConfiguration) as {
      nodeRegistration: { taints?: unknown[]; kubeletExtraArgs?: { name: string; value: string }[] };
    };
    if (drop.taint) config.nodeRegistration.taints = [];
    if (drop.tokenLabel)
      config.nodeRegistration.kubeletExtraArgs = (config.nodeRegistration.kubeletExtraArgs ?? []).filter(
        (arg) => arg.name !== 'node-labels',
      );
    const text = stringify(config);
    assert.equal(text.includes(QUARANTINE), !drop.taint);
    assert.equal(text.includes(TOKEN_LABEL), !drop.tokenLabel);
    return text;
  }

  async function ready(name: string): Promise<void> {
    await waitFor(
      async () => {
        const n = await readNode(name).catch(() => undefined);
        return n?.status?.conditions?.find((c) => c.type === 'Ready')?.status === 'True';
      },
      { what: `${name} to be Ready`, timeoutMs: 90_000 },
    );
  }

  async function nodeWarning(name: string, reason: string): Promise<void> {
    await waitFor(
      async () => {
        const events = await env.core.listNamespacedEvent({
          namespace: 'default',
          fieldSelector: `involvedObject.kind=Node,involvedObject.name=${name},type=Warning`,
        });
        return events.items.some((e) => e.reason === reason);
      },
      { what: `a ${reason} Warning on ${name}`, timeoutMs: 60_000 },
    );
  }

  async function operatorPods(): Promise<V1Pod[]> {
    const pods = await env.core.listNamespacedPod({
      namespace: NAMESPACE,
      labelSelector: 'app.kubernetes.io/component=operator',
    });
    return pods.items.filter((p) => !p.metadata?.deletionTimestamp);
  }

  async function scaleOperator(replicas: number): Promise<void> {
    await kubeJson(
      env.kubeConfig,
      'PATCH',
      `/apis/apps/v1/namespaces/${NAMESPACE}/deployments/${RELEASE}/scale`,
      {
        body: { spec: { replicas } },
        contentType: MERGE,
      },
    );
  }

  async function markSystemNode(mark: boolean): Promise<void> {
    await kubeJson(env.kubeConfig, 'PATCH', '/api/v1/nodes/system-1', {
      body: { metadata: { labels: { [SYSTEM_MARK]: mark ? 'true' : null } } },
      contentType: MERGE,
    });
  }

  async function clusterInfoSignatureOf(tokenId: string): Promise<string | undefined> {
    const info = await env.core.readNamespacedConfigMap({ name: 'cluster-info', namespace: 'kube-public' });
    return info.data?.[`jws-kubeconfig-${tokenId}`];
  }

  const readNode = (name: string) => env.core.readNode({ name });
  const kubeFetchText = async (path: string) => {
    const { kubeFetch } = await import('../../src/runtime/fetch.ts');
    const response = await kubeFetch(env.kubeConfig, path, { method: 'GET' });
    const text = await response.text();
    assert.equal(response.status, 200, `${path}: ${text.slice(0, 200)}`);
    return text;
  };
  const hasQuarantine = (node: V1Node) => (node.spec?.taints ?? []).some((t) => t.key === QUARANTINE);

  async function podScheduling(name: string): Promise<{ node?: string; unschedulable?: string }> {
    const pod = await env.core.readNamespacedPod({ name, namespace: 'default' });
    const condition = pod.status?.conditions?.find((c) => c.type === 'PodScheduled');
    if (pod.spec?.nodeName) return { node: pod.spec.nodeName };
    if (condition?.status === 'False' && condition.reason === 'Unschedulable') {
      return { unschedulable: condition.message ?? '' };
    }
    return {};
  }

  async function createPod(name: string, spec: Record<string, unknown>): Promise<void> {
    await env.core.createNamespacedPod({
      namespace: 'default',
      body: { apiVersion: 'v1', kind: 'Pod', metadata: { name }, spec: spec as unknown as V1Pod['spec'] },
    });
  }

  /** The README's workload, with an image every node has (no registry here). */
  function readmeWorkloadSpec(): Record<string, unknown> {
    const spec = structuredClone(readmeObject('Pod').spec) as { containers: Record<string, unknown>[] };
    spec.containers = spec.containers.map((c) => ({ ...c, image: PAUSE_IMAGE, imagePullPolicy: 'Never' }));
    return spec;
  }

  before(async () => {
    imageDir = mkdtempSync(join(tmpdir(), 'nodeflavor-image-'));
    plane = await ControlPlane.start({
      scheduler: true,
      log: (line) => process.stderr.write(`[real-nodes control-plane] ${line}\n`),
    });
    env = await loadEnvironment(plane.kubeconfigPath);
    const image = buildOperatorImage(imageDir, IMAGE);
    host = await RealNodeHost.start(plane.server, [image]);
    // The platform team's own node, joined with a plain kubeadm token: the operator runs here.
    const token = await createBootstrapToken(env);
    const system = await host.startNode({
      name: 'system-1',
      joinConfiguration: joinConfiguration(env, token.token),
    });
    await system.joined();
    // kubeadm is done once the kubelet has its credentials; the kubelet registers its Node after.
    await waitFor(
      async () => (await env.core.readNode({ name: 'system-1' }).catch(() => undefined)) !== undefined,
      {
        what: 'system-1 to register its Node',
        timeoutMs: 60_000,
      },
    );
    // Marked by an admin as the README says: the chart's required node affinity (and the
    // process's own start-up check) lets the operator onto no node without such a label.
    await kubeJson(env.kubeConfig, 'PATCH', '/api/v1/nodes/system-1', {
      body: { metadata: { labels: { 'node-restriction.kubernetes.io/nodeflavor-system': 'true' } } },
      contentType: MERGE,
    });
    await helm(
      'install',
      RELEASE,
      join(import.meta.dirname, '..', '..', 'deploy', 'helm', 'nodeflavor'),
      '--create-namespace',
      '--set',
      `image.repository=${IMAGE.split(':')[0]}`,
      '--set',
      `image.tag=${IMAGE.split(':')[1]}`,
      '--set',
      'image.pullPolicy=Never',
      '--wait',
      '--timeout',
      '180s',
    );
    // The README's FlavorClass, and a portal ServiceAccount that may use it.
    await applyObjects(plane.kubeconfigPath, [
      readmeObject('FlavorClass'),
      {
        apiVersion: 'nodeflavor.io/v1alpha1',
        kind: 'FlavorClass',
        metadata: { name: MILD },
        spec: { labels: { 'nodeflavor.io/flavor': MILD } },
      },
      { apiVersion: 'v1', kind: 'ServiceAccount', metadata: { name: 'portal', namespace: NAMESPACE } },
      {
        apiVersion: 'rbac.authorization.k8s.io/v1',
        kind: 'ClusterRole',
        metadata: { name: 'portal-use-sweet' },
        rules: [
          {
            apiGroups: ['nodeflavor.io'],
            resources: ['flavorclasses'],
            resourceNames: ['sweet', MILD],
            verbs: ['use'],
          },
          { apiGroups: ['nodeflavor.io'], resources: ['flavoredtokens'], verbs: ['delete'] },
        ],
      },
      {
        apiVersion: 'rbac.authorization.k8s.io/v1',
        kind: 'ClusterRoleBinding',
        metadata: { name: 'portal-use-sweet' },
        roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: 'portal-use-sweet' },
        subjects: [{ kind: 'ServiceAccount', name: 'portal', namespace: NAMESPACE }],
      },
    ]);
    const request = await env.core.createNamespacedServiceAccountToken({
      name: 'portal',
      namespace: NAMESPACE,
      body: { spec: { audiences: ['nodeflavor-issuer'], expirationSeconds: 3600 } },
    });
    portalToken = request.status?.token ?? '';
    const caMap = await env.core.readNamespacedConfigMap({
      name: `${RELEASE}-issuer-ca`,
      namespace: NAMESPACE,
    });
    issuerCa = caMap.data?.['ca.crt'] ?? '';
  });

  after(async () => {
    await host?.stop();
    await plane?.stop();
    if (imageDir) rmSync(imageDir, { recursive: true, force: true });
  });

  it('helm install runs the operator as Pods on the system node, one of them the elected leader', async () => {
    const pods = await env.core.listNamespacedPod({
      namespace: NAMESPACE,
      labelSelector: 'app.kubernetes.io/component=operator',
    });
    assert.equal(pods.items.length, 2);
    for (const pod of pods.items) {
      assert.equal(pod.spec?.nodeName, 'system-1');
      assert.ok(
        pod.status?.containerStatuses?.every((c) => c.ready),
        `${pod.metadata?.name} is not ready`,
      );
    }
    const holder = await waitFor(
      async () => {
        const lease = await kubeJson<{ spec?: { holderIdentity?: string } }>(
          env.kubeConfig,
          'GET',
          `/apis/coordination.k8s.io/v1/namespaces/${NAMESPACE}/leases/${RELEASE}-controller`,
        );
        return lease.spec?.holderIdentity;
      },
      { what: 'a leader', timeoutMs: 60_000 },
    );
    const names = pods.items.map((p) => p.metadata?.name ?? '');
    assert.ok(
      names.some((name) => holder.startsWith(name)),
      `the lease holder ${holder} is not one of ${names}`,
    );
  });

  it('the issuer answers through its Service, with a certificate for the Service name', async () => {
    const issued = await issue();
    assert.match(issued.joinConfiguration, /kind: "JoinConfiguration"/);
    // The chart's default: file discovery, and a token the bootstrap signer never signs.
    assert.match(issued.joinConfiguration, /kubeConfigPath: "\/etc\/kubernetes\/nodeflavor-discovery\.conf"/);
    assert.doesNotMatch(issued.joinConfiguration, /bootstrapToken:|caCertHashes/);
    // Keep it for the next test: a real kubeadm join of exactly the files its cloud-init writes.
    const cloudInit = parse(issued.cloudInit) as {
      write_files: { path: string; content: string }[];
      runcmd: string[][];
    };
    const [discoveryFile, joinFile] = cloudInit.write_files;
    assert.equal(discoveryFile?.path, '/etc/kubernetes/nodeflavor-discovery.conf');
    assert.equal(discoveryFile?.content, issued.discoveryKubeconfig);
    assert.equal(joinFile?.content, issued.joinConfiguration);
    assert.deepEqual(cloudInit.runcmd, [['kubeadm', 'join', '--config', joinFile?.path]]);
    flavoredTokenId = issued.id;
    flavored = await host.startNode({
      name: 'flavored-1',
      joinConfiguration: joinFile?.content ?? '',
      discoveryKubeconfig: discoveryFile?.content ?? '',
    });
    flavoredTokenID = issued.tokenID;
  });

  it('a real kubeadm join of the issued material (file discovery) is verified and flavored by the in-cluster operator', async () => {
    await flavored.joined();
    // kubeadm trusted the API server through the CA in the discovery kubeconfig: cluster-info holds
    // no signature for this token. The control: a signing token made now gets one, so the bootstrap
    // signer has re-signed cluster-info since this token's Secret appeared.
    const control = await createBootstrapToken(env, { expiresAt: new Date(Date.now() + 600_000) });
    await waitFor(async () => (await clusterInfoSignatureOf(control.id)) !== undefined, {
      what: 'the bootstrap signer to sign the control token',
      timeoutMs: 30_000,
    });
    assert.equal(await clusterInfoSignatureOf(flavoredTokenID), undefined);
    await env.core.deleteNamespacedSecret({
      name: `bootstrap-token-${control.id}`,
      namespace: 'kube-system',
    });
    // kubeadm's own account (--v=2): file discovery, then the token for the TLS bootstrap only.
    const kubeadmLog = readFileSync(join(flavored.dir, 'kubeadm.log'), 'utf8');
    assert.match(kubeadmLog, /Discovery file does not contains? authentication credentials/);
    assert.match(kubeadmLog, /Using provided TLSBootstrapToken as authentication credentials/);
    const node = await waitFor(
      async () => {
        const n = await readNode('flavored-1');
        return n.metadata?.labels?.['nodeflavor.io/flavor'] === 'sweet' && !hasQuarantine(n) ? n : undefined;
      },
      { what: 'flavored-1 to be flavored sweet and lose the quarantine taint', timeoutMs: 60_000 },
    );
    assert.equal(node.metadata?.labels?.[TOKEN_LABEL], undefined, 'the flavor token label stays on the node');
    assert.ok(
      node.spec?.taints?.some((t) => t.key === 'nodeflavor.io/dedicated' && t.value === 'sweet'),
      'the FlavorClass taint is missing',
    );
  });

  it('the real kubelet cannot relabel itself by any path the guard covers', async () => {
    const pem = flavored.kubeletClientPem();
    const kubelet = new KubeHttp(env.server, { ca: env.caPem, cert: pem, key: pem });
    const path = '/api/v1/nodes/flavored-1';
    const add = { metadata: { labels: { 'nodeflavor.io/flavor': 'sour', 'example.com/trust': 'a7' } } };
    const attempts: [string, string, unknown, string][] = [];
    for (const sub of ['', '/status']) {
      attempts.push(
        [`merge patch${sub}`, sub, add, MERGE],
        [`strategic merge patch${sub}`, sub, add, STRATEGIC],
        [
          `JSON patch${sub}`,
          sub,
          [{ op: 'replace', path: '/metadata/labels/nodeflavor.io~1flavor', value: 'sour' }],
          JSON_PATCH,
        ],
        [
          `server-side apply${sub}`,
          sub,
          { apiVersion: 'v1', kind: 'Node', metadata: { name: 'flavored-1', ...add.metadata } },
          APPLY,
        ],
        [`label removal${sub}`, sub, { metadata: { labels: { 'nodeflavor.io/flavor': null } } }, MERGE],
        [
          `trusted annotation${sub}`,
          sub,
          { metadata: { annotations: { 'nodeflavor.io/verified': 'yes' } } },
          MERGE,
        ],
        [`token label${sub}`, sub, { metadata: { labels: { [TOKEN_LABEL]: 'a'.repeat(52) } } }, MERGE],
      );
    }
    for (const [what, sub, body, type] of attempts) {
      const query = type === APPLY ? '?fieldManager=kubelet&force=true' : '';
      const result = await kubelet.request('PATCH', `${path}${sub}${query}`, body, type);
      assert.equal(result.status, 403, `${what}: HTTP ${result.status} ${result.text.slice(0, 300)}`);
      // Our guard refused it, called by the API server through the webhook Service.
      assert.match(
        (JSON.parse(result.text) as { message: string }).message,
        /admission webhook "[^"]+" denied the request/,
        what,
      );
    }
    // Lifting its own flavor taint: refused (NodeRestriction refuses taint changes by kubelets).
    const untaint = await kubelet.request('PATCH', path, { spec: { taints: [] } }, MERGE);
    assert.equal(untaint.status, 403, untaint.text);
    const node = await readNode('flavored-1');
    assert.equal(node.metadata?.labels?.['nodeflavor.io/flavor'], 'sweet');
    assert.equal(node.metadata?.labels?.['example.com/trust'], undefined);
  });

  it('the API server calls the webhook through its Service, and /metrics answers through the metrics Service', async () => {
    const registration = await kubeJson<{
      webhooks: { clientConfig: { service?: { name: string; namespace: string } } }[];
    }>(
      env.kubeConfig,
      'GET',
      `/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations/${RELEASE}`,
    );
    for (const webhook of registration.webhooks) {
      assert.deepEqual(
        { name: webhook.clientConfig.service?.name, namespace: webhook.clientConfig.service?.namespace },
        { name: `${RELEASE}-webhook`, namespace: NAMESPACE },
      );
    }
    const scrape = await kubeFetchText(
      `/api/v1/namespaces/${NAMESPACE}/services/${RELEASE}-metrics:metrics/proxy/metrics`,
    );
    assert.match(scrape, /^nodeflavor_keyring_available 1$/m);
    // Across the replicas (each scraped through its pod, as Prometheus does): one leader, and it
    // verified the node that joined.
    const pods = await env.core.listNamespacedPod({
      namespace: NAMESPACE,
      labelSelector: 'app.kubernetes.io/component=operator',
    });
    let leaders = 0;
    let verified = 0;
    for (const pod of pods.items) {
      const text = await kubeFetchText(
        `/api/v1/namespaces/${NAMESPACE}/pods/${pod.metadata?.name}:8080/proxy/metrics`,
      );
      leaders += Number(/^nodeflavor_leader (\d+)/m.exec(text)?.[1] ?? 0);
      for (const match of text.matchAll(
        /^nodeflavor_verifications_total\{[^}]*result="verified"[^}]*\} (\d+)/gm,
      )) {
        verified += Number(match[1]);
      }
    }
    assert.equal(leaders, 1);
    assert.ok(verified >= 1, 'no replica counted the verification');
  });

  it('keeps its flavor across a kubelet restart', async () => {
    const restartedAt = new Date();
    await flavored.restartKubelet();
    // The restarted kubelet renews its Lease with its own credentials and is Ready; nothing changed.
    await waitFor(
      async () => {
        const lease = await kubeJson<{ spec?: { renewTime?: string } }>(
          env.kubeConfig,
          'GET',
          '/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/flavored-1',
        );
        const n = await readNode('flavored-1');
        const ready = n.status?.conditions?.find((c) => c.type === 'Ready');
        return new Date(lease.spec?.renewTime ?? 0) > restartedAt && ready?.status === 'True';
      },
      { what: 'the restarted kubelet of flavored-1 to renew its Lease and be Ready', timeoutMs: 90_000 },
    );
    const after = await readNode('flavored-1');
    assert.equal(after.metadata?.labels?.['nodeflavor.io/flavor'], 'sweet');
    assert.equal(hasQuarantine(after), false);
  });

  it("kube-scheduler places the README's workload on the flavored node, and it runs", async () => {
    await createPod('payments', readmeWorkloadSpec());
    const placed = await waitFor(async () => (await podScheduling('payments')).node, {
      what: 'payments to be scheduled',
      timeoutMs: 60_000,
    });
    assert.equal(placed, 'flavored-1');
    await waitFor(
      async () => {
        const pod = await env.core.readNamespacedPod({ name: 'payments', namespace: 'default' });
        return pod.status?.phase === 'Running';
      },
      { what: 'payments to run on flavored-1', timeoutMs: 90_000 },
    );
  });

  it('never places a Pod without the quarantine toleration on an unverified node', async () => {
    // A node whose flavor token was altered: its CSR binds, verification fails, it stays quarantined.
    const issued = await issue();
    const tampered = issued.joinConfiguration.replace(
      /(nodeflavor\.io\/token=)([a-z2-7])/,
      (_, prefix: string, first: string) => `${prefix}${first === 'a' ? 'b' : 'a'}`,
    );
    assert.notEqual(tampered, issued.joinConfiguration);
    // This machine's discovery kubeconfig comes from GET /v1/discovery, as a machine image would
    // have it installed once, not from this issuance's answer.
    const discovery = JSON.parse(await issuerCall('GET', '/v1/discovery')) as { kubeconfig: string };
    unverified = await host.startNode({
      name: 'unverified-1',
      joinConfiguration: tampered,
      discoveryKubeconfig: discovery.kubeconfig,
    });
    await unverified.joined();
    await waitFor(
      async () => {
        const events = await env.core.listNamespacedEvent({
          namespace: 'default',
          fieldSelector: 'involvedObject.kind=Node,involvedObject.name=unverified-1,type=Warning',
        });
        return events.items.some((e) => e.reason === 'InvalidToken');
      },
      { what: 'an InvalidToken Warning on unverified-1', timeoutMs: 60_000 },
    );
    // Once Ready (the lifecycle controller's not-ready taint gone), the quarantine is its only taint.
    await waitFor(
      async () => {
        const n = await readNode('unverified-1');
        return (
          JSON.stringify(n.spec?.taints?.map((t) => `${t.key}:${t.effect}`)) ===
          JSON.stringify([`${QUARANTINE}:NoSchedule`])
        );
      },
      { what: 'unverified-1 to be Ready with only the quarantine taint', timeoutMs: 60_000 },
    );
    // It tolerates the flavor's taint, selects the unverified node, and lacks only the quarantine toleration.
    await createPod('drifter', {
      nodeSelector: { 'kubernetes.io/hostname': 'unverified-1' },
      tolerations: [{ key: 'nodeflavor.io/dedicated', operator: 'Exists', effect: 'NoSchedule' }],
      containers: [{ name: 'app', image: PAUSE_IMAGE, imagePullPolicy: 'Never' }],
    });
    const why = await waitFor(async () => (await podScheduling('drifter')).unschedulable, {
      what: 'kube-scheduler to refuse drifter',
      timeoutMs: 60_000,
    });
    // kube-scheduler 1.37 counts the taint without naming it: the one node that matches the selector
    // (unverified-1, whose only taint is the quarantine) is the one with an untolerated taint.
    assert.match(why, /\b1 node\(s\) had untolerated taint/);
    assert.match(why, /\b2 node\(s\) didn't match Pod's node affinity\/selector/);
    assert.equal((await podScheduling('drifter')).node, undefined);
  });

  const droppedBy: [string, string, { taint: boolean; tokenLabel: boolean }][] = [
    ['bare-1', 'both the quarantine taint and the token label', { taint: true, tokenLabel: true }],
    ['untainted-1', 'the quarantine taint (the token label kept)', { taint: true, tokenLabel: false }],
  ];
  for (const [name, what, drop] of droppedBy) {
    it(`a node whose administrator dropped ${what} is quarantined from its first version; a waiting Pod never lands on it`, async () => {
      // A Pod already waiting for exactly this node, without the quarantine toleration.
      const waiter = `waiter-${name}`;
      await createPod(waiter, {
        nodeSelector: { 'kubernetes.io/hostname': name },
        containers: [{ name: 'app', image: PAUSE_IMAGE, imagePullPolicy: 'Never' }],
      });
      // A flavor without taints: once verified, nothing but the quarantine kept the Pod away.
      const issued = await issue(MILD);
      const discovery = JSON.parse(await issuerCall('GET', '/v1/discovery')) as { kubeconfig: string };
      const first = await firstVersionOf(env, name);
      const node = await host.startNode({
        name,
        joinConfiguration: rewritten(issued.joinConfiguration, drop),
        discoveryKubeconfig: discovery.kubeconfig,
      });
      await node.joined();
      const version = await first();
      assert.ok(
        (version.spec?.taints ?? []).some((t) => t.key === QUARANTINE && t.effect === 'NoSchedule'),
        `${name}'s first version is quarantined: ${JSON.stringify(version.spec?.taints)}`,
      );
      assert.equal(version.metadata?.labels?.[JOINED], 'true', `${name}'s first version is marked joined`);
      await ready(name);
      if (drop.tokenLabel) {
        // No flavor token: bound, never verified; the quarantine stays.
        await nodeWarning(name, 'MissingToken');
        const why = await waitFor(async () => (await podScheduling(waiter)).unschedulable, {
          what: `kube-scheduler to refuse ${waiter}`,
          timeoutMs: 60_000,
        });
        assert.match(why, /untolerated taint/);
        const now = await readNode(name);
        assert.ok(hasQuarantine(now), `${name} stays quarantined`);
      } else {
        // Its token checks out: verified, and only then the quarantine goes (the Pod may follow).
        await waitFor(
          async () => {
            const n = await readNode(name);
            return n.metadata?.labels?.['nodeflavor.io/flavor'] === MILD && !hasQuarantine(n) ? n : undefined;
          },
          { what: `${name} to be verified and lose the quarantine`, timeoutMs: 60_000 },
        );
      }
      const placed = await env.core.readNamespacedPod({ name: waiter, namespace: 'default' });
      if (drop.tokenLabel) assert.equal(placed.spec?.nodeName, undefined, `${waiter} was placed on ${name}`);
      await env.core.deleteNamespacedPod({ name: waiter, namespace: 'default', gracePeriodSeconds: 0 });
    });
  }

  it('the operator runs only on the marked system node, never on a verified node of a flavor without taints', async () => {
    const issued = await issue(MILD);
    const discovery = JSON.parse(await issuerCall('GET', '/v1/discovery')) as { kubeconfig: string };
    const first = await firstVersionOf(env, 'mild-1');
    const mild = await host.startNode({
      name: 'mild-1',
      joinConfiguration: issued.joinConfiguration,
      discoveryKubeconfig: discovery.kubeconfig,
    });
    await mild.joined();
    assert.equal((await first()).metadata?.labels?.[JOINED], 'true');
    const verified = await waitFor(
      async () => {
        const n = await readNode('mild-1');
        return n.metadata?.labels?.['nodeflavor.io/flavor'] === MILD && (n.spec?.taints ?? []).length === 0
          ? n
          : undefined;
      },
      { what: 'mild-1 to be verified with no taint left', timeoutMs: 90_000 },
    );
    assert.equal(verified.metadata?.labels?.[JOINED], 'true', 'the joined mark stays after verification');
    // Three replicas: the spread prefers another host for the third (mild-1 is the emptiest), but
    // the required affinity allows only the marked system node.
    await scaleOperator(3);
    const pods = await waitFor(
      async () => {
        const current = await operatorPods();
        return current.length === 3 && current.every((p) => p.spec?.nodeName) ? current : undefined;
      },
      { what: 'three operator pods to be scheduled', timeoutMs: 120_000 },
    );
    assert.deepEqual(
      pods.map((p) => p.spec?.nodeName),
      ['system-1', 'system-1', 'system-1'],
    );
  });

  it('then the flavored node alone: an operator pod with no trusted node to go to stays Pending', async () => {
    await markSystemNode(false);
    try {
      const [victim] = await operatorPods();
      await env.core.deleteNamespacedPod({ name: victim?.metadata?.name ?? '', namespace: NAMESPACE });
      const pending = await waitFor(
        async () => {
          const current = await operatorPods();
          const waiting = current.find((p) => !p.spec?.nodeName);
          const condition = waiting?.status?.conditions?.find((c) => c.type === 'PodScheduled');
          return condition?.status === 'False' && condition.reason === 'Unschedulable'
            ? condition
            : undefined;
        },
        { what: 'the replacement operator pod to be refused by kube-scheduler', timeoutMs: 90_000 },
      );
      assert.match(pending.message ?? '', /node affinity|selector/);
      assert.ok(
        (await operatorPods()).every((p) => p.spec?.nodeName === undefined || p.spec.nodeName === 'system-1'),
        'no operator pod on any node but the system node',
      );
    } finally {
      await markSystemNode(true);
    }
    // Marked again: it is placed there.
    await waitFor(
      async () => {
        const current = await operatorPods();
        return current.length === 3 && current.every((p) => p.spec?.nodeName === 'system-1');
      },
      { what: 'the pending operator pod to land on the re-marked system node', timeoutMs: 90_000 },
    );
    await scaleOperator(2);
  });

  it('a node whose flavor is revoked with StripNodes stops attracting new Pods; running ones stay', async () => {
    await kubeJson(
      env.kubeConfig,
      'PATCH',
      `/apis/nodeflavor.io/v1alpha1/flavoredtokens/${flavoredTokenId}`,
      { body: { spec: { revocationPolicy: 'StripNodes' } }, contentType: MERGE },
    );
    const issuer = await serviceAddress(env, NAMESPACE, `${RELEASE}-issuer`, 'https');
    const revoked = await serviceRequest(issuer, issuerCa, 'DELETE', `/v1/tokens/${flavoredTokenId}`, {
      bearer: portalToken,
    });
    assert.equal(revoked.status, 200, revoked.text);
    await waitFor(
      async () => {
        const n = await readNode('flavored-1');
        return n.metadata?.labels?.['nodeflavor.io/flavor'] === undefined && hasQuarantine(n);
      },
      { what: 'flavored-1 to be stripped and quarantined', timeoutMs: 60_000 },
    );
    await createPod('payments-2', readmeWorkloadSpec());
    const why = await waitFor(async () => (await podScheduling('payments-2')).unschedulable, {
      what: 'kube-scheduler to find no sweet node for payments-2',
      timeoutMs: 60_000,
    });
    assert.match(why, /node affinity|selector|nodeSelector/i);
    const running = await env.core.readNamespacedPod({ name: 'payments', namespace: 'default' });
    assert.equal(running.status?.phase, 'Running', 'NoSchedule must not evict the running workload');
  });

  it('helm uninstall leaves no webhook or admission policy behind', async () => {
    const before = await kubeJson<{ items: { metadata: { name: string } }[] }>(
      env.kubeConfig,
      'GET',
      '/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations',
    );
    assert.ok(
      before.items.some((w) => w.metadata.name === RELEASE),
      'the operator registered no webhook',
    );
    await helm('uninstall', RELEASE, '--wait', '--timeout', '120s');
    await waitFor(
      async () => {
        const [webhooks, policies] = await Promise.all([
          kubeJson<{ items: unknown[] }>(
            env.kubeConfig,
            'GET',
            '/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations',
          ),
          kubeJson<{ items: unknown[] }>(
            env.kubeConfig,
            'GET',
            '/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicies',
          ),
        ]);
        return webhooks.items.length === 0 && policies.items.length === 0;
      },
      { what: 'the admission registration to go with the release', timeoutMs: 60_000 },
    );
    // With the guard gone, the real kubelets still report in: nothing blocks the cluster.
    const status = await readNode('system-1');
    assert.equal(status.status?.conditions?.find((c) => c.type === 'Ready')?.status, 'True');
  });
});
