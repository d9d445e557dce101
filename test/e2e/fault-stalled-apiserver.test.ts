// Fault tolerance: the leader's API server accepts connections and never answers (a loopback
// proxy in front of it stalls on command), while nodes keep joining. This file runs its own
// control plane, auditing the operator's requests: replica A talks to the API server only
// through the proxy, which connects from 127.0.0.2, so the audit log tells A's requests apart.
// It must hold that:
//   - A stops leading by its renew deadline (7 s after its last renewal), in-flight work included;
//   - B takes the Lease within the lease duration plus one retry period of A's last renewal;
//   - no write of A's lands after A lost the Lease, not even once the proxy lets A's held bytes
//     through again (they are dropped with the connections A gave up on);
//   - the hung replica never blocks joins: A's webhook (the one the registration names) keeps
//     answering within its timeout, so every Node registers, and B verifies every node; nothing
//     is lost (every node flavored, every token used once).
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { setTimeout as delay } from 'node:timers/promises';
import { CoordinationV1Api } from '@kubernetes/client-node';
import type { IssuedToken } from '../../src/tokenissuer/issuance/issue.ts';
import { skipUnless } from '../support/skip.ts';
import { AUDIT_LOG, type ControlPlane } from './cluster/controlplane.ts';
import { freePort } from './cluster/ports.ts';
import type { ManagedProcess } from './cluster/process.ts';
import { TcpProxy } from './cluster/tcp-proxy.ts';
import { binaryPaths } from './cluster/versions.ts';
import { describeEvent, isWrite, readAuditEvents } from './support/audit-log.ts';
import { operatorKubeconfigVia } from './support/chart.ts';
import type { E2EEnvironment } from './support/environment.ts';
import {
  customObjects,
  issue,
  joinWith,
  metricValue,
  OPERATOR_NAMESPACE,
  opsGet,
} from './support/nodeflavor.ts';
import { labelOnly, operatorFixture, waitAllFlavored } from './support/operator-fixture.ts';
import { uniqueName, waitFor } from './support/wait.ts';

const NODES = 40;
const CONCURRENCY = 4;
/** A steady load: join i starts no earlier than i × this after the first. */
const PACE_MS = 500;
const LEASE = 'nodeflavor-controller';
const LEASE_DURATION_MS = 10_000;
const RENEW_DEADLINE_MS = 7_000;
const RETRY_PERIOD_MS = 2_000;
/** Polling and a loaded 2-core machine: what a measured bound may exceed the protocol's by. */
const SLACK_MS = 1_000;
const STALLED_ADDRESS = '127.0.0.2';

const paths = binaryPaths();
const local = [paths.etcd, paths.kubeApiserver, paths.kubeControllerManager].every((p) => existsSync(p));

