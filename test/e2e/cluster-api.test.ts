// Cluster API, for real: its core manager and kubeadm bootstrap provider (CABPK) built from the Go
// module proxy at the pinned version, with their own CRDs, run against a local control plane that
// is both the management and the workload cluster; `nodeflavor capi` runs as its ServiceAccount
// with deploy/capi's RBAC and pause policy; the workload cluster's nodeflavor issues the tokens; a
// stand-in infrastructure provider boots every Machine as a real node from its bootstrap data
// (cloud-init files and `kubeadm join`). One control plane and one set of managers serve every
// test below, in order. Needs root on Linux (real nodes) and `make tools`; elsewhere skipped with
// the reason.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { idempotencyKey, tokenDescription } from '../../src/capi/decide.ts';
import {
  CAPI_FINALIZER,
  FLAVOR_CLASS_ANNOTATION,
  NODE_NAME_ANNOTATION,
  TOKEN_CONDITION,
  TOKEN_ID_ANNOTATION,
  VERIFIED_CONDITION,
} from '../../src/capi/resources.ts';
import { kubeJson } from '../../src/runtime/fetch.ts';
import { skipUnless } from '../support/skip.ts';
import { kubeadmConfigTemplate, localMachineTemplate, machineDeployment } from './capi/cluster-objects.ts';
import { CapiFixture } from './capi/fixture.ts';
import { applyObjects } from './cluster/apply.ts';
import { freePort } from './cluster/ports.ts';
import { clusterApiMissing } from './cluster/versions.ts';
import { realNodesUnsupported } from './realnode/real-node.ts';
import { applyFlavorClass } from './support/nodeflavor.ts';
import { waitFor } from './support/wait.ts';

const unsupported = skipUnless(
  'the Cluster API suite (test/e2e/cluster-api.test.ts)',
  realNodesUnsupported() ?? clusterApiMissing(),
);
const NS = 'capi-e2e';
const CLUSTER = 'work';
const FLAVOR_LABEL = 'nodeflavor.io/flavor';
const PAUSED = 'cluster.x-k8s.io/paused';
const CAPI_API = `/apis/cluster.x-k8s.io/v1beta2/namespaces/${NS}`;
const BOOTSTRAP_API = `/apis/bootstrap.cluster.x-k8s.io/v1beta2/namespaces/${NS}`;

interface Condition {
  type: string;
  status: string;
  reason?: string;
  message?: string;
}
interface Meta {
  name: string;
  uid: string;
  annotations?: Record<string, string>;
  labels?: Record<string, string>;
  finalizers?: string[];
  ownerReferences?: { kind: string; name: string }[];
}
interface Machine {
  metadata: Meta;
  spec: { bootstrap: { configRef?: { name: string }; dataSecretName?: string } };
  status?: { nodeRef?: { name: string }; conditions?: Condition[] };
}
interface KubeadmConfig {
  metadata: Meta;
  spec: {
    joinConfiguration?: {
      discovery?: {
        file?: { kubeConfigPath: string };
        bootstrapToken?: { token?: string };
        tlsBootstrapToken?: string;
      };
    };
  };
  status?: { dataSecretName?: string; conditions?: Condition[] };
}

const condition = (object: { status?: { conditions?: Condition[] } }, type: string) =>
  object.status?.conditions?.find((c) => c.type === type);

