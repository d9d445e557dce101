// Fault tolerance: kube-apiserver restarts in the middle of a 60-node burst. The controller (a
// real `nodeflavor run` process) loses every watch and every request while the API server is
// down; it must stay up, resume its watches (from its resourceVersion, or by re-listing after
// 410 Gone), and miss nothing: the nodes that joined before the restart and those that join
// after it all end flavored. This file starts its OWN control plane, since restarting the shared
// one would disturb the other test files.
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { connect } from 'node:net';
import { before, describe, it } from 'node:test';
import { VERIFIED_ANNOTATION } from '../../src/flavor/verdict.ts';
import type { IssuedToken } from '../../src/tokenissuer/issuance/issue.ts';
import { skipUnless } from '../support/skip.ts';
import type { ControlPlane } from './cluster/controlplane.ts';
import { freePort } from './cluster/ports.ts';
import { binaryPaths } from './cluster/versions.ts';
import type { E2EEnvironment } from './support/environment.ts';
import { customObjects, issue, joinWith, opsGet } from './support/nodeflavor.ts';
import { FLAVOR_LABEL, labelOnly, operatorFixture } from './support/operator-fixture.ts';
import { uniqueName, waitFor } from './support/wait.ts';

const NODES = 60;
const CONCURRENCY = 10;
const TOKEN_LABEL = 'nodeflavor.io/token';
const QUARANTINE = 'nodeflavor.io/unverified';

// Needs the locally built binaries (not available when E2E_KUBECONFIG names e.g. a kind cluster
// on a machine without them).
const paths = binaryPaths();
const local = [paths.etcd, paths.kubeApiserver, paths.kubeControllerManager].every((p) => existsSync(p));

/** Whether anything accepts TCP connections at host:port. */
function listening(url: string): Promise<boolean> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve) => {
    const socket = connect({ host: hostname, port: Number(port) });
    socket.setTimeout(1000);
    socket.once('connect', () => {
      socket.destroy();
      resolve(true);
    });
    socket.once('timeout', () => {
      socket.destroy();
      resolve(false);
    });
    socket.once('error', () => resolve(false));
  });
}

/** `{labels} value` samples of one metric, from a Prometheus text page. */
function samples(metrics: string, name: string): { labels: string; value: number }[] {
  const out: { labels: string; value: number }[] = [];
  for (const line of metrics.split('\n')) {
    const match = new RegExp(`^${name}(\\{[^}]*\\})? (\\S+)$`).exec(line);
    if (match) out.push({ labels: match[1] ?? '', value: Number(match[2]) });
  }
  return out;
}