describe('fault tolerance: the leader’s API server stalls (accepts, never answers)', {
  skip: skipUnless(
    'test/e2e/fault-stalled-apiserver.test.ts',
    !local && 'needs the locally built control-plane binaries',
  ),
}, () => {
  const flavor = uniqueName('stall');
  let stall: TcpProxy | undefined;
  const fx = operatorFixture({
    logPrefix: 'nodeflavor-stall-',
    flavorClasses: labelOnly(flavor),
    controlPlane: { auditUserGroups: [`system:serviceaccounts:${OPERATOR_NAMESPACE}`] },
    // A's proxy forwards again before the replicas are stopped (a failed test may leave it stalled).
    beforeStop: () => stall?.setMode('forward'),
  });
  const { kubelets } = fx;
  let plane: ControlPlane | undefined;
  let env: E2EEnvironment;
  const replicas: { op: ManagedProcess; metrics: number; webhook: number }[] = [];

  before(async () => {
    ({ plane, env } = fx);
    stall = await TcpProxy.start({
      upstreams: [{ host: '127.0.0.1', port: Number(new URL(env.server).port) }],
      localAddress: STALLED_ADDRESS,
    });
  });

  // After the fixture has stopped the kubelets, the replicas and the control plane.
  after(async () => {
    await stall?.close();
  });

  async function replica(server: string, webhookUrl: string, webhookPort: number): Promise<number> {
    const metrics = await freePort();
    const op = fx.start(
      [
        '--leader-elect',
        '--webhook',
        '--webhook-address',
        `127.0.0.1:${webhookPort}`,
        '--webhook-url',
        webhookUrl,
      ],
      {
        metricsPort: metrics,
        kubeconfigPath: operatorKubeconfigVia(server, fx.logs, env.caPem),
        allowUnguarded: false,
      },
    );
    replicas.push({ op, metrics, webhook: webhookPort });
    return replicas.length - 1;
  }

  function identityOf(index: number): string | undefined {
    const op = replicas[index]?.op;
    return /"identity":"([^"]+)"/.exec(op ? fx.logText(op) : '')?.[1];
  }

  async function lease(): Promise<{ holder?: string; acquireTime?: Date; renewTime?: Date }> {
    const read = await env.kubeConfig
      .makeApiClient(CoordinationV1Api)
      .readNamespacedLease({ namespace: OPERATOR_NAMESPACE, name: LEASE });
    return {
      ...(read.spec?.holderIdentity ? { holder: read.spec.holderIdentity } : {}),
      ...(read.spec?.acquireTime ? { acquireTime: new Date(read.spec.acquireTime) } : {}),
      ...(read.spec?.renewTime ? { renewTime: new Date(read.spec.renewTime) } : {}),
    };
  }

  it('A steps down by its renew deadline, B takes over in time, A writes nothing after, joins never stop', async (t) => {
    const proxy = stall as TcpProxy;
    const webhookA = await freePort();
    const webhookB = await freePort();
    // Both replicas generate the registration naming A's webhook: the hung replica is the one
    // every admission review goes to.
    const webhookUrl = `https://127.0.0.1:${webhookA}`;
    const a = await replica(proxy.url, webhookUrl, webhookA);
    await waitFor(async () => identityOf(a) !== undefined && (await lease()).holder === identityOf(a), {
      what: 'replica A to hold the Lease',
      timeoutMs: 60_000,
      intervalMs: 200,
    });
    const b = await replica(env.server, webhookUrl, webhookB);
    const ready = (i: number) =>
      waitFor(async () => (await opsGet(replicas[i]?.metrics ?? 0, '/readyz'))[0] === 200, {
        what: `replica ${i === a ? 'A' : 'B'} to be ready`,
        timeoutMs: 60_000,
        intervalMs: 200,
      });
    await ready(a);
    await ready(b);
    const metricsA = replicas[a]?.metrics ?? 0;
    const metricsB = replicas[b]?.metrics ?? 0;
    assert.equal(await metricValue(metricsA, 'nodeflavor_leader'), 1, 'A leads');

    const tokens = await Promise.all(Array.from({ length: NODES }, () => issue(env, flavor)));
    const names = tokens.map((_, i) => `${flavor}-${i}`);
    const failures: string[] = [];
    let joined = 0;
    let next = 0;
    const loadStart = Date.now();
    const worker = async () => {
      while (next < NODES) {
        const i = next++;
        // Pacing the load so it spans the stall (not synchronisation: nothing waits on it).
        await delay(Math.max(0, loadStart + i * PACE_MS - Date.now()));
        try {
          kubelets.push(
            await joinWith((tokens[i] as IssuedToken).material, names[i] as string, {
              timeoutMs: 60_000,
            }),
          );
          joined += 1;
        } catch (error) {
          failures.push(`${names[i]}: ${(error as Error).message}`);
        }
      }
    };
    const load = Promise.all(Array.from({ length: CONCURRENCY }, worker));

    await waitFor(() => joined >= 8, { what: '8 joins before the stall', timeoutMs: 60_000, intervalMs: 50 });
    const reviewsBefore = await reviewsAnswered(metricsA);
    const beforeStall = await lease();
    proxy.setMode('stall');
    const stalledAt = Date.now();
    const joinedAtStall = joined;

    // A gives up leading by its renew deadline: no outcome is awaited beyond a generous bound,
    // so a replica that never steps down is reported, not waited for.
    let steppedDownMs: number | undefined;
    await waitFor(async () => (await metricValue(metricsA, 'nodeflavor_leader')) === 0, {
      what: 'A to stop leading',
      timeoutMs: RENEW_DEADLINE_MS + 10_000,
      intervalMs: 100,
    }).then(
      () => {
        steppedDownMs = Date.now() - stalledAt;
      },
      () => undefined,
    );
    const takeover = await waitFor(
      async () => {
        const now = await lease();
        return now.holder === identityOf(b) ? now : undefined;
      },
      { what: 'B to take the Lease', timeoutMs: 60_000, intervalMs: 100 },
    );
    const takeoverMs = Date.now() - stalledAt;
    // A's last renewal: the newest renewTime A wrote (read just before the stall, or later).
    const lastRenewal = beforeStall.renewTime?.getTime() ?? stalledAt;
    const lostAt = takeover.acquireTime?.getTime() ?? Date.now();
    t.diagnostic(
      `stall at join ${joinedAtStall}: A stepped down after ${steppedDownMs ?? 'never (within the bound)'} ms; B held the Lease ${takeoverMs} ms after the stall (acquired ${lostAt - lastRenewal} ms after A's last renewal seen before it)`,
    );

    // Joins go on: A's webhook answers while A's API server hangs, B verifies.
    await load;
    const reviewsDuringStall = (await reviewsAnswered(metricsA)) - reviewsBefore;
    await waitAllFlavored(env, flavor, names);
    const allFlavoredMs = Date.now() - stalledAt;

    // A's API server answers again: whatever A held back would land now. Wait until A has been
    // talking to it again for two retry periods (its requests show in the audit log).
    proxy.setMode('forward');
    const resumedAt = Date.now();
    const auditPath = join(plane?.dir ?? '', AUDIT_LOG);
    const fromA = () => readAuditEvents(auditPath).filter((e) => e.sourceIPs.includes(STALLED_ADDRESS));
    await waitFor(() => fromA().some((e) => e.receivedAt >= resumedAt + 2 * RETRY_PERIOD_MS), {
      what: 'A to talk to its API server again for two retry periods',
      timeoutMs: 60_000,
      intervalMs: 250,
    });
    const writesBefore = fromA().filter((e) => isWrite(e) && e.receivedAt < stalledAt).length;
    const lateWrites = fromA().filter(
      (e) => isWrite(e) && e.code >= 200 && e.code < 300 && e.receivedAt >= lostAt,
    );
    t.diagnostic(
      `all ${NODES} nodes flavored ${allFlavoredMs} ms after the stall; A answered ${reviewsDuringStall} admission reviews while stalled; writes of A after it lost the Lease: ${lateWrites.length}`,
    );

    assert.ok(writesBefore > 0, 'the audit log shows A’s writes (from 127.0.0.2) before the stall');
    assert.deepEqual(failures, [], 'no join failed');
    assert.ok(joinedAtStall < NODES, 'nodes were still joining when the stall began');
    assert.ok(reviewsDuringStall > 0, 'A’s webhook answered admission reviews while its API server hung');
    assert.ok(
      steppedDownMs !== undefined && steppedDownMs <= RENEW_DEADLINE_MS + SLACK_MS,
      `A stopped leading within its renew deadline of the stall (took ${steppedDownMs ?? 'forever'} ms)`,
    );
    assert.ok(
      lostAt - lastRenewal <= LEASE_DURATION_MS + RETRY_PERIOD_MS + SLACK_MS,
      `B took over within the lease duration plus one retry period (${lostAt - lastRenewal} ms)`,
    );
    assert.deepEqual(lateWrites.map(describeEvent), [], 'no write of A landed after it lost the Lease');
    assert.equal(await metricValue(metricsA, 'nodeflavor_leader'), 0, 'A stays a standby');
    assert.equal(await metricValue(metricsB, 'nodeflavor_leader'), 1, 'B leads');

    // Nothing lost: each token used exactly once.
    const records = (await customObjects(env.kubeConfig).listClusterCustomObject({
      group: 'nodeflavor.io',
      version: 'v1alpha1',
      plural: 'flavoredtokens',
    })) as { items: { metadata: { name: string }; status?: { uses?: number } }[] };
    const uses = new Map(records.items.map((r) => [r.metadata.name, r.status?.uses ?? 0]));
    for (const token of tokens) assert.equal(uses.get(token.name), 1, `${token.name} used once`);
  });
});

/** Admission reviews a replica's webhook answered (allowed or denied). */
async function reviewsAnswered(metricsPort: number): Promise<number> {
  const [, text] = await opsGet(metricsPort, '/metrics');
  return text
    .split('\n')
    .filter((line) => line.startsWith('nodeflavor_admission_decisions_total{'))
    .reduce((sum, line) => sum + Number(line.split(' ').pop()), 0);
}
