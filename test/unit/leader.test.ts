// The leader elector against a small in-memory Lease endpoint that can hang on command (the e2e
// fault test does the same against a real API server behind a stalling proxy).
import assert from 'node:assert/strict';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { after, before, describe, it } from 'node:test';
import { KubeConfig } from '@kubernetes/client-node';
import { fencedKubeConfig } from '../../src/runtime/deadlines.ts';
import { kubeJson } from '../../src/runtime/fetch.ts';
import { checkTimings, LeaderElector } from '../../src/runtime/leader.ts';

const TIMINGS = { leaseDurationMs: 900, renewDeadlineMs: 600, retryPeriodMs: 150 };
/** Timers on a loaded machine; still well under what a stuck elector takes (for ever). */
const SLACK_MS = 300;

/**
 * A Lease API for one namespace (GET, POST, PUT with resourceVersion) on two ports, as two
 * replicas' paths to one API server; while `hang` is set, the first answers nothing.
 */
class FakeLeases {
  server: Server;
  other: Server;
  hang = false;
  /** The next PUT is written at once but answered only this long after; then every request hangs. */
  slowNextPutMs: number | undefined;
  /** When that slow PUT was written. */
  slowPutAt: number | undefined;
  lease: (Record<string, unknown> & { metadata: Record<string, unknown> }) | undefined;
  version = 0;
  writes: { at: number; holder: unknown }[] = [];

  constructor() {
    this.server = createServer((req, res) => void this.handle(req, res, true));
    this.other = createServer((req, res) => void this.handle(req, res, false));
  }

  private async handle(req: IncomingMessage, res: ServerResponse, hangable: boolean): Promise<void> {
    let body = '';
    for await (const chunk of req) body += chunk;
    if (this.hang && hangable) return; // accepts, never answers
    const send = (status: number, object?: unknown): void => {
      res.writeHead(status, { 'Content-Type': 'application/json' }).end(JSON.stringify(object ?? {}));
    };
    if (req.url?.includes('/probe')) return send(200, { ok: true });
    if (req.method === 'GET') return this.lease ? send(200, this.lease) : send(404);
    const incoming = JSON.parse(body) as NonNullable<FakeLeases['lease']>;
    if (req.method === 'POST' && this.lease) return send(409);
    if (req.method === 'PUT' && incoming.metadata.resourceVersion !== this.lease?.metadata.resourceVersion)
      return send(409);
    this.lease = { ...incoming, metadata: { ...incoming.metadata, resourceVersion: String(++this.version) } };
    this.writes.push({
      at: Date.now(),
      holder: (incoming.spec as { holderIdentity?: string }).holderIdentity,
    });
    if (req.method === 'PUT' && hangable && this.slowNextPutMs !== undefined) {
      const delayMs = this.slowNextPutMs;
      this.slowNextPutMs = undefined;
      this.slowPutAt = Date.now();
      this.hang = true;
      await new Promise((resolve) => setTimeout(resolve, delayMs));
    }
    return send(req.method === 'POST' ? 201 : 200, this.lease);
  }
}

function kubeConfigFor(port: number): KubeConfig {
  const kc = new KubeConfig();
  kc.loadFromOptions({
    clusters: [{ name: 'fake', server: `http://127.0.0.1:${port}`, skipTLSVerify: true }],
    users: [{ name: 'fake' }],
    contexts: [{ name: 'fake', cluster: 'fake', user: 'fake' }],
    currentContext: 'fake',
  });
  return kc;
}

function until(what: string, condition: () => boolean, timeoutMs = 5000): Promise<void> {
  return new Promise((resolve, reject) => {
    const deadline = Date.now() + timeoutMs;
    const check = () => {
      if (condition()) return resolve();
      if (Date.now() > deadline) return reject(new Error(`timed out waiting for ${what}`));
      setTimeout(check, 10);
    };
    check();
  });
}