describe('Cluster API: every Machine of a flavored MachineDeployment joins flavored', {
  skip: unsupported,
}, () => {
  let fx: CapiFixture;
  const get = <T>(path: string) => kubeJson<T>(fx.admin, 'GET', path);
  const machinesOf = async (deployment: string) =>
    (
      await get<{ items: Machine[] }>(
        `${CAPI_API}/machines?labelSelector=${encodeURIComponent(`cluster.x-k8s.io/deployment-name=${deployment}`)}`,
      )
    ).items;
  const configOf = (machine: Machine) =>
    get<KubeadmConfig>(`${BOOTSTRAP_API}/kubeadmconfigs/${machine.spec.bootstrap.configRef?.name}`);
  const flavoredToken = (tokenId: string) =>
    get<{
      spec: { flavorClassName: string; nodeName?: string; maxUses: number; revoked?: boolean };
      status?: { uses?: number };
    }>(`/apis/nodeflavor.io/v1alpha1/flavoredtokens/ft-${tokenId}`);
  const eventReasons = async (name: string) =>
    (
      await get<{ items: { reason: string; type: string }[] }>(
        `/api/v1/namespaces/${NS}/events?fieldSelector=${encodeURIComponent(`involvedObject.name=${name}`)}`,
      )
    ).items.map((e) => `${e.type}/${e.reason}`);
  const scale = (deployment: string, replicas: number) =>
    kubeJson(fx.admin, 'PATCH', `${CAPI_API}/machinedeployments/${deployment}`, {
      contentType: 'application/merge-patch+json',
      body: { spec: { replicas } },
    });
  /** Applies a MachineDeployment of this Cluster. */
  const deploy = (options: Omit<Parameters<typeof machineDeployment>[0], 'namespace' | 'cluster'>) =>
    applyObjects(fx.plane.kubeconfigPath, [
      machineDeployment({ namespace: NS, cluster: CLUSTER, ...options }),
    ]);
  /** Waits until the deployment has `count` Machines, each with a config condition `reason`. */
  const waitForConfigs = (deployment: string, count: number, reason: string, timeoutMs = 60_000) =>
    waitFor(
      async () => {
        const machines = await machinesOf(deployment);
        if (machines.length !== count) throw new Error(`${machines.length} Machines`);
        const configs = await Promise.all(machines.map(configOf));
        const seen = configs.map((c) => condition(c, TOKEN_CONDITION)?.reason ?? 'none');
        if (seen.some((r) => r !== reason)) throw new Error(`config conditions ${seen.join(', ')}`);
        return { machines, configs };
      },
      {
        what: `${count} Machines of ${deployment} whose KubeadmConfig says ${reason}`,
        timeoutMs,
        intervalMs: 500,
      },
    );
  /** Waits until the deployment has `count` Machines, all NodeFlavorVerified; their nodes as well. */
  const waitVerified = (deployment: string, count: number, timeoutMs = 150_000) =>
    waitFor(
      async () => {
        const machines = await machinesOf(deployment);
        const states = machines.map(
          (m) => `${m.metadata.name}: ${condition(m, VERIFIED_CONDITION)?.reason ?? 'none'}`,
        );
        const verified = machines.filter((m) => condition(m, VERIFIED_CONDITION)?.status === 'True');
        if (machines.length !== count || verified.length !== count)
          throw new Error(
            `${states.join('; ')}; provider failures: ${[...fx.provider.failures.values()].join('; ')}`,
          );
        return machines;
      },
      { what: `${count} verified Machines of ${deployment}`, timeoutMs, intervalMs: 500 },
    ).catch((error: Error) => {
      throw new Error(`${error.message}\n${fx.logs()}`);
    });

  before(async () => {
    fx = await CapiFixture.start({
      flavorClasses: {
        sweet: { labels: { [FLAVOR_LABEL]: 'sweet' } },
        sour: { labels: { [FLAVOR_LABEL]: 'sour' } },
      },
      cluster: { namespace: NS, name: CLUSTER },
      capiArgs: ['--status-poll-interval=2s', '--leader-elect-retry-period=500ms'],
    });
    await fx.allowFlavors(['sweet', 'bitter']);
    await applyObjects(fx.plane.kubeconfigPath, [
      localMachineTemplate(NS, 'local'),
      localMachineTemplate(NS, 'held', { hold: true }),
      // No pause here: nodeflavor's MutatingAdmissionPolicy pauses every flavored config it stamps out.
      kubeadmConfigTemplate(NS, 'sweet'),
      // The pause written in the template, for clusters without the policy.
      kubeadmConfigTemplate(NS, 'sour', { paused: true }),
      kubeadmConfigTemplate(NS, 'sour-v2', { paused: true }),
      kubeadmConfigTemplate(NS, 'bitter'),
      kubeadmConfigTemplate(NS, 'plain'),
    ]);
  });

  after(async () => {
    await fx?.stop();
  });

  let sweetMachines: Machine[] = [];

  it('waits visibly while the issuer is unreachable: paused, no bootstrap data, a condition and an Event', async () => {
    await fx.writeAccessSecret(`https://127.0.0.1:${await freePort()}`); // nothing listens there
    await deploy({
      name: 'sweet',
      replicas: 2,
      kubeadmConfigTemplate: 'sweet',
      localMachineTemplate: 'local',
      annotations: { [FLAVOR_CLASS_ANNOTATION]: 'sweet', [NODE_NAME_ANNOTATION]: 'machine' },
      readinessGates: [VERIFIED_CONDITION],
    });
    const { machines, configs } = await waitForConfigs('sweet', 2, 'IssuerUnreachable');
    for (const config of configs) {
      assert.ok(
        PAUSED in (config.metadata.annotations ?? {}),
        'the policy paused the config at its creation',
      );
      assert.equal(config.status?.dataSecretName, undefined, 'no bootstrap data exists');
      assert.ok(config.metadata.finalizers?.includes(CAPI_FINALIZER));
      assert.ok((await eventReasons(config.metadata.name)).includes('Warning/IssuerUnreachable'));
    }
    await waitFor(
      async () => {
        const fresh = await machinesOf('sweet');
        return fresh.every((m) => condition(m, VERIFIED_CONDITION)?.reason === 'IssuerUnreachable') && fresh;
      },
      { what: 'the Machines to mirror IssuerUnreachable', timeoutMs: 30_000 },
    );
    for (const machine of machines) assert.equal(machine.spec.bootstrap.dataSecretName, undefined);
  });

  it('once the issuer answers, each Machine joins with its own single-use token pinned to its name, verified', async () => {
    await fx.writeAccessSecret();
    sweetMachines = await waitVerified('sweet', 2);
    const tokenIds = new Set<string>();
    for (const machine of sweetMachines) {
      const config = await configOf(machine);
      assert.equal(condition(config, TOKEN_CONDITION)?.reason, 'Issued', 'the wait cleared itself');
      const tokenId = config.metadata.annotations?.[TOKEN_ID_ANNOTATION] ?? '';
      tokenIds.add(tokenId);
      const token = await flavoredToken(tokenId);
      assert.equal(token.spec.flavorClassName, 'sweet');
      assert.equal(token.spec.maxUses, 1);
      assert.equal(token.spec.nodeName, machine.metadata.name, 'pinned to the Machine name');
      // File discovery: CABPK has no token of its own to mint, refresh or rotate.
      const discovery = config.spec.joinConfiguration?.discovery;
      assert.equal(discovery?.file?.kubeConfigPath, '/etc/kubernetes/nodeflavor-discovery.conf');
      assert.equal(discovery?.bootstrapToken, undefined);
      const node = await fx.env.core.readNode({ name: machine.status?.nodeRef?.name ?? '' });
      assert.equal(node.metadata?.name, machine.metadata.name);
      assert.equal(node.metadata?.labels?.[FLAVOR_LABEL], 'sweet');
      assert.equal(node.metadata?.labels?.['nodeflavor.io/token'], undefined);
      assert.ok(!node.spec?.taints?.some((t) => t.key === 'nodeflavor.io/unverified'));
      assert.ok((await eventReasons(machine.metadata.name)).includes(`Normal/${VERIFIED_CONDITION}`));
    }
    assert.equal(tokenIds.size, 2, 'one token per Machine');
    // What a crash between the issuance and the fill amounts to: the same request again, with the
    // same Idempotency-Key, from the same identity: the issuer answers the same token, no second one.
    const [first] = sweetMachines;
    assert.ok(first);
    const config = await configOf(first);
    const { name, uid, annotations } = config.metadata;
    const cached = { metadata: { name, uid, namespace: NS, ...(annotations ? { annotations } : {}) } };
    const client = await fx.issuerClient();
    try {
      // The identity's rate budget is shared with nodeflavor capi's own checks: a 429 is retried.
      const replayed = await waitFor(
        () =>
          client.issue(
            {
              flavorClassName: 'sweet',
              ttl: '24h',
              maxUses: 1,
              nodeName: first.metadata.name,
              description: tokenDescription(cached),
            },
            idempotencyKey(cached),
          ),
        { what: 'the replayed issuance', timeoutMs: 30_000, intervalMs: 1_000 },
      );
      assert.equal(replayed.tokenID, config.metadata.annotations?.[TOKEN_ID_ANNOTATION]);
    } finally {
      client.close();
    }
    // Cluster API's Ready summary takes the readiness gate in: every Machine Ready once verified.
    await waitFor(
      async () => (await machinesOf('sweet')).every((m) => condition(m, 'Ready')?.status === 'True'),
      {
        what: 'the verified Machines to be Ready (their readiness gate NodeFlavorVerified included)',
        timeoutMs: 30_000,
      },
    );
    const kubeadmTokens = await fx.kubeadmGroupTokens();
    assert.deepEqual(kubeadmTokens, [], 'CABPK minted no token for flavored Machines');
  });

  it('a flavor its issuer identity may not use waits as FlavorNotAllowed, then joins once allowed', async () => {
    await deploy({
      name: 'sour',
      replicas: 1,
      kubeadmConfigTemplate: 'sour',
      localMachineTemplate: 'local',
      annotations: { [FLAVOR_CLASS_ANNOTATION]: 'sour' },
    });
    const { configs } = await waitForConfigs('sour', 1, 'FlavorNotAllowed');
    const [config] = configs;
    assert.ok(config && (await eventReasons(config.metadata.name)).includes('Warning/FlavorNotAllowed'));
    assert.equal(config.status?.dataSecretName, undefined);
    await fx.allowFlavors(['sweet', 'sour', 'bitter']);
    const [machine] = await waitVerified('sour', 1);
    const node = await fx.env.core.readNode({ name: machine?.status?.nodeRef?.name ?? '' });
    assert.equal(node.metadata?.labels?.[FLAVOR_LABEL], 'sour');
  });

  it('a missing FlavorClass waits visibly; a Machine scaled away before its join gets its token revoked', async () => {
    await deploy({
      name: 'bitter',
      replicas: 1,
      kubeadmConfigTemplate: 'bitter',
      localMachineTemplate: 'held', // its machine never boots, as on a slow cloud
      annotations: { [FLAVOR_CLASS_ANNOTATION]: 'bitter' },
    });
    await waitForConfigs('bitter', 1, 'FlavorClassNotFound');
    await applyFlavorClass(fx.env, 'bitter', { labels: { [FLAVOR_LABEL]: 'bitter' } });
    const { configs } = await waitForConfigs('bitter', 1, 'Issued');
    const tokenId = configs[0]?.metadata.annotations?.[TOKEN_ID_ANNOTATION] ?? '';
    assert.equal((await flavoredToken(tokenId)).spec.revoked ?? false, false);
    await scale('bitter', 0);
    await waitFor(async () => (await flavoredToken(tokenId)).spec.revoked === true, {
      what: `token ${tokenId} to be revoked after its Machine was scaled away`,
      timeoutMs: 60_000,
    });
    await waitFor(async () => (await machinesOf('bitter')).length === 0, {
      what: 'the bitter Machine and its KubeadmConfig to be gone (the finalizer released)',
      timeoutMs: 60_000,
    });
  });

  it('a rollout replaces the Machine with a newly flavored one and revokes the old token', async () => {
    const [old] = await machinesOf('sour');
    assert.ok(old);
    const oldToken = (await configOf(old)).metadata.annotations?.[TOKEN_ID_ANNOTATION] ?? '';
    await kubeJson(fx.admin, 'PATCH', `${CAPI_API}/machinedeployments/sour`, {
      contentType: 'application/merge-patch+json',
      body: { spec: { template: { spec: { bootstrap: { configRef: { name: 'sour-v2' } } } } } },
    });
    const [replacement] = await waitFor(
      async () => {
        const machines = await machinesOf('sour');
        const fresh = machines.filter((m) => m.metadata.name !== old.metadata.name);
        return (
          machines.length === 1 &&
          fresh.length === 1 &&
          condition(fresh[0] ?? {}, VERIFIED_CONDITION)?.status === 'True' &&
          fresh
        );
      },
      {
        what: 'the rollout to replace the sour Machine with a verified one',
        timeoutMs: 180_000,
        intervalMs: 500,
      },
    ).catch((error: Error) => {
      throw new Error(`${error.message}\n${fx.logs()}`);
    });
    assert.ok(replacement);
    const newToken = (await configOf(replacement)).metadata.annotations?.[TOKEN_ID_ANNOTATION];
    assert.notEqual(newToken, oldToken);
    await waitFor(async () => (await flavoredToken(oldToken)).spec.revoked === true, {
      what: `the replaced Machine's token ${oldToken} to be revoked`,
      timeoutMs: 60_000,
    });
  });

  it("a Machine's bootstrap data replayed on another machine after its join is refused", async () => {
    const [machine] = sweetMachines;
    assert.ok(machine);
    const booted = await fx.provider.booted.get(`${NS}/${machine.metadata.name}`);
    assert.ok(booted, 'the provider booted this Machine');
    const tokenId = (await configOf(machine)).metadata.annotations?.[TOKEN_ID_ANNOTATION] ?? '';
    // Once its node registered, the controller deletes the spent token's bootstrap Secret.
    await waitFor(
      async () =>
        await fx.env.core
          .readNamespacedSecret({ namespace: 'kube-system', name: `bootstrap-token-${tokenId}` })
          .then(
            () => false,
            () => true,
          ),
      { what: `token ${tokenId}'s bootstrap Secret to be deleted after its use`, timeoutMs: 150_000 },
    );
    await assert.rejects(fx.provider.boot('replayed', booted.bootstrapData), /kubeadm join exited [1-9]/);
    const [again] = (await machinesOf('sweet')).filter((m) => m.metadata.name === machine.metadata.name);
    assert.equal(condition(again ?? {}, VERIFIED_CONDITION)?.status, 'True', 'the Machine stays verified');
    assert.equal((await flavoredToken(tokenId)).status?.uses, 1, 'the token was used once, by its Machine');
    const node = await fx.env.core.readNode({ name: machine.metadata.name });
    assert.equal(node.metadata?.labels?.[FLAVOR_LABEL], 'sweet');
  });

  it('a MachineDeployment without the annotation joins the plain CABPK way, untouched by nodeflavor', async () => {
    await deploy({
      name: 'plain',
      replicas: 1,
      kubeadmConfigTemplate: 'plain',
      localMachineTemplate: 'local',
    });
    const [machine] = await waitFor(
      async () => {
        const machines = await machinesOf('plain');
        return machines.length === 1 && machines[0]?.status?.nodeRef && machines;
      },
      { what: 'the plain Machine to get its Node', timeoutMs: 150_000, intervalMs: 500 },
    ).catch((error: Error) => {
      throw new Error(`${error.message}\n${[...fx.provider.failures.values()].join('\n')}\n${fx.logs()}`);
    });
    assert.ok(machine);
    const config = await configOf(machine);
    assert.equal(config.metadata.finalizers?.includes(CAPI_FINALIZER) ?? false, false);
    assert.equal(config.metadata.annotations?.[TOKEN_ID_ANNOTATION], undefined);
    assert.equal(condition(config, TOKEN_CONDITION), undefined);
    assert.equal(condition(machine, VERIFIED_CONDITION), undefined);
    assert.ok(config.spec.joinConfiguration?.discovery?.bootstrapToken?.token, 'CABPK put its own token in');
    const node = await fx.env.core.readNode({ name: machine.status?.nodeRef?.name ?? '' });
    assert.equal(node.metadata?.labels?.[FLAVOR_LABEL], undefined);
    assert.equal(node.metadata?.labels?.['nodeflavor.io/joined'], undefined);
  });

  it('refuses a MachinePool with a condition, and never touches a control-plane KubeadmConfig', async () => {
    const pool = await kubeJson<{ metadata: Meta }>(fx.admin, 'POST', `${CAPI_API}/machinepools`, {
      body: {
        apiVersion: 'cluster.x-k8s.io/v1beta2',
        kind: 'MachinePool',
        metadata: { name: 'pool', namespace: NS, labels: { 'cluster.x-k8s.io/cluster-name': CLUSTER } },
        spec: {
          clusterName: CLUSTER,
          replicas: 0,
          template: {
            spec: {
              clusterName: CLUSTER,
              bootstrap: {
                configRef: { apiGroup: 'bootstrap.cluster.x-k8s.io', kind: 'KubeadmConfig', name: 'pool' },
              },
              infrastructureRef: {
                apiGroup: 'infrastructure.e2e.nodeflavor.io',
                kind: 'LocalMachine',
                name: 'pool',
              },
            },
          },
        },
      },
    });
    const kubeadmConfig = (name: string, extra: object) => ({
      apiVersion: 'bootstrap.cluster.x-k8s.io/v1beta2',
      kind: 'KubeadmConfig',
      spec: { joinConfiguration: { nodeRegistration: { kubeletExtraArgs: [{ name: 'v', value: '1' }] } } },
      ...extra,
      metadata: { name, namespace: NS, ...(extra as { metadata?: object }).metadata },
    });
    // The control plane's first: it is queued before the pool's, so once the pool's is refused
    // the control plane's has been decided too (an ignore needs no request).
    await kubeJson(fx.admin, 'POST', `${BOOTSTRAP_API}/kubeadmconfigs`, {
      body: kubeadmConfig('control-plane', {
        metadata: {
          labels: { 'cluster.x-k8s.io/cluster-name': CLUSTER, 'cluster.x-k8s.io/control-plane': '' },
          // Unpaused: the policy must leave it so; flavored: nodeflavor must leave it alone.
          annotations: { [FLAVOR_CLASS_ANNOTATION]: 'sweet' },
        },
      }),
    });
    await kubeJson(fx.admin, 'POST', `${BOOTSTRAP_API}/kubeadmconfigs`, {
      body: kubeadmConfig('pool', {
        metadata: {
          labels: { 'cluster.x-k8s.io/cluster-name': CLUSTER },
          annotations: { [FLAVOR_CLASS_ANNOTATION]: 'sweet' },
          ownerReferences: [
            {
              apiVersion: 'cluster.x-k8s.io/v1beta2',
              kind: 'MachinePool',
              name: 'pool',
              uid: pool.metadata.uid,
              controller: true,
            },
          ],
        },
      }),
    });
    const refused = await waitFor(
      async () => {
        const config = await get<KubeadmConfig>(`${BOOTSTRAP_API}/kubeadmconfigs/pool`);
        return condition(config, TOKEN_CONDITION)?.reason === 'MachinePoolUnsupported' && config;
      },
      { what: 'the MachinePool config to be refused', timeoutMs: 30_000 },
    );
    assert.equal(refused.metadata.annotations?.[TOKEN_ID_ANNOTATION], undefined);
    assert.ok(PAUSED in (refused.metadata.annotations ?? {}), 'still paused: no bootstrap data');
    assert.ok((await eventReasons('pool')).includes('Warning/MachinePoolUnsupported'));
    const controlPlane = await get<KubeadmConfig>(`${BOOTSTRAP_API}/kubeadmconfigs/control-plane`);
    assert.equal(condition(controlPlane, TOKEN_CONDITION), undefined);
    assert.equal(controlPlane.metadata.finalizers?.includes(CAPI_FINALIZER) ?? false, false);
    assert.equal(
      PAUSED in (controlPlane.metadata.annotations ?? {}),
      false,
      'the policy leaves control planes alone',
    );
  });

  it('warns on a FlavorClass whose keys Cluster API also syncs to Nodes (status condition and Event)', async () => {
    await applyFlavorClass(fx.env, 'clashing', { labels: { 'node.cluster.x-k8s.io/tier': 'gold' } });
    const stored = await waitFor(
      async () => {
        const fc = await get<{ metadata: Meta; status?: { conditions?: Condition[] } }>(
          '/apis/nodeflavor.io/v1alpha1/flavorclasses/clashing',
        );
        return condition(fc, 'ClusterAPISyncConflict')?.status === 'True' && fc;
      },
      { what: 'the FlavorClass condition ClusterAPISyncConflict', timeoutMs: 30_000 },
    );
    assert.match(
      condition(stored, 'ClusterAPISyncConflict')?.message ?? '',
      /node\.cluster\.x-k8s\.io\/tier/,
    );
    const events = await get<{ items: { reason: string; type: string }[] }>(
      `/api/v1/namespaces/default/events?fieldSelector=${encodeURIComponent('involvedObject.name=clashing')}`,
    );
    assert.ok(events.items.some((e) => e.type === 'Warning' && e.reason === 'ClusterAPISyncConflict'));
    await applyFlavorClass(fx.env, 'clashing', { labels: { 'example.com/tier': 'gold' } });
    await waitFor(
      async () => {
        const fc = await get<{ status?: { conditions?: Condition[] } }>(
          '/apis/nodeflavor.io/v1alpha1/flavorclasses/clashing',
        );
        return condition(fc, 'ClusterAPISyncConflict') === undefined;
      },
      { what: 'the condition to clear once the key moved out of Cluster API’s domains', timeoutMs: 30_000 },
    );
  });
});
