// Two kube-apiservers on one etcd behind a round-robin load balancer (this file's own control
// plane, `apiServers: 2`). Each API server caches a successful bootstrap-token authentication for
// 10 s on its own, so a token whose Secret is deleted right after use still works on the API
// server that just saw it and fails at once on the other. Simulated kubelets open a new
// connection for every request, so their discovery, CSR and certificate polls alternate between
// the two API servers, as separate clients (kubeadm, the kubelet's bootstrap client) do behind a
// load balancer. Every join must succeed with single-use tokens (before the fix the Secret went
// at binding, and a poll that reached the other API server got 401), every node ends flavored
// with its token used once, and every consumed token's Secret is still deleted, once its node
// registered with its own credentials.
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { before, describe, it } from 'node:test';
import { bootstrapSecretName } from '../../src/flavor/bootstrap-token.ts';
import type { IssuedToken } from '../../src/tokenissuer/issuance/issue.ts';
import { skipUnless } from '../support/skip.ts';
import type { ControlPlane } from './cluster/controlplane.ts';
import { binaryPaths } from './cluster/versions.ts';
import type { E2EEnvironment } from './support/environment.ts';
import { customObjects, issue, joinWith } from './support/nodeflavor.ts';
import { labelOnly, operatorFixture, waitAllFlavored } from './support/operator-fixture.ts';
import { uniqueName, waitFor } from './support/wait.ts';

const NODES = 30;
const CONCURRENCY = 5;

const paths = binaryPaths();
const local = [paths.etcd, paths.kubeApiserver, paths.kubeControllerManager].every((p) => existsSync(p));

describe('two kube-apiservers behind a load balancer: joins never lose their bootstrap token', {
  skip: skipUnless(
    'test/e2e/fault-two-apiservers.test.ts',
    !local && 'needs the locally built control-plane binaries',
  ),
}, () => {
  const flavor = uniqueName('two-apis');
  const fx = operatorFixture({
    logPrefix: 'nodeflavor-two-apiservers-',
    flavorClasses: labelOnly(flavor),
    controlPlane: { apiServers: 2 },
  });
  const { kubelets } = fx;
  let plane: ControlPlane | undefined;
  let env: E2EEnvironment;

  before(() => {
    ({ plane, env } = fx);
    assert.equal(env.server, plane?.loadBalancer?.url, 'every helper goes through the load balancer');
  });

  async function secretExists(tokenId: string): Promise<boolean> {
    try {
      await env.core.readNamespacedSecret({ name: bootstrapSecretName(tokenId), namespace: 'kube-system' });
      return true;
    } catch {
      return false;
    }
  }

  it(`${NODES} single-use joins through both API servers all succeed; every Secret goes once its node registered`, async (t) => {
    fx.start(['--leader-elect']);
    const tokens: IssuedToken[] = [];
    for (let i = 0; i < NODES; i += CONCURRENCY)
      tokens.push(...(await Promise.all(Array.from({ length: CONCURRENCY }, () => issue(env, flavor)))));
    const names = tokens.map((_, i) => `${flavor}-${i}`);
    const before = [...(plane?.loadBalancer?.connections ?? [])];

    const failures: string[] = [];
    const registeredAt = new Map<string, number>();
    let next = 0;
    const started = Date.now();
    const worker = async () => {
      while (next < NODES) {
        const i = next++;
        const name = names[i] as string;
        try {
          kubelets.push(
            await joinWith((tokens[i] as IssuedToken).material, name, {
              timeoutMs: 60_000,
              connectionPerRequest: true,
            }),
          );
          registeredAt.set(name, Date.now());
        } catch (error) {
          failures.push(`${name}: ${(error as Error).message}`);
        }
      }
    };
    await Promise.all(Array.from({ length: CONCURRENCY }, worker));
    const after = plane?.loadBalancer?.connections ?? [];
    const spread = after.map((n, i) => n - (before[i] ?? 0));
    t.diagnostic(
      `${NODES - failures.length}/${NODES} joined in ${((Date.now() - started) / 1000).toFixed(1)} s; connections per API server during the joins: ${spread.join(', ')}`,
    );
    assert.deepEqual(failures, [], 'no join failed');
    assert.ok(
      spread.every((n) => n >= NODES),
      `both API servers served the joins (connections: ${spread.join(', ')})`,
    );

    await waitAllFlavored(env, flavor, names);

    // Consumed, and each node registered with its own certificate: every Secret goes (well
    // before the 2-minute grace for a node that never registers).
    const goneAt = new Map<string, number>();
    await waitFor(
      async () => {
        for (const [i, token] of tokens.entries()) {
          const name = names[i] as string;
          if (!goneAt.has(name) && !(await secretExists(token.tokenId))) goneAt.set(name, Date.now());
        }
        if (goneAt.size === NODES) return true;
        throw new Error(`${NODES - goneAt.size} bootstrap Secrets still exist`);
      },
      { what: 'every consumed bootstrap Secret to be deleted', timeoutMs: 60_000, intervalMs: 250 },
    );
    const lag = names.map((n) => ((goneAt.get(n) ?? 0) - (registeredAt.get(n) ?? 0)) / 1000);
    t.diagnostic(`Secret deleted after its node registered: at most ${Math.max(...lag).toFixed(1)} s`);

    const records = (await customObjects(env.kubeConfig).listClusterCustomObject({
      group: 'nodeflavor.io',
      version: 'v1alpha1',
      plural: 'flavoredtokens',
    })) as { items: { metadata: { name: string }; status?: { uses?: number } }[] };
    const uses = new Map(records.items.map((r) => [r.metadata.name, r.status?.uses ?? 0]));
    for (const token of tokens) assert.equal(uses.get(token.name), 1, `${token.name} used once`);
  });
});
