// The controller on the real control plane: tokens issued, simulated kubelets joining with the
// issued JoinConfiguration, flavors applied (or refused) from what the API server authenticated.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import pino from 'pino';
import { Registry } from 'prom-client';
import { parseConfig } from '../../src/config.ts';
import { type ControllerHandle, startController } from '../../src/controller/manager.ts';
import { FLAVOR_TOKEN_LENGTH } from '../../src/flavor/flavor-token.ts';
import { VERIFIED_ANNOTATION } from '../../src/flavor/verdict.ts';
import type { SimulatedKubelet } from './kubelet-sim/kubelet.ts';
import { prepareOperatorIdentity } from './support/chart.ts';
import { type E2EEnvironment, e2eEnvironment } from './support/environment.ts';
import {
  applyFlavorClass,
  customObjects,
  ensureNamespace,
  installCrds,
  issue,
  type JoinFiles,
  joinWith,
  OPERATOR_NAMESPACE,
} from './support/nodeflavor.ts';
import { uniqueName, waitFor } from './support/wait.ts';

const TOKEN_LABEL = 'nodeflavor.io/token';
const QUARANTINE = 'nodeflavor.io/unverified';

describe('controller: a node flavor is what the API server authenticated', () => {
  let env: E2EEnvironment;
  let controller: ControllerHandle;
  const registry = new Registry();
  const kubelets: SimulatedKubelet[] = [];
  const sweet = uniqueName('sweet');
  const sour = uniqueName('sour');

  before(async () => {
    env = await e2eEnvironment();
    await installCrds(env);
    await ensureNamespace(env, OPERATOR_NAMESPACE);
    await applyFlavorClass(env, sweet, {
      labels: { 'nodeflavor.io/flavor': sweet, 'example.com/tier': 'gold' },
      annotations: { 'example.com/flavor-note': 'trusted' },
      taints: [{ key: 'example.com/dedicated', value: 'sweet', effect: 'NoSchedule' }],
    });
    await applyFlavorClass(env, sour, { labels: { 'nodeflavor.io/flavor': sour } });
    const config = parseConfig({
      namespace: OPERATOR_NAMESPACE,
      leaderElect: false,
      bindingGrace: '3s',
      webhook: false,
      issuer: false,
    });
    // As the Helm chart's ServiceAccount, so the chart's RBAC is what these tests exercise.
    const { kubeConfig } = await prepareOperatorIdentity(env);
    controller = startController({
      kubeConfig,
      config,
      registry,
      log: pino({ level: 'warn' }),
    });
    await controller.synced;
  });
  after(async () => {
    for (const kubelet of kubelets) kubelet.stop();
    await controller?.stop();
  });

  async function join(material: JoinFiles, name: string, options: { timeoutMs?: number } = {}) {
    const kubelet = await joinWith(material, name, options);
    kubelets.push(kubelet);
    return kubelet;
  }

  function node(name: string) {
    return env.core.readNode({ name });
  }

  async function waitForFlavor(name: string, flavor: string) {
    return waitFor(
      async () => {
        const n = await node(name);
        return n.metadata?.labels?.['nodeflavor.io/flavor'] === flavor ? n : undefined;
      },
      { what: `node ${name} to get flavor ${flavor}`, timeoutMs: 30_000 },
    );
  }

  async function waitForWarning(name: string, reason: string) {
    return waitFor(
      async () => {
        const events = await env.core.listNamespacedEvent({
          namespace: 'default',
          fieldSelector: `involvedObject.name=${name}`,
        });
        return events.items.find((e) => e.type === 'Warning' && e.reason === reason);
      },
      { what: `a Warning ${reason} event for ${name}`, timeoutMs: 30_000 },
    );
  }

  async function assertUnflavored(name: string) {
    const n = await node(name);
    assert.equal(n.metadata?.labels?.['nodeflavor.io/flavor'], undefined, 'no flavor label');
    assert.equal(n.metadata?.labels?.['example.com/tier'], undefined, 'no class label');
    assert.ok(
      n.spec?.taints?.some((t) => t.key === QUARANTINE),
      'the quarantine taint stays',
    );
  }

  it('sweet and sour tokens flavor exactly their nodes', async () => {
    const sweetToken = await issue(env, sweet);
    const sourToken = await issue(env, sour);
    const sweetNode = uniqueName('sweet-node');
    const sourNode = uniqueName('sour-node');
    await join(sweetToken.material, sweetNode);
    await join(sourToken.material, sourNode);

    const flavored = await waitForFlavor(sweetNode, sweet);
    assert.equal(flavored.metadata?.labels?.['example.com/tier'], 'gold');
    assert.equal(flavored.metadata?.annotations?.['example.com/flavor-note'], 'trusted');
    assert.equal(flavored.metadata?.labels?.[TOKEN_LABEL], undefined, 'the token label is removed');
    assert.ok(!flavored.spec?.taints?.some((t) => t.key === QUARANTINE), 'the quarantine taint is lifted');
    assert.ok(flavored.spec?.taints?.some((t) => t.key === 'example.com/dedicated' && t.value === 'sweet'));
    const verified = JSON.parse(flavored.metadata?.annotations?.[VERIFIED_ANNOTATION] ?? '{}');
    assert.equal(verified.tokenID, sweetToken.tokenId);
    assert.equal(verified.flavorClass, sweet);

    const sourFlavored = await waitForFlavor(sourNode, sour);
    assert.equal(sourFlavored.metadata?.labels?.['example.com/tier'], undefined);

    // What a nodeSelector on the flavor label would select: only the right node.
    const selected = await env.core.listNode({ labelSelector: `nodeflavor.io/flavor=${sweet}` });
    assert.deepEqual(
      selected.items.map((n) => n.metadata?.name),
      [sweetNode],
    );

    // The token is consumed (single use): its bootstrap Secret is gone, its status says so.
    await waitFor(
      async () => {
        const secret = await env.core
          .readNamespacedSecret({ namespace: 'kube-system', name: `bootstrap-token-${sweetToken.tokenId}` })
          .catch(() => undefined);
        return secret === undefined;
      },
      { what: 'the consumed bootstrap Secret to be deleted' },
    );
    const record = (await customObjects(env.kubeConfig).getClusterCustomObject({
      group: 'nodeflavor.io',
      version: 'v1alpha1',
      plural: 'flavoredtokens',
      name: sweetToken.name,
    })) as {
      status: {
        uses: number;
        bindings: { nodeName: string; verifiedAt?: string }[];
        conditions: { type: string; status: string }[];
      };
    };
    assert.equal(record.status.uses, 1);
    assert.equal(record.status.bindings[0]?.nodeName, sweetNode, 'the use names the join');
    assert.equal(record.status.conditions.find((c) => c.type === 'Consumed')?.status, 'True');
    // What became of the join is on its record (ADR 0016): this Node, verified.
    const joinRecord = (
      (await customObjects(env.kubeConfig).getClusterCustomObject({
        group: 'nodeflavor.io',
        version: 'v1alpha1',
        plural: 'nodenameclaims',
        name: sweetNode,
      })) as { status?: { join?: { tokenID?: string; nodeUID?: string; verifiedAt?: string } } }
    ).status?.join;
    assert.equal(joinRecord?.tokenID, sweetToken.tokenId);
    assert.equal(joinRecord?.nodeUID, flavored.metadata?.uid);
    assert.ok(joinRecord?.verifiedAt, 'the record says verified');
  });

  it("a sour node presenting the sweet node's flavor token gets nothing", async () => {
    const sweetToken = await issue(env, sweet);
    const sourToken = await issue(env, sour);
    const stolen = sweetToken.flavorToken.reveal();
    const name = uniqueName('thief');
    // The sour token's join config, with the sweet flavor token swapped in.
    const material = {
      ...sourToken.material,
      joinConfiguration: sourToken.material.joinConfiguration.replace(
        /nodeflavor\.io\/token=[a-z2-7]{52}/,
        `nodeflavor.io/token=${stolen}`,
      ),
    };
    assert.notEqual(material.joinConfiguration, sourToken.material.joinConfiguration);
    await join(material, name);
    await waitForWarning(name, 'InvalidToken');
    await assertUnflavored(name);
  });

  it('a node with no token label gets nothing', async () => {
    const token = await issue(env, sweet);
    const name = uniqueName('no-label');
    const material = {
      ...token.material,
      joinConfiguration: token.material.joinConfiguration.replace(
        /nodeflavor\.io\/token=[a-z2-7]{52}/,
        'example.com/other=x',
      ),
    };
    await join(material, name);
    await waitForWarning(name, 'MissingToken');
    await assertUnflavored(name);
  });

  it('a random 52-character token gets nothing', async () => {
    const token = await issue(env, sweet);
    const name = uniqueName('random');
    const random = 'a'.repeat(FLAVOR_TOKEN_LENGTH);
    await join(
      {
        ...token.material,
        joinConfiguration: token.material.joinConfiguration.replace(
          /nodeflavor\.io\/token=[a-z2-7]{52}/,
          `nodeflavor.io/token=${random}`,
        ),
      },
      name,
    );
    await waitForWarning(name, 'InvalidToken');
    await assertUnflavored(name);
  });

  it('a second node joining with a single-use token is not bound', async () => {
    const token = await issue(env, sweet);
    const first = uniqueName('first');
    const second = uniqueName('second');
    await join(token.material, first);
    await waitForFlavor(first, sweet);
    // Refused either way, and never bound: by the API server once the consumed token's Secret is
    // gone (and its 10 s authentication cache has let go), or by the controller before that.
    await assert.rejects(
      join(token.material, second, { timeoutMs: 3000 }),
      /401 Unauthorized|denied: NoUsesLeft/,
    );
    await assert.rejects(node(second), 'no Node: no certificate was issued');
  });

  it('a second node racing the first on a single-use token: only one is bound', async () => {
    const token = await issue(env, sweet);
    const names = [uniqueName('race-a'), uniqueName('race-b')];
    const results = await Promise.allSettled(names.map((n) => join(token.material, n)));
    const joined = names.filter((_n, i) => results[i]?.status === 'fulfilled');
    assert.ok(joined.length >= 1);
    const winner = await waitFor(
      async () => {
        for (const n of joined) {
          if ((await node(n)).metadata?.labels?.['nodeflavor.io/flavor'] === sweet) return n;
        }
        return undefined;
      },
      { what: 'one racer to be flavored' },
    );
    for (const loser of joined.filter((n) => n !== winner)) {
      await waitForWarning(loser, 'NoUsesLeft');
      await assertUnflavored(loser);
    }
  });

  it('a node joining after expiry fails to join', async () => {
    const token = await issue(env, sweet, { ttl: '5s' });
    await waitFor(async () => Date.now() > Date.parse(token.expiresAt) + 1000, {
      what: 'the token to expire',
      timeoutMs: 15_000,
    });
    await assert.rejects(join(token.material, uniqueName('late'), { timeoutMs: 3000 }), /401 Unauthorized/);
  });

  it('a name outside nodeNamePattern gets nothing: the CSR is denied, the token warns', async () => {
    const token = await issue(env, sweet, { nodeNamePattern: 'pool-a-*' });
    const name = uniqueName('pool-b');
    await assert.rejects(join(token.material, name), /denied: NodeNameMismatch/);
    await waitForWarning(token.name, 'NodeNameMismatch');
    await assert.rejects(node(name), 'no Node: no certificate was issued');
  });

  it('a second token claiming a joined node name is denied NameTaken; the first keeps its flavor', async () => {
    const a = await issue(env, sweet);
    const b = await issue(env, sweet);
    const name = uniqueName('claimed');
    await join(a.material, name);
    await waitForFlavor(name, sweet);
    await assert.rejects(join(b.material, name), /denied: NameTaken/);
    await waitForWarning(b.name, 'NameTaken');
    assert.equal((await node(name)).metadata?.labels?.['nodeflavor.io/flavor'], sweet);
  });

  it('metrics show the verification counters moving', async () => {
    const text = await registry.metrics();
    assert.match(text, /nodeflavor_verifications_total\{result="verified",reason="Verified"\} [1-9]/);
    assert.match(text, /nodeflavor_verifications_total\{result="rejected",reason="InvalidToken"\} [1-9]/);
    assert.match(text, /nodeflavor_join_to_flavored_seconds_count [1-9]/);
  });
});
