// Crash safety of the controller, run as real `nodeflavor run` processes: the leader killed
// between each two steps of a join (ADR 0016) ends, after a restart, in the same outcome and the
// same reasons shown, with no token over its uses; a leader killed during a burst of joins is
// replaced by its standby and every node ends flavored.
import assert from 'node:assert/strict';
import { before, describe, it } from 'node:test';
import type { NodeNameClaim } from '../../src/flavor/resources.ts';
import { KubeTokenStore } from '../../src/kube/tokens.ts';
import { JOIN_FAILPOINTS } from '../../src/runtime/failpoints.ts';
import { listTokens } from '../../src/tokenissuer/issuance/issue.ts';
import { freePort } from './cluster/ports.ts';
import type { ManagedProcess } from './cluster/process.ts';
import type { E2EEnvironment } from './support/environment.ts';
import {
  apiRequestCounts,
  customObjects,
  issue,
  joinWith,
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

  /** The join record of a node name (its NodeNameClaim). */
  async function joinRecord(name: string): Promise<NodeNameClaim | undefined> {
    return (await customObjects(env.kubeConfig)
      .getClusterCustomObject({ group: 'nodeflavor.io', version: 'v1alpha1', plural: 'nodenameclaims', name })
      .catch(() => undefined)) as NodeNameClaim | undefined;
  }

  /** What GET /v1/tokens and `kubectl flavor list` say of the token (composed from its joins). */
  async function tokenView(name: string) {
    const views = await listTokens({ kube: new KubeTokenStore(env.kubeConfig) });
    return views.find((v) => v.id === name);
  }

  // The leader dies between each two steps of a join (ADR 0016's crash table), for a join that is
  // verified and for one refused (its kubelet presents another token's flavor token); the next
  // leader, knowing nothing but the objects, ends it the same way and says the same.
  const steps: { failpoint: (typeof JOIN_FAILPOINTS)[number]; refused: boolean }[] = [
    ...JOIN_FAILPOINTS.map((failpoint) => ({ failpoint, refused: false })),
    { failpoint: 'after-node-judged', refused: true },
    { failpoint: 'after-secret-deleted', refused: true },
  ];
  for (const { failpoint, refused } of steps) {
    it(`the leader killed ${failpoint} of a join ${refused ? 'refused' : 'verified'}: the next ends it the same, saying the same`, async () => {
      const first = operator(['--no-leader-elect'], [failpoint]);
      const token = await issue(env, flavor);
      const other = refused ? await issue(env, flavor) : undefined;
      const name = uniqueName(`step-${JOIN_FAILPOINTS.indexOf(failpoint)}`);
      // A refused join presents the flavor token of another token (a copy): InvalidToken.
      const flavorTokenOf = (yaml: string) => /nodeflavor\.io\/token=([^,"\s]+)/.exec(yaml)?.[1] ?? '';
      const material = other
        ? {
            ...token.material,
            joinConfiguration: token.material.joinConfiguration.replace(
              flavorTokenOf(token.material.joinConfiguration),
              flavorTokenOf(other.material.joinConfiguration),
            ),
          }
        : token.material;
      const joining = joinWith(material, name, { timeoutMs: 90_000 });
      await waitFor(async () => !first.running, {
        what: `the controller to crash ${failpoint}:\n${fx.logText(first).slice(-2000)}`,
        timeoutMs: 45_000,
      });
      operator(['--no-leader-elect']);
      kubelets.push(await joining);
      const want = refused ? 'InvalidToken' : undefined;
      await waitFor(
        async () => {
          const join = (await joinRecord(name))?.status?.join;
          return refused ? join?.failure?.reason === want : join?.verifiedAt !== undefined;
        },
        { what: `the record of ${name} to say ${refused ? 'refused' : 'verified'}`, timeoutMs: 60_000 },
      );
      const node = await env.core.readNode({ name });
      const record = (await joinRecord(name)) as NodeNameClaim;
      assert.equal(record.status?.join?.nodeUID, node.metadata?.uid, 'the record names this Node');
      assert.equal(record.status?.join?.tokenID, token.tokenId);
      assert.equal(await flavorOf(name), refused ? undefined : flavor, 'flavored exactly when verified');
      assert.equal(
        node.spec?.taints?.some((t) => t.key === 'nodeflavor.io/unverified') ?? false,
        refused,
        'quarantined exactly when refused',
      );
      const events = (record.status?.history ?? []).map((e) => e.event);
      assert.deepEqual(events, ['Claimed', 'Registered', refused ? 'Refused' : 'Verified'], 'the history');
      const view = await tokenView(token.name);
      assert.equal(view?.uses, 1, 'one use, however often the join was judged');
      assert.equal(view?.phase, refused ? 'Failed' : 'Verified');
      assert.equal(view?.reason ?? undefined, want, 'the reason shown');
      assert.equal(view?.nodes[0]?.nodeName, name);
      await secretDeleted(token.tokenId);
      await Promise.all(operators.splice(0).map((op) => op.stop()));
    });
  }

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
    // Each consumed token's Secret is deleted once and that is recorded (on its join's record, by
    // the write that records the Node), so no replica deletes it again.
    await waitFor(
      async () => {
        for (const name of names) if (!(await joinRecord(name))?.status?.join?.secretDeleted) return false;
        return true;
      },
      {
        what: "every consumed token's join to record its Secret deleted",
        timeoutMs: 30_000,
        intervalMs: 500,
      },
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
    // A write is any PUT, PATCH or DELETE, and a POST that created something (a review creates
    // nothing; an Event's create that found it there already is a 409).
    const requests = await apiRequestCounts(port);
    const writes = Object.fromEntries(
      requests
        .filter(
          (r) =>
            ['PUT', 'PATCH', 'DELETE'].includes(r.method) ||
            (r.method === 'POST' && r.code === '201' && !r.resource.endsWith('reviews')),
        )
        .map((r) => [`${r.method} ${r.code} ${r.resource}`, r.count]),
    );
    const said = fx
      .logText(op)
      .split('\n')
      .filter((line) => !line.includes('"level":20'))
      .slice(-30)
      .join('\n');
    assert.deepEqual(
      writes,
      {},
      `no write (not even a no-op one) on a restart with nothing to change; it said:\n${said}`,
    );
    assert.ok(
      requests.some((r) => r.method === 'GET' && r.code === '200' && r.resource === 'nodes' && r.count > 0),
      'the metric counts requests',
    );
    await op.stop();
  });
});