describe('fault tolerance: kube-apiserver restarts during a burst of joins', {
  skip: skipUnless(
    'test/e2e/fault-apiserver-restart.test.ts',
    !local && 'needs the locally built control-plane binaries',
  ),
}, () => {
  const flavor = uniqueName('restart');
  const fx = operatorFixture({
    logPrefix: 'nodeflavor-apiserver-restart-',
    flavorClasses: labelOnly(flavor),
    controlPlane: {},
  });
  const { kubelets } = fx;
  let plane: ControlPlane | undefined;
  let env: E2EEnvironment;
  let metricsPort: number;

  before(() => {
    ({ plane, env } = fx);
    assert.equal(env.server, plane?.server, 'the helpers use this file’s own control plane');
  });

  async function flavoredNames(): Promise<Set<string>> {
    const nodes = await env.core.listNode({ labelSelector: `${FLAVOR_LABEL}=${flavor}` });
    return new Set(
      nodes.items
        .filter((n) => n.metadata?.labels?.[TOKEN_LABEL] === undefined)
        .filter((n) => !n.spec?.taints?.some((taint) => taint.key === QUARANTINE))
        .map((n) => n.metadata?.name ?? ''),
    );
  }

  async function joinAll(tokens: IssuedToken[], names: string[]): Promise<void> {
    let next = 0;
    const worker = async () => {
      while (next < tokens.length) {
        const i = next++;
        kubelets.push(
          await joinWith((tokens[i] as IssuedToken).material, names[i] as string, {
            timeoutMs: 60_000,
          }),
        );
      }
    };
    await Promise.all(Array.from({ length: CONCURRENCY }, worker));
  }

  it('the controller stays up, its watches resume, and all 60 nodes end flavored', async (t) => {
    metricsPort = await freePort();
    const operator = fx.start(['--no-leader-elect'], { metricsPort });
    await waitFor(async () => (await opsGet(metricsPort, '/readyz'))[0] === 200, {
      what: 'the controller to sync its caches',
      timeoutMs: 60_000,
    });
    const tokens: IssuedToken[] = [];
    for (let i = 0; i < NODES; i += CONCURRENCY) {
      tokens.push(...(await Promise.all(Array.from({ length: CONCURRENCY }, () => issue(env, flavor)))));
    }
    const names = tokens.map((_, i) => `${flavor}-${i}`);
    const half = NODES / 2;

    const started = Date.now();
    await joinAll(tokens.slice(0, half), names.slice(0, half));
    t.diagnostic(
      `${half} joined in ${((Date.now() - started) / 1000).toFixed(1)} s; restarting kube-apiserver`,
    );
    const restartedAt = Date.now();
    let exitedAt: number | undefined;
    void operator.exited.then(() => {
      exitedAt = Date.now();
    });
    // While the API server is down the controller is alive and answers its liveness probe.
    const whileDown = (async () => {
      await waitFor(async () => !(await listening(env.server)), {
        what: 'kube-apiserver to stop listening',
        timeoutMs: 60_000,
        intervalMs: 50,
      });
      return (await opsGet(metricsPort, '/healthz'))[0];
    })();
    await plane?.restartApiServer();
    const healthWhileDown = await whileDown;
    t.diagnostic(`kube-apiserver back after ${((Date.now() - restartedAt) / 1000).toFixed(1)} s`);
    assert.equal(healthWhileDown, 200, 'the controller answered /healthz while the API server was down');
    assert.equal(
      exitedAt,
      undefined,
      `the controller survived the API server outage:\n${operator.lastLines()}`,
    );

    await joinAll(tokens.slice(half), names.slice(half));
    await waitFor(
      async () => {
        const flavored = await flavoredNames();
        const missing = names.filter((n) => !flavored.has(n));
        if (missing.length === 0) return true;
        throw new Error(`${missing.length} not flavored yet, e.g. ${missing.slice(0, 5).join(', ')}`);
      },
      { what: `all ${NODES} nodes to be flavored`, timeoutMs: 120_000, intervalMs: 500 },
    );
    t.diagnostic(
      `all ${NODES} flavored ${((Date.now() - restartedAt) / 1000).toFixed(1)} s after the restart began`,
    );
    assert.ok(operator.running && exitedAt === undefined, 'the controller is still running at the end');

    // Each node was verified with its own token, used exactly once.
    const nodes = await env.core.listNode({ labelSelector: `${FLAVOR_LABEL}=${flavor}` });
    const tokenOfNode = new Map(names.map((n, i) => [n, (tokens[i] as IssuedToken).tokenId]));
    for (const node of nodes.items) {
      const record = JSON.parse(node.metadata?.annotations?.[VERIFIED_ANNOTATION] ?? '{}') as {
        tokenID?: string;
      };
      assert.equal(
        record.tokenID,
        tokenOfNode.get(node.metadata?.name ?? ''),
        `${node.metadata?.name} verified`,
      );
    }
    const records = (await customObjects(env.kubeConfig).listClusterCustomObject({
      group: 'nodeflavor.io',
      version: 'v1alpha1',
      plural: 'flavoredtokens',
    })) as { items: { metadata: { name: string }; status?: { uses?: number } }[] };
    const uses = new Map(records.items.map((r) => [r.metadata.name, r.status?.uses ?? 0]));
    for (const token of tokens) assert.equal(uses.get(token.name), 1, `${token.name} used once`);

    // The node watch did restart (and resumed: the second half was seen).
    const [, metrics] = await opsGet(metricsPort, '/metrics');
    const restarts = samples(metrics, 'nodeflavor_watch_restarts_total');
    t.diagnostic(`watch restarts: ${restarts.map((s) => `${s.labels} ${s.value}`).join(', ')}`);
    const nodeRestarts = restarts
      .filter((s) => s.labels.includes('resource="nodes"'))
      .reduce((sum, s) => sum + s.value, 0);
    assert.ok(nodeRestarts > 0, `nodeflavor_watch_restarts_total{resource="nodes"} > 0, got ${nodeRestarts}`);
  });
});