describe('LeaderElector', () => {
  const fake = new FakeLeases();
  const electors: LeaderElector[] = [];
  let port = 0;
  let otherPort = 0;
  before(async () => {
    for (const server of [fake.server, fake.other])
      await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
    port = (fake.server.address() as { port: number }).port;
    otherPort = (fake.other.address() as { port: number }).port;
  });
  after(async () => {
    fake.hang = false;
    await Promise.all(electors.map((e) => e.stop()));
    for (const server of [fake.server, fake.other]) {
      server.closeAllConnections();
      server.close();
    }
  });

  it('a leader whose renewals hang stops leading by its renew deadline and its term cancels its writes; a standby takes over within lease + retry period', async () => {
    const kubeConfig = kubeConfigFor(port);
    const events: string[] = [];
    let term: AbortSignal | undefined;
    const a = new LeaderElector({
      kubeConfig,
      namespace: 'ns',
      name: 'lease',
      identity: 'a',
      ...TIMINGS,
      onStartedLeading: (signal) => {
        term = signal;
        events.push('a leads');
      },
      onStoppedLeading: (why) => events.push(`a stops: ${why}`),
    });
    electors.push(a);
    a.start();
    await until('a to lead', () => a.isLeader);
    const b = new LeaderElector({
      kubeConfig: kubeConfigFor(otherPort),
      namespace: 'ns',
      name: 'lease',
      identity: 'b',
      ...TIMINGS,
    });
    electors.push(b);
    b.start();
    await until('b to see the lease', () => fake.writes.length >= 2);

    // A write of a's term in flight when the API server stops answering.
    fake.hang = true;
    const stalledAt = Date.now();
    const lastRenewal = fake.writes.filter((w) => w.holder === 'a').at(-1)?.at ?? stalledAt;
    const inFlight = kubeJson(fencedKubeConfig(kubeConfig, term as AbortSignal), 'GET', '/probe').then(
      () => new Error('answered'),
      (error: Error) => error,
    );
    await until('a to stop leading', () => !a.isLeader);
    const steppedDownMs = Date.now() - lastRenewal;
    assert.match(
      (await inFlight).message,
      /stopped leading/,
      'the write in flight was cancelled with the term',
    );
    await assert.rejects(
      kubeJson(fencedKubeConfig(kubeConfig, term as AbortSignal), 'GET', '/probe'),
      /stopped leading/,
      'a later write of the term is refused before it is sent',
    );
    assert.ok(
      steppedDownMs <= TIMINGS.renewDeadlineMs + SLACK_MS,
      `stepped down ${steppedDownMs} ms after its last renewal`,
    );
    assert.match(events.at(-1) ?? '', /renew deadline/);

    // b's path to the API server answers: b takes over in time.
    await until('b to lead', () => b.isLeader, 5000);
    fake.hang = false;
    const takeover = fake.writes.find((w) => w.holder === 'b' && w.at > stalledAt)?.at ?? Infinity;
    assert.ok(
      takeover - lastRenewal <= TIMINGS.leaseDurationMs + TIMINGS.retryPeriodMs + SLACK_MS,
      `b acquired ${takeover - lastRenewal} ms after a's last renewal`,
    );
    await Promise.all(electors.splice(0).map((e) => e.stop()));
    assert.equal(fake.lease?.spec && (fake.lease.spec as { holderIdentity?: string }).holderIdentity, '');
  });

  it('counts the renew deadline from when the renewal was sent: a slow answer does not extend the term', async () => {
    // A second API server of its own, so the first test's electors are not in the way.
    const slow = new FakeLeases();
    await new Promise<void>((resolve) => slow.server.listen(0, '127.0.0.1', () => resolve()));
    const timings = { leaseDurationMs: 3000, renewDeadlineMs: 2000, retryPeriodMs: 250 };
    const answerDelayMs = 1200;
    const leader = new LeaderElector({
      kubeConfig: kubeConfigFor((slow.server.address() as { port: number }).port),
      namespace: 'ns',
      name: 'lease',
      identity: 'slow',
      ...timings,
    });
    try {
      leader.start();
      await until('it to lead', () => leader.isLeader);
      // The next renewal reaches the API server (a standby sees its renewTime from then on), but
      // its answer takes 1.2 s; after it, the API server answers nothing more.
      slow.slowNextPutMs = answerDelayMs;
      await until('the slow renewal to be written', () => slow.slowPutAt !== undefined);
      const writtenAt = slow.slowPutAt ?? 0;
      await until('it to stop leading', () => !leader.isLeader, 10_000);
      const steppedDownMs = Date.now() - writtenAt;
      // Sent at most a GET before it was written: down by written + renewDeadline, where a standby
      // counting from the renewTime it saw gives up waiting at written + leaseDuration. Counting
      // from the answer would step down only at written + 1.2 s + renewDeadline.
      assert.ok(
        steppedDownMs <= timings.renewDeadlineMs + 500,
        `stepped down ${steppedDownMs} ms after the renewal was written (renew deadline ${timings.renewDeadlineMs} ms, answer after ${answerDelayMs} ms)`,
      );
    } finally {
      slow.hang = false;
      await leader.stop();
      slow.server.closeAllConnections();
      slow.server.close();
      slow.other.close();
    }
  });

  it('refuses timings where a leader could outlive its lease', () => {
    assert.throws(() => checkTimings({ leaseDurationMs: 7000, renewDeadlineMs: 7000, retryPeriodMs: 2000 }));
    assert.throws(() =>
      checkTimings({ leaseDurationMs: 10_000, renewDeadlineMs: 2000, retryPeriodMs: 2000 }),
    );
    checkTimings({ leaseDurationMs: 10_000, renewDeadlineMs: 7000, retryPeriodMs: 2000 });
  });
});
