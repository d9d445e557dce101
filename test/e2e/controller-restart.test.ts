// Crash safety of the controller, run as real `nodeflavor run` processes: a crash between CSR
// and Node, and between recording a verification and labelling the Node, ends (after a restart)
// in the right flavor with no token over its uses; a leader killed during a burst of joins is
// replaced by its standby and every node ends flavored.
import assert from 'node:assert/strict';
import { before, describe, it } from 'node:test';
import { freePort } from './cluster/ports.ts';
import type { ManagedProcess } from './cluster/process.ts';
import type { E2EEnvironment } from './support/environment.ts';
import {
  customObjects,
  issue,
  joinWith,
  metricValue,
  OPERATOR_NAMESPACE,
  waitOperatorSettled,
} from './support/nodeflavor.ts';
import { labelOnly, operatorFixture } from './support/operator-fixture.ts';
import { uniqueName, waitFor } from './support/wait.ts';

interface TokenRecord {
  status?: {
    uses?: number;
    bindings?: { nodeName: string; nodeUID?: string; verifiedAt?: string }[];
    conditions?: { type: string; status: string }[];
  };
  spec: { maxUses?: number };
}

describe('controller restarts and failover', () => {
  const flavor = uniqueName('crash');
  const fx = operatorFixture({ logPrefix: 'nodeflavor-restart-', flavorClasses: labelOnly(flavor) });
  const { operators, kubelets } = fx;
  let env: E2EEnvironment;
  before(() => {
    env = fx.env;
  });

  function operator(args: string[] = [], failpoints: string[] = [], metricsPort?: number): ManagedProcess {
    return fx.start(args, { failpoints, ...(metricsPort ? { metricsPort } : {}) });
  }

  /** The leader-election identity a replica logged at start. */
  function identityOf(op: ManagedProcess): string | undefined {
    const text = fx.logText(op);
    return /"identity":"([^"]+)"/.exec(text)?.[1];
  }

  async function flavorOf(name: string): Promise<string | undefined> {
    return (await env.core.readNode({ name })).metadata?.labels?.['nodeflavor.io/flavor'];
  }

  const secretDeleted = (tokenId: string) =>
    waitFor(
      async () =>
        (await env.core
          .readNamespacedSecret({ namespace: 'kube-system', name: `bootstrap-token-${tokenId}` })
          .catch(() => undefined)) === undefined,
      { what: `the consumed bootstrap Secret of ${tokenId} to be deleted after restart` },
    );

  async function tokenRecord(name: string): Promise<TokenRecord> {
    return (await customObjects(env.kubeConfig).getClusterCustomObject({
      group: 'nodeflavor.io',
      version: 'v1alpha1',
      plural: 'flavoredtokens',
      name,
    })) as TokenRecord;
  }

  it('a crash after the binding is recorded, before the Node exists, loses nothing', async () => {
    const first = operator(['--no-leader-elect'], ['after-binding-recorded']);
    const token = await issue(env, flavor);
    const name = uniqueName('between-csr-and-node');
    // The controller binds the CSR, then dies (failpoint) before approving it: the kubelet waits
    // for its certificate, and the Node does not exist yet.
    const joining = joinWith(token.material, name, { timeoutMs: 60_000 });
    await waitFor(async () => !first.running, {
      what: 'the controller to crash after binding, before approving the CSR',
      timeoutMs: 30_000,
    });
    const bound = await tokenRecord(token.name);
    assert.equal(bound.status?.bindings?.[0]?.nodeName, name, 'the binding survived the crash');
    // The restarted controller finds the binding and approves the CSR it had not yet approved.
    operator(['--no-leader-elect']);
    kubelets.push(await joining);
    await waitFor(async () => (await flavorOf(name)) === flavor, {
      what: `${name} to be flavored after restart`,
      timeoutMs: 45_000,
    });
    const record = await tokenRecord(token.name);
    assert.equal(record.status?.uses, 1, 'no token over its uses');
    await secretDeleted(token.tokenId);
    await Promise.all(operators.splice(0).map((op) => op.stop()));
  });

  it('a crash after the Node is flavored, before its token records the verification, loses nothing', async () => {
    const first = operator(['--no-leader-elect'], ['after-node-verified']);
    const token = await issue(env, flavor);
    const name = uniqueName('between-label-and-record');
    kubelets.push(await joinWith(token.material, name));
    await waitFor(async () => !first.running, {
      what: 'the controller to crash right after flavoring the node',
      timeoutMs: 30_000,
    });
    assert.equal(await flavorOf(name), flavor, 'the node was flavored before the crash');
    const before = await tokenRecord(token.name);
    assert.equal(before.status?.bindings?.[0]?.verifiedAt, undefined, 'and its token did not say so yet');
    operator(['--no-leader-elect']);
    // The restarted controller finds the Node's own signed record and completes the token's.
    await waitFor(
      async () => (await tokenRecord(token.name)).status?.bindings?.[0]?.verifiedAt !== undefined,
      {
        what: `token ${token.tokenId} to record the verification after restart`,
        timeoutMs: 45_000,
      },
    );
    const node = await env.core.readNode({ name });
    assert.equal(await flavorOf(name), flavor, 'still flavored');
    assert.equal(node.metadata?.labels?.['nodeflavor.io/token'], undefined, 'token label removed');
    assert.ok(!node.spec?.taints?.some((t) => t.key === 'nodeflavor.io/unverified'), 'quarantine lifted');
    const after = await tokenRecord(token.name);
    assert.equal(after.status?.uses, 1);
    assert.equal(after.status?.bindings?.[0]?.nodeUID, node.metadata?.uid, 'the binding names this Node');
    await secretDeleted(token.tokenId);
    await Promise.all(operators.splice(0).map((op) => op.stop()));
  });

  it('two replicas: the leader is killed during a burst of 50 joins; all 50 end flavored', async () => {
    const replicas = [operator(['--leader-elect']), operator(['--leader-elect'])];
    const tokens = await Promise.all(Array.from({ length: 50 }, () => issue(env, flavor)));
    const names = tokens.map(() => uniqueName('burst'));
    let next = 0;
    let killed: ManagedProcess | undefined;
    const worker = async () => {
      while (next < tokens.length) {
        const i = next++;
        kubelets.push(await joinWith((tokens[i] as (typeof tokens)[number]).material, names[i] as string));
        if (i === 15 && !killed) {
          // Kill whichever replica holds the Lease right now.
          const lease = await env.kubeConfig
            .makeApiClient((await import('@kubernetes/client-node')).CoordinationV1Api)
            .readNamespacedLease({ namespace: OPERATOR_NAMESPACE, name: 'nodeflavor-controller' });
          const holder = lease.spec?.holderIdentity ?? '';
          killed = replicas.find((r) => identityOf(r) === holder);
          assert.ok(killed, `the Lease holder ${holder} is one of our replicas`);
          await killed?.kill();
        }
      }
    };
    await Promise.all(Array.from({ length: 5 }, worker));
    assert.ok(killed, 'a leader was killed mid-burst');
    await waitFor(
      async () => {
        const flavored = await env.core.listNode({ labelSelector: `nodeflavor.io/flavor=${flavor}` });
        const have = new Set(flavored.items.map((n) => n.metadata?.name));
        return names.every((n) => have.has(n));
      },
      { what: 'all 50 burst nodes to be flavored by the new leader', timeoutMs: 90_000, intervalMs: 500 },
    );
    for (const token of tokens) {
      const record = await tokenRecord(token.name);
      assert.equal(record.status?.uses, 1, `token ${token.tokenId} used exactly once`);
    }
    // Each consumed token's Secret is deleted once and that is recorded, so no replica deletes it again.
    await waitFor(
      async () => {
        for (const token of tokens) {
          const conditions = (await tokenRecord(token.name)).status?.conditions ?? [];
          if (!conditions.some((c) => c.type === 'SecretDeleted' && c.status === 'True')) return false;
        }
        return true;
      },
      { what: 'every consumed token to record SecretDeleted', timeoutMs: 30_000, intervalMs: 500 },
    );
  });

  /** Starts a replica and waits until it has judged every Node and its queues are empty. */
  async function freshReplicaSettled(): Promise<{ op: ManagedProcess; port: number }> {
    const port = await freePort();
    const op = operator(['--no-leader-elect'], [], port);
    const nodes = (await env.core.listNode()).items.length;
    await waitOperatorSettled(port, nodes, { timeoutMs: 60_000 });
    return { op, port };
  }

  it('a replica restarted on settled nodes and tokens judges them all and writes nothing', async () => {
    await Promise.all(operators.splice(0).map((op) => op.stop()));
    // Whatever earlier tests left unsettled (a token that expired since, say) is settled first.
    const settling = await freshReplicaSettled();
    await settling.op.stop();
    const { op, port } = await freshReplicaSettled();
    const writes: Record<string, number> = {};
    for (const method of ['PUT', 'PATCH', 'DELETE']) {
      for (const code of ['200', '201', '404', '409']) {
        const n = await metricValue(
          port,
          `nodeflavor_kube_api_requests_total{method="${method}",code="${code}"}`,
        );
        if (n > 0) writes[`${method} ${code}`] = n;
      }
    }
    assert.deepEqual(writes, {}, 'no write (not even a no-op one) on a restart with nothing to change');
    assert.ok(
      (await metricValue(port, 'nodeflavor_kube_api_requests_total{method="GET",code="200"}')) > 0,
      'the metric counts requests',
    );
    await op.stop();
  });
});
