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
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { bootstrapSecretName } from '../../src/flavor/bootstrap-token.ts';
import type { IssuedToken } from '../../src/tokenissuer/issue.ts';
import { ControlPlane } from './cluster/controlplane.ts';
import type { ManagedProcess } from './cluster/process.ts';
import { binaryPaths } from './cluster/versions.ts';
import type { SimulatedKubelet } from './kubelet-sim/kubelet.ts';
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
  startOperator,
} from './support/nodeflavor.ts';
import { tempDirForThisProcess } from './support/temp-dir.ts';
import { uniqueName, waitFor } from './support/wait.ts';

const NODES = 30;
const CONCURRENCY = 5;
const FLAVOR_LABEL = 'nodeflavor.io/flavor';
const TOKEN_LABEL = 'nodeflavor.io/token';
const QUARANTINE = 'nodeflavor.io/unverified';

const paths = binaryPaths();
const local = [paths.etcd, paths.kubeApiserver, paths.kubeControllerManager].every((p) => existsSync(p));

describe('two kube-apiservers behind a load balancer: joins never lose their bootstrap token', {
  skip: !local && 'needs the locally built control-plane binaries',
}, () => {
  let plane: ControlPlane | undefined;
  let env: E2EEnvironment;
  let operator: ManagedProcess | undefined;
  const flavor = uniqueName('two-apis');
  const kubelets: SimulatedKubelet[] = [];
  const logs = tempDirForThisProcess('nodeflavor-two-apiservers-');

  before(async () => {
    plane = await ControlPlane.start({
      apiServers: 2,
      log: (line) => process.stderr.write(`[own control-plane] ${line}\n`),
    });
    process.env.E2E_KUBECONFIG = plane.kubeconfigPath;
    env = await e2eEnvironment();
    assert.equal(env.server, plane.loadBalancer?.url, 'every helper goes through the load balancer');
    await installCrds(env);
    await ensureNamespace(env, OPERATOR_NAMESPACE);
    await applyFlavorClass(env, flavor, { labels: { [FLAVOR_LABEL]: flavor } });
    await prepareOperatorIdentity(env);
  });

  after(async () => {
    for (const kubelet of kubelets) kubelet.stop();
    await operator?.stop();
    await plane?.stop();
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
    operator = startOperator(join(logs, 'operator.log'), ['--leader-elect']);
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

    await waitFor(
      async () => {
        const nodes = await env.core.listNode({ labelSelector: `${FLAVOR_LABEL}=${flavor}` });
        const done = new Set(
          nodes.items
            .filter((n) => n.metadata?.labels?.[TOKEN_LABEL] === undefined)
            .filter((n) => !n.spec?.taints?.some((taint) => taint.key === QUARANTINE))
            .map((n) => n.metadata?.name),
        );
        const missing = names.filter((n) => !done.has(n));
        if (missing.length === 0) return true;
        throw new Error(`${missing.length} not flavored yet, e.g. ${missing.slice(0, 5).join(', ')}`);
      },
      { what: `all ${NODES} nodes to be flavored`, timeoutMs: 90_000, intervalMs: 500 },
    );

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
