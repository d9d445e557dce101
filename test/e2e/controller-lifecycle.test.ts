// Keeping flavors true after the join: drift is repaired, forged flavors are stripped,
// FlavorClass edits reach their nodes, revocation and deletion follow revocationPolicy, and a
// re-created node does not inherit its predecessor's flavor.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { PatchStrategy, setHeaderOptions } from '@kubernetes/client-node';
import pino from 'pino';
import { Registry } from 'prom-client';
import { parseConfig } from '../../src/config.ts';
import { type ControllerHandle, startController } from '../../src/controller/manager.ts';
import type { SimulatedKubelet } from './kubelet-sim/kubelet.ts';
import { createBootstrapToken, joinConfiguration } from './support/bootstrap.ts';
import { prepareOperatorIdentity } from './support/chart.ts';
import { type E2EEnvironment, e2eEnvironment } from './support/environment.ts';
import {
  applyFlavorClass,
  customObjects,
  ensureNamespace,
  installCrds,
  issue,
  joinWith,
  OPERATOR_NAMESPACE,
} from './support/nodeflavor.ts';
import { uniqueName, waitFor } from './support/wait.ts';

const FLAVOR_LABEL = 'nodeflavor.io/flavor';
const QUARANTINE = 'nodeflavor.io/unverified';
const mergePatch = setHeaderOptions('Content-Type', PatchStrategy.MergePatch);

