// Fault tolerance: leader failover under a continuous load of joins. Two `nodeflavor run`
// replicas with --leader-elect; 80 nodes join at a steady pace while the leader (found through
// the Lease holderIdentity and the identity each replica logs) is SIGKILLed twice, the killed
// one coming back as a new replica after the first kill. Each time a standby must take the Lease
// within 15 s (the lease lasts 10 s), and at the end every node is flavored and no token is
// over its uses.
import assert from 'node:assert/strict';
import { before, describe, it } from 'node:test';
import { setTimeout as delay } from 'node:timers/promises';
import { CoordinationV1Api } from '@kubernetes/client-node';
import type { IssuedToken } from '../../src/tokenissuer/issuance/issue.ts';
import type { ManagedProcess } from './cluster/process.ts';
import type { E2EEnvironment } from './support/environment.ts';
import { customObjects, issue, joinWith, OPERATOR_NAMESPACE } from './support/nodeflavor.ts';
import { labelOnly, operatorFixture, waitAllFlavored } from './support/operator-fixture.ts';
import { uniqueName, waitFor } from './support/wait.ts';

const NODES = 80;
const CONCURRENCY = 6;
/** A steady load: join i starts no earlier than i × this after the first (about 2.5 joins/s). */
const PACE_MS = 400;
/** The Lease lasts 10 s; a standby renews every 2 s: 15 s leaves room for a loaded machine. */
const TAKEOVER_LIMIT_MS = 15_000;
const LEASE = 'nodeflavor-controller';

describe('fault tolerance: leader failover under a continuous load of joins', () => {
  const flavor = uniqueName('failover');
  const fx = operatorFixture({ logPrefix: 'nodeflavor-failover-', flavorClasses: labelOnly(flavor) });
  const { operators: replicas, kubelets, logText } = fx;
  let env: E2EEnvironment;
  before(() => {
    env = fx.env;
  });

  const replica = (): ManagedProcess => fx.start(['--leader-elect']);

  /** The leader-election identity a replica logged at start. */
  function identityOf(op: ManagedProcess): string | undefined {
    return /"identity":"([^"]+)"/.exec(logText(op))?.[1];
  }

  async function holder(): Promise<string | undefined> {
    const lease = await env.kubeConfig
      .makeApiClient(CoordinationV1Api)
      .readNamespacedLease({ namespace: OPERATOR_NAMESPACE, name: LEASE });
    return lease.spec?.holderIdentity || undefined;
  }

  /** The live replica holding the Lease (waits until one of ours does). */
  async function leader(): Promise<ManagedProcess> {
    return waitFor(
      async () => {
        const current = await holder();
        return replicas.find((r) => r.running && current !== undefined && identityOf(r) === current);
      },
      { what: 'one of our replicas to hold the Lease', timeoutMs: 60_000, intervalMs: 200 },
    );
  }

  /** Kills the leader; returns how long until another live replica of ours held the Lease. */
  async function killLeader(
    joined: () => number,
  ): Promise<{ killed: ManagedProcess; next: ManagedProcess; ms: number; joinedAtKill: number }> {
    const killed = await leader();
    const joinedAtKill = joined();
    await killed.kill();
    const at = Date.now();
    const next = await waitFor(
      async () => {
        const current = await holder();
        return replicas.find((r) => r !== killed && r.running && identityOf(r) === current);
      },
      { what: 'a standby to take the Lease', timeoutMs: 60_000, intervalMs: 100 },
    );
    return { killed, next, ms: Date.now() - at, joinedAtKill };
  }

  it('a standby takes over within 15 s of each of two leader kills; all 80 nodes end flavored', async (t) => {
    replica();
    replica();
    const first = await leader();
    t.diagnostic(`first leader: ${identityOf(first)}`);

    const tokens = new Array<IssuedToken>(NODES);
    const names = Array.from({ length: NODES }, (_, i) => `${flavor}-${i}`);
    let joined = 0;
    let failed: Error | undefined;
    let next = 0;
    const loadStart = Date.now();
    const worker = async () => {
      while (next < NODES && !failed) {
        const i = next++;
        // Pacing the load so it spans both failovers (not synchronisation: nothing waits on it).
        await delay(Math.max(0, loadStart + i * PACE_MS - Date.now()));
        try {
          tokens[i] = await issue(env, flavor, { maxUses: 1 });
          kubelets.push(await joinWith(tokens[i].material, names[i] as string));
          joined += 1;
        } catch (error) {
          failed ??= new Error(`join ${i} failed: ${(error as Error).message}`);
        }
      }
    };
    const takeovers: number[] = [];
    const chaos = async () => {
      const untilJoined = (n: number) =>
        waitFor(() => joined >= n || failed !== undefined, {
          what: `${n} joins`,
          timeoutMs: 120_000,
          intervalMs: 50,
        });
      await untilJoined(15);
      const one = await killLeader(() => joined);
      takeovers.push(one.ms);
      t.diagnostic(`kill 1 at join ${one.joinedAtKill}: ${identityOf(one.next)} took over in ${one.ms} ms`);
      // The killed replica comes back as a new one, and must be a ready standby before the next kill.
      const fresh = replica();
      await waitFor(() => logText(fresh).includes('"msg":"caches synced"'), {
        what: 'the new replica to sync its caches',
        timeoutMs: 60_000,
      });
      await untilJoined(45);
      const two = await killLeader(() => joined);
      takeovers.push(two.ms);
      t.diagnostic(`kill 2 at join ${two.joinedAtKill}: ${identityOf(two.next)} took over in ${two.ms} ms`);
      assert.ok(two.joinedAtKill < NODES, 'the second kill came while nodes were still joining');
    };
    await Promise.all([chaos(), ...Array.from({ length: CONCURRENCY }, worker)]);
    if (failed) throw failed;
    assert.equal(takeovers.length, 2, 'two leaders were killed');
    for (const [i, ms] of takeovers.entries()) {
      assert.ok(ms <= TAKEOVER_LIMIT_MS, `takeover ${i + 1} took ${ms} ms (limit ${TAKEOVER_LIMIT_MS} ms)`);
    }

    await waitAllFlavored(env, flavor, names);
    const records = (await customObjects(env.kubeConfig).listClusterCustomObject({
      group: 'nodeflavor.io',
      version: 'v1alpha1',
      plural: 'flavoredtokens',
    })) as {
      items: { metadata: { name: string }; spec: { maxUses?: number }; status?: { uses?: number } }[];
    };
    const byName = new Map(records.items.map((r) => [r.metadata.name, r]));
    for (const token of tokens) {
      const record = byName.get(token.name);
      assert.ok(record, `${token.name} exists`);
      assert.ok((record.status?.uses ?? 0) <= (record.spec.maxUses ?? 1), `${token.name} over its uses`);
      assert.equal(record.status?.uses, 1, `${token.name} used once`);
    }
    // Exactly one live leader at the end, one of ours.
    const last = await leader();
    assert.ok(last.running);
    t.diagnostic(`takeovers: ${takeovers.join(' ms, ')} ms`);
  });
});