describe('controller: keeping flavors true', () => {
  let env: E2EEnvironment;
  let controller: ControllerHandle;
  const kubelets: SimulatedKubelet[] = [];
  const flavor = uniqueName('keep');

  before(async () => {
    env = await e2eEnvironment();
    await installCrds(env);
    await ensureNamespace(env, OPERATOR_NAMESPACE);
    await applyFlavorClass(env, flavor, { labels: { [FLAVOR_LABEL]: flavor, 'example.com/tier': 'gold' } });
    const config = parseConfig({
      namespace: OPERATOR_NAMESPACE,
      leaderElect: false,
      bindingGrace: '3s',
      orphanGrace: '2s',
    });
    // As the Helm chart's ServiceAccount, so the chart's RBAC is what these tests exercise.
    const { kubeConfig } = await prepareOperatorIdentity(env);
    controller = startController({
      kubeConfig,
      config,
      registry: new Registry(),
      log: pino({ level: 'warn' }),
    });
    await controller.synced;
  });
  after(async () => {
    for (const kubelet of kubelets) kubelet.stop();
    await controller?.stop();
  });

  const labelsOf = async (name: string) => (await env.core.readNode({ name })).metadata?.labels ?? {};
  const quarantined = async (name: string) =>
    (await env.core.readNode({ name })).spec?.taints?.some((t) => t.key === QUARANTINE) ?? false;
  const patchNodeLabels = (name: string, labels: Record<string, string | null>) =>
    env.core.patchNode({ name, body: { metadata: { labels } } }, mergePatch);
  const tokens = () => customObjects(env.kubeConfig);
  const patchToken = (name: string, spec: Record<string, unknown>) =>
    tokens().patchClusterCustomObject(
      { group: 'nodeflavor.io', version: 'v1alpha1', plural: 'flavoredtokens', name, body: { spec } },
      mergePatch,
    );

  async function flavoredNode(): Promise<{ name: string; tokenName: string; kubelet: SimulatedKubelet }> {
    const token = await issue(env, flavor);
    const name = uniqueName('kept');
    const kubelet = await joinWith(token.material, name);
    kubelets.push(kubelet);
    await waitFor(async () => (await labelsOf(name))[FLAVOR_LABEL] === flavor, {
      what: `${name} to be flavored`,
    });
    return { name, tokenName: token.name, kubelet };
  }

  it('restores a trusted label that was removed or changed', async () => {
    const { name } = await flavoredNode();
    await patchNodeLabels(name, { 'example.com/tier': null });
    await waitFor(async () => (await labelsOf(name))['example.com/tier'] === 'gold', {
      what: 'the removed label to be restored',
    });
    await patchNodeLabels(name, { 'example.com/tier': 'platinum' });
    await waitFor(async () => (await labelsOf(name))['example.com/tier'] === 'gold', {
      what: 'the changed label to be restored',
    });
  });

  it('strips a flavor label from a node that has no verified binding, and quarantines it', async () => {
    const plain = await createBootstrapToken(env);
    const name = uniqueName('plain');
    const kubelet = await joinWith(joinConfiguration(env, plain.token), name);
    kubelets.push(kubelet);
    assert.equal(await quarantined(name), false, 'an unmanaged node is left alone');
    await patchNodeLabels(name, { [FLAVOR_LABEL]: flavor });
    await waitFor(async () => (await labelsOf(name))[FLAVOR_LABEL] === undefined, {
      what: 'the forged flavor label to be removed',
    });
    assert.ok(await quarantined(name));
  });

  it('FlavorClass edits reach its nodes (added, changed and dropped keys)', async () => {
    const { name } = await flavoredNode();
    await applyFlavorClass(env, flavor, { labels: { [FLAVOR_LABEL]: flavor, 'example.com/zone': 'a' } });
    await waitFor(
      async () => {
        const labels = await labelsOf(name);
        return labels['example.com/zone'] === 'a' && labels['example.com/tier'] === undefined;
      },
      { what: 'the class edit to reach the node' },
    );
    await applyFlavorClass(env, flavor, { labels: { [FLAVOR_LABEL]: flavor, 'example.com/tier': 'gold' } });
    await waitFor(async () => (await labelsOf(name))['example.com/tier'] === 'gold', {
      what: 'the class to be restored',
    });
  });

  it('revoking with StripNodes strips the flavor and restores the quarantine', async () => {
    const { name, tokenName } = await flavoredNode();
    await patchToken(tokenName, { revocationPolicy: 'StripNodes' });
    await patchToken(tokenName, { revoked: true });
    await waitFor(async () => (await labelsOf(name))[FLAVOR_LABEL] === undefined, {
      what: 'the revoked flavor to be stripped',
    });
    assert.ok(await quarantined(name));
  });

  it('revoking with Keep leaves joined nodes flavored', async () => {
    const { name, tokenName } = await flavoredNode();
    await patchToken(tokenName, { revoked: true });
    await waitFor(
      async () => {
        const record = (await tokens().getClusterCustomObject({
          group: 'nodeflavor.io',
          version: 'v1alpha1',
          plural: 'flavoredtokens',
          name: tokenName,
        })) as {
          status?: { conditions?: { type: string; status: string }[] };
        };
        return record.status?.conditions?.some((c) => c.type === 'Revoked' && c.status === 'True');
      },
      { what: 'the token to be marked Revoked' },
    );
    assert.equal((await labelsOf(name))[FLAVOR_LABEL], flavor);
  });

  it('deleting a token (Keep) revokes it and its nodes keep their flavor; (StripNodes) strips them', async () => {
    const kept = await flavoredNode();
    const stripped = await flavoredNode();
    await patchToken(stripped.tokenName, { revocationPolicy: 'StripNodes' });
    for (const name of [kept.tokenName, stripped.tokenName]) {
      await tokens().deleteClusterCustomObject({
        group: 'nodeflavor.io',
        version: 'v1alpha1',
        plural: 'flavoredtokens',
        name,
      });
    }
    for (const name of [kept.tokenName, stripped.tokenName]) {
      await waitFor(
        async () =>
          (await tokens()
            .getClusterCustomObject({
              group: 'nodeflavor.io',
              version: 'v1alpha1',
              plural: 'flavoredtokens',
              name,
            })
            .then(() => false)
            .catch(() => true)) || undefined,
        { what: `FlavoredToken ${name} to be gone (finalizer done)` },
      );
    }
    await waitFor(async () => (await labelsOf(stripped.name))[FLAVOR_LABEL] === undefined, {
      what: 'StripNodes to strip the node',
    });
    assert.ok(await quarantined(stripped.name));
    // The kept node survives a resync and a class edit.
    await applyFlavorClass(env, flavor, {
      labels: { [FLAVOR_LABEL]: flavor, 'example.com/tier': 'gold', 'example.com/kept': 'yes' },
    });
    await waitFor(async () => (await labelsOf(kept.name))['example.com/kept'] === 'yes', {
      what: 'the kept node to follow its class',
    });
    assert.equal((await labelsOf(kept.name))[FLAVOR_LABEL], flavor);
  });

  it('a keyed issuance never completed is cleaned up; a plain record is never deleted for lack of a mark, nor given a status', async () => {
    const ref = { group: 'nodeflavor.io', version: 'v1alpha1', plural: 'flavoredtokens' };
    const record = (name: string, annotations: Record<string, string>) => ({
      apiVersion: 'nodeflavor.io/v1alpha1',
      kind: 'FlavoredToken',
      metadata: { name, labels: { 'nodeflavor.io/token-id': name.slice(3) }, annotations },
      spec: { flavorClassName: flavor, ttl: '1h' },
    });
    // A plain issuance is two writes (ADR 0015): its record carries no mark, ever.
    const plain = `ft-${uniqueName('p').slice(-6)}`;
    await tokens().createClusterCustomObject({ ...ref, body: record(plain, {}) });
    // A keyed issuance (ADR 0005) whose client never retried: its record was never marked issued.
    const keyed = `ft-${uniqueName('x').slice(-6)}`;
    await tokens().createClusterCustomObject({
      ...ref,
      body: record(keyed, { 'nodeflavor.io/idempotency': 'v1:abandoned' }),
    });
    await waitFor(
      async () =>
        (await tokens()
          .getClusterCustomObject({ ...ref, name: keyed })
          .then(() => false)
          .catch(() => true)) || undefined,
      { what: 'the half-made keyed FlavoredToken to be deleted', timeoutMs: 20_000 },
    );
    // Reconciled before the keyed one's grace ran out: still there, and nothing written to it.
    const kept = (await tokens().getClusterCustomObject({ ...ref, name: plain })) as {
      metadata: { finalizers?: string[] };
      status?: object;
    };
    assert.equal(kept.status, undefined, 'no status for a token nothing has happened to');
    assert.ok(kept.metadata.finalizers?.includes('nodeflavor.io/revoke'), 'taken in (finalizer)');
    await tokens().deleteClusterCustomObject({ ...ref, name: plain });
  });

  it('a re-created node with the same name does not inherit the flavor (its binding was released)', async () => {
    const { name, kubelet } = await flavoredNode();
    await env.core.deleteNode({ name });
    await waitFor(async () => (await env.core.readNode({ name }).catch(() => undefined)) === undefined, {
      what: 'the node to be deleted',
    });
    await kubelet.register();
    await waitFor(
      async () => {
        const events = await env.core.listNamespacedEvent({
          namespace: 'default',
          fieldSelector: `involvedObject.name=${name}`,
        });
        return events.items.find((e) => e.reason === 'NoBinding');
      },
      { what: 'a NoBinding warning: the token has no binding for the new Node' },
    );
    assert.equal((await labelsOf(name))[FLAVOR_LABEL], undefined);
    assert.ok(await quarantined(name));
  });
});
