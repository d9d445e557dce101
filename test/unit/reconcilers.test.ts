// The token, node and CSR reconcilers on event sequences, without an API server: a fake API
// (the objects, JSON patch preconditions and resourceVersion checks the real one applies), caches
// that lag it until the test says the watch delivered, and a fake clock. Each scenario runs to
// quiescence and then asserts what was written, how often, and that a further pass writes nothing.

import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import pino from 'pino';
import { Registry } from 'prom-client';
import { parseConfig } from '../../src/config.ts';
import type { ControllerApi } from '../../src/controller/api.ts';
import type { ControllerContext } from '../../src/controller/context.ts';
import { reconcileCsr } from '../../src/controller/csrs.ts';
import { controllerMetrics } from '../../src/controller/metrics.ts';
import { reconcileNode } from '../../src/controller/nodes.ts';
import { csrTokenId, Indexes } from '../../src/controller/state.ts';
import { reconcileToken } from '../../src/controller/tokens.ts';
import { ATTESTED_ANNOTATION } from '../../src/flavor/attestation-decision.ts';
import type { DesiredNodeState } from '../../src/flavor/converge.ts';
import { deriveFlavorToken } from '../../src/flavor/flavor-token.ts';
import { newKeyRing } from '../../src/flavor/keyring.ts';
import {
  type FlavorClassStatus,
  type FlavoredTokenStatus,
  ISSUED_ANNOTATION,
  type NodeNameClaim,
  TOKEN_ID_LABEL,
} from '../../src/flavor/resources.ts';
import { rfc3339 } from '../../src/flavor/rfc3339.ts';
import type { StoredFlavorClass } from '../../src/kube/flavor-classes.ts';
import { KubeError } from '../../src/kube/kube-error.ts';
import { nodeStatePatch, type TrimmedNode } from '../../src/kube/node-writes.ts';
import { type CsrObject, type StoredToken, TOKEN_FINALIZER } from '../../src/kube/token-writes.ts';
import { createCertificateRequest } from '../../src/pki/certs.ts';
import { MapCache } from './support/map-cache.ts';

const FLAVOR = 'sweet';
const GROUP = 'system:bootstrappers:nodeflavor';
const QUARANTINE = { key: 'nodeflavor.io/unverified', effect: 'NoSchedule' };
const T0 = Date.parse('2026-12-01T00:00:00Z');

type Named = { metadata: { name: string; resourceVersion?: string } };
const clone = <T>(o: T): T => structuredClone(o);

/** A cache that shows the API's objects only as of the last `deliver()` (or our own `assume`). */
class LaggingCache<T extends Named> extends MapCache<T> {}

/** The API server's side: objects, resourceVersions, and every write in order. */
class FakeApi implements ControllerApi {
  rv = 100;
  readonly tokens = new Map<string, StoredToken>();
  readonly nodes = new Map<string, TrimmedNode>();
  readonly csrs = new Map<string, CsrObject>();
  readonly secrets = new Set<string>();
  readonly claims = new Map<string, NodeNameClaim>();
  readonly writes: string[] = [];
  /** Runs before each call named here resolves: a test's hook to interleave another actor. */
  readonly before = new Map<string, () => Promise<void> | void>();
  private async hook(call: string) {
    await this.before.get(call)?.();
  }
  nextRv() {
    return String(++this.rv);
  }
  async writeNode(node: TrimmedNode, desired: DesiredNodeState) {
    const stored = this.nodes.get(node.metadata.name);
    const doc = clone(stored) as unknown as Record<string, unknown>;
    if (!stored || !applyJsonPatch(doc, nodeStatePatch(node, desired)))
      throw new KubeError(409, 'Conflict', 'node changed since it was judged');
    const written = doc as unknown as TrimmedNode;
    written.metadata.resourceVersion = this.nextRv();
    this.nodes.set(node.metadata.name, written);
    this.writes.push(`node ${node.metadata.name}`);
    return clone(written);
  }
  async writeTokenStatus(token: StoredToken, status: FlavoredTokenStatus) {
    await this.hook('writeTokenStatus');
    const stored = this.tokens.get(token.metadata.name);
    if (!stored || stored.metadata.resourceVersion !== token.metadata.resourceVersion)
      throw new KubeError(409, 'Conflict', 'token changed');
    const written = { ...clone(stored), status: clone(status) };
    written.metadata.resourceVersion = this.nextRv();
    this.tokens.set(token.metadata.name, written);
    this.writes.push(`status ${token.metadata.name}`);
    return clone(written);
  }
  async readToken(name: string) {
    await this.hook('readToken');
    return clone(this.tokens.get(name));
  }
  async deleteTokenVersion(token: StoredToken) {
    this.tokens.delete(token.metadata.name);
    this.writes.push(`delete ${token.metadata.name}`);
  }
  async setFinalizer(token: StoredToken, present: boolean) {
    const stored = this.tokens.get(token.metadata.name) as StoredToken;
    const has = stored.metadata.finalizers?.includes(TOKEN_FINALIZER) ?? false;
    if (has === present) return undefined;
    stored.metadata.finalizers = present ? [TOKEN_FINALIZER] : [];
    stored.metadata.resourceVersion = this.nextRv();
    this.writes.push(`finalizer ${token.metadata.name}`);
    return clone(stored);
  }
  async deleteBootstrapSecret(tokenId: string) {
    this.writes.push(`delete-secret ${tokenId}`);
    return this.secrets.delete(tokenId);
  }
  async decideCsr(csr: CsrObject, approve: boolean, reason: string) {
    await this.hook('decideCsr');
    const stored = this.csrs.get(csr.metadata.name) as CsrObject;
    if (stored.metadata.resourceVersion !== csr.metadata.resourceVersion)
      throw new KubeError(409, 'Conflict', 'csr changed');
    stored.status = { conditions: [{ type: approve ? 'Approved' : 'Denied', status: 'True', reason }] };
    stored.metadata.resourceVersion = this.nextRv();
    this.writes.push(`${approve ? 'approve' : 'deny'} ${csr.metadata.name} ${reason}`);
    return clone(stored);
  }
  async flavoredTokenExists(name: string) {
    return this.tokens.has(name);
  }
  async readCsr(name: string) {
    await this.hook('readCsr');
    return clone(this.csrs.get(name));
  }
  async readNode(name: string) {
    await this.hook('readNode');
    return clone(this.nodes.get(name));
  }
  async createClaim(claim: NodeNameClaim) {
    await this.hook('createClaim');
    const name = claim.metadata.name as string;
    if (this.claims.has(name)) throw new KubeError(409, 'AlreadyExists', `claim ${name} exists`);
    const written = clone(claim);
    written.metadata = { ...written.metadata, uid: `uid-claim-${name}`, resourceVersion: this.nextRv() };
    this.claims.set(name, written);
    this.writes.push(`claim ${name} ${claim.spec.holder?.tokenID}`);
    return clone(written);
  }
  async readClaim(name: string) {
    await this.hook('readClaim');
    return clone(this.claims.get(name));
  }
  async replaceClaim(claim: NodeNameClaim) {
    await this.hook('replaceClaim');
    const name = claim.metadata.name as string;
    const stored = this.claims.get(name);
    if (!stored || stored.metadata.resourceVersion !== claim.metadata.resourceVersion)
      throw new KubeError(409, 'Conflict', 'claim changed');
    const written = clone(claim);
    written.metadata.resourceVersion = this.nextRv();
    this.claims.set(name, written);
    this.writes.push(
      `${claim.spec.holder ? `claim ${name} ${claim.spec.holder.tokenID}` : `release ${name}`}`,
    );
    return clone(written);
  }
  async writeClassStatus(flavorClass: StoredFlavorClass, status: FlavorClassStatus) {
    this.writes.push(`class-status ${flavorClass.metadata.name}`);
    return { ...clone(flavorClass), status: clone(status) };
  }
}

/** RFC 6902 for the operations nodeStatePatch makes; false when a `test` fails. */
function applyJsonPatch(doc: Record<string, unknown>, ops: object[]): boolean {
  const walk = (path: string) => {
    const parts = path
      .split('/')
      .slice(1)
      .map((p) => p.replaceAll('~1', '/').replaceAll('~0', '~'));
    const last = parts.pop() as string;
    let parent: Record<string, unknown> | unknown[] = doc;
    for (const part of parts) parent = (parent as Record<string, unknown>)[part] as Record<string, unknown>;
    return { parent: parent as Record<string, unknown> & unknown[], last };
  };
  for (const op of ops as { op: string; path: string; value?: unknown }[]) {
    const { parent, last } = walk(op.path);
    if (op.op === 'test') {
      const actual = parent?.[last as never];
      if (JSON.stringify(actual ?? null) !== JSON.stringify(op.value ?? null)) return false;
    } else if (op.op === 'remove') {
      if (Array.isArray(parent)) parent.splice(Number(last), 1);
      else delete parent[last];
    } else if (op.op === 'add' && Array.isArray(parent) && last === '-') parent.push(op.value);
    else (parent as Record<string, unknown>)[last] = clone(op.value);
  }
  return true;
}

/** One controller (its in-memory state included) over the fake API: a restart is a new Harness. */
class Harness {
  now = T0;
  readonly caches = {
    nodes: new LaggingCache<TrimmedNode>(),
    csrs: new LaggingCache<CsrObject>(),
    tokens: new LaggingCache<StoredToken>(),
    classes: new LaggingCache<StoredFlavorClass>(),
    claims: new LaggingCache<NodeNameClaim & { metadata: { name: string } }>(),
  };
  readonly indexes = new Indexes();
  readonly events: string[] = [];
  private readonly queues = { tokens: new Set<string>(), nodes: new Set<string>(), csrs: new Set<string>() };
  private readonly timers: { due: number; queue: 'tokens' | 'nodes' | 'csrs'; key: string }[] = [];
  readonly ctx: ControllerContext;

  readonly api: FakeApi;
  readonly keyRing = RING;
  /** Watches that lag: they deliver nothing until released. */
  readonly held = new Set<'tokens' | 'nodes' | 'csrs' | 'claims'>();
  private readonly lastDeliveredClaim = new Map<string, NodeNameClaim>();
  private readonly delivered = new Map<string, string>();
  private readonly lastDeliveredToken = new Map<string, StoredToken>();
  private readonly lastDeliveredNodes = new Set<string>();

  constructor(api: FakeApi, settings: Record<string, unknown> = {}) {
    this.api = api;
    this.caches.classes.assume({
      metadata: { name: FLAVOR, resourceVersion: '1', generation: 1 },
      spec: { labels: { 'nodeflavor.io/flavor': FLAVOR } },
    });
    const later = (queue: 'tokens' | 'nodes' | 'csrs') => (key: string, afterMs: number) =>
      this.timers.push({ due: this.now + afterMs, queue, key });
    this.ctx = {
      kubeConfig: undefined as never,
      config: parseConfig({ namespace: 'nodeflavor', bindingGrace: '3s', orphanGrace: '2s', ...settings }),
      caches: this.caches,
      indexes: this.indexes,
      metrics: controllerMetrics(new Registry()),
      events: { emit: (o, type, reason) => this.events.push(`${type} ${reason} ${o.kind}/${o.name}`) },
      api,
      log: pino({ level: 'silent' }),
      keyRing: async () => this.keyRing,
      freshKeyRing: async () => this.keyRing,
      now: () => new Date(this.now),
      enqueueNode: (name) => this.queues.nodes.add(name),
      requeueNode: later('nodes'),
      enqueueToken: (name) => this.queues.tokens.add(name),
      recordOnToken: (name) => this.queues.tokens.add(name),
      requeueToken: later('tokens'),
      enqueueCsr: (name) => this.queues.csrs.add(name),
      requeueCsr: later('csrs'),
    };
  }

  /**
   * The watches deliver what changed in the API since they last did, and the manager's handlers
   * run: indexes follow, and the keys it maps each event to are queued. Returns how many events.
   */
  deliver(): number {
    let events = 0;
    const held = this.held;
    // What the watch delivered last, per object: our own writes' answers sit in the caches
    // already (assume), and their watch events still come, as on a real API server.
    const changed = <T extends Named>(cache: LaggingCache<T>, object: T) => {
      const key = `${Object.keys(this.caches).find((k) => this.caches[k as keyof Harness['caches']] === (cache as unknown))}/${object.metadata.name}`;
      if (this.delivered.get(key) === object.metadata.resourceVersion) return false;
      this.delivered.set(key, object.metadata.resourceVersion ?? '');
      return true;
    };
    for (const [name, token] of held.has('tokens') ? [] : this.api.tokens) {
      if (!changed(this.caches.tokens, token)) continue;
      events += 1;
      const previous = this.lastDeliveredToken.get(name);
      this.lastDeliveredToken.set(name, clone(token));
      this.indexes.onToken(clone(token), previous);
      this.caches.tokens.objects.set(name, clone(token));
      this.queues.tokens.add(name);
      for (const b of [...(previous?.status?.bindings ?? []), ...(token.status?.bindings ?? [])])
        this.queues.nodes.add(b.nodeName);
    }
    for (const [name, node] of held.has('nodes') ? [] : this.api.nodes) {
      if (!changed(this.caches.nodes, node)) continue;
      events += 1;
      const added = !this.lastDeliveredNodes.has(name);
      this.lastDeliveredNodes.add(name);
      this.caches.nodes.objects.set(name, clone(node));
      this.queues.nodes.add(name);
      if (added)
        for (const tokenName of this.indexes.tokensByNodeName.get(name)) this.queues.tokens.add(tokenName);
    }
    for (const [name, claim] of held.has('claims') ? [] : this.api.claims) {
      const named = claim as NodeNameClaim & { metadata: { name: string } };
      if (!changed(this.caches.claims, named)) continue;
      events += 1;
      this.indexes.onClaim(clone(claim), this.lastDeliveredClaim.get(name));
      this.lastDeliveredClaim.set(name, clone(claim));
      this.caches.claims.objects.set(name, clone(named));
      this.queues.nodes.add(name);
      if (claim.spec.holder) this.queues.tokens.add(claim.spec.holder.tokenName);
    }
    for (const [name, csr] of held.has('csrs') ? [] : this.api.csrs) {
      if (!changed(this.caches.csrs, csr)) continue;
      events += 1;
      this.caches.csrs.objects.set(name, clone(csr));
      this.indexes.onCsr(csr, false);
      const tokenName = this.indexes.tokenNameById.get(csrTokenId(csr) ?? '');
      if (tokenName) this.queues.tokens.add(tokenName);
      else this.queues.csrs.add(name);
    }
    return events;
  }

  /** Runs what is queued, lets the watches deliver, and again, until nothing is left to do. */
  async settle(): Promise<void> {
    for (let round = 0; ; round++) {
      assert.ok(round < 50, 'the reconcilers keep waking each other: no quiescence');
      const batch = [
        ...[...this.queues.tokens].map((k) => () => reconcileToken(this.ctx, k)),
        ...[...this.queues.csrs].map((k) => () => reconcileCsr(this.ctx, k)),
        ...[...this.queues.nodes].map((k) => () => reconcileNode(this.ctx, k)),
      ];
      for (const queue of Object.values(this.queues)) queue.clear();
      for (const run of batch) await run();
      const delivered = this.deliver();
      if (batch.length === 0 && delivered === 0) return;
    }
  }

  /** A resync: every key once more (what the manager does every --resync). */
  resync(): void {
    for (const name of this.caches.tokens.keys()) this.queues.tokens.add(name);
    for (const name of this.caches.nodes.keys()) this.queues.nodes.add(name);
  }

  /** The clock moves on; keys whose time came are queued. */
  advance(ms: number): void {
    this.now += ms;
    for (const timer of this.timers.splice(0)) {
      if (timer.due <= this.now) this.queues[timer.queue].add(timer.key);
      else this.timers.push(timer);
    }
  }
}

const RING = newKeyRing();

let serial = 0;
/** A token as the issuer leaves it: record, finalizer, issued mark, and its bootstrap Secret. */
function issueToken(api: FakeApi, at = T0) {
  serial += 1;
  const tokenId = `tok${String(serial).padStart(3, '0')}`;
  const name = `ft-${tokenId}`;
  api.tokens.set(name, {
    apiVersion: 'nodeflavor.io/v1alpha1',
    kind: 'FlavoredToken',
    metadata: {
      name,
      uid: `uid-${name}`,
      resourceVersion: api.nextRv(),
      creationTimestamp: rfc3339(new Date(at)),
      generation: 1,
      labels: { [TOKEN_ID_LABEL]: tokenId },
      annotations: { [ISSUED_ANNOTATION]: 'true' },
      finalizers: [TOKEN_FINALIZER],
    },
    spec: { flavorClassName: FLAVOR, maxUses: 1, ttl: '1h' },
  } as unknown as StoredToken);
  api.secrets.add(tokenId);
  return { name, tokenId, flavorToken: deriveFlavorToken(RING.active, tokenId, FLAVOR).reveal() };
}

async function kubeletCsr(
  api: FakeApi,
  tokenId: string,
  nodeName: string,
  at: number,
  name = `csr-${nodeName}`,
): Promise<string> {
  const { csrPem } = await createCertificateRequest(`system:node:${nodeName}`, ['system:nodes']);
  api.csrs.set(name, {
    metadata: {
      name,
      uid: `uid-${name}`,
      resourceVersion: api.nextRv(),
      creationTimestamp: rfc3339(new Date(at)),
    },
    spec: {
      username: `system:bootstrap:${tokenId}`,
      signerName: 'kubernetes.io/kube-apiserver-client-kubelet',
      request: Buffer.from(csrPem).toString('base64'),
      groups: [GROUP, 'system:authenticated'],
      usages: ['digital signature', 'client auth'],
    },
    status: {},
  } as CsrObject);
  return name;
}

function registerNode(api: FakeApi, nodeName: string, flavorToken: string, at: number): void {
  api.nodes.set(nodeName, {
    metadata: {
      name: nodeName,
      uid: `uid-${nodeName}`,
      resourceVersion: api.nextRv(),
      creationTimestamp: rfc3339(new Date(at)),
      labels: { 'kubernetes.io/hostname': nodeName, 'nodeflavor.io/token': flavorToken },
      annotations: { 'volumes.kubernetes.io/controller-managed-attach-detach': 'true' },
    },
    spec: { taints: [QUARANTINE] },
  });
}

function assertFlavored(api: FakeApi, nodeName: string, tokenName: string): void {
  const node = api.nodes.get(nodeName) as TrimmedNode;
  assert.equal(node.metadata.labels?.['nodeflavor.io/flavor'], FLAVOR, 'flavored');
  assert.equal(node.metadata.labels?.['nodeflavor.io/token'], undefined, 'token label removed');
  assert.equal(node.metadata.labels?.['nodeflavor.io/joined'], 'true', 'marked as joined through nodeflavor');
  assert.deepEqual(node.spec.taints, [], 'quarantine lifted');
  const status = (api.tokens.get(tokenName) as StoredToken).status;
  assert.equal(status?.uses, 1);
  assert.equal(status?.bindings?.[0]?.nodeUID, node.metadata.uid);
  assert.ok(status?.bindings?.[0]?.verifiedAt, 'the verification is on the token');
  assert.ok(status?.conditions?.some((c) => c.type === 'SecretDeleted' && c.status === 'True'));
}

/** A kubelet's CSR made and bound: the node may register now (it has its certificate). */
async function approved(h: Harness, tokenId: string, nodeName: string): Promise<void> {
  const csr = await kubeletCsr(h.api, tokenId, nodeName, h.now + 1000);
  h.now += 1000;
  await h.settle();
  assert.equal(h.api.writes.at(-1), `approve ${csr} NodeflavorBound`);
}

/** A fresh controller whose node `nodeName` registered (bound, approved) and was delivered. */
async function registered(nodeName: string) {
  const api = new FakeApi();
  const h = new Harness(api);
  const t = issueToken(api);
  h.deliver();
  await approved(h, t.tokenId, nodeName);
  registerNode(api, nodeName, t.flavorToken, h.now + 1000);
  h.deliver();
  return { api, h, t };
}

/** Another pass over everything writes nothing: the state is a fixed point. */
async function assertQuiescent(h: Harness): Promise<void> {
  const before = h.api.writes.length;
  h.deliver();
  h.resync();
  await h.settle();
  assert.deepEqual(h.api.writes.slice(before), [], 'a settled state writes nothing more');
}

describe('reconcilers on event sequences (fake API, lagging caches, fake clock)', () => {
  it('CSR, then Node: bind, approve, one Node write, then the token records it with the Secret gone', async () => {
    const api = new FakeApi();
    const h = new Harness(api);
    const t = issueToken(api);
    const csr = await kubeletCsr(api, t.tokenId, 'n1', T0 + 1000);
    h.deliver();
    await h.settle();
    assert.deepEqual(api.writes, [
      `claim n1 ${t.tokenId}`,
      `status ${t.name}`,
      `approve ${csr} NodeflavorBound`,
    ]);
    registerNode(api, 'n1', t.flavorToken, T0 + 2000);
    h.deliver();
    await h.settle();
    assert.deepEqual(api.writes.slice(3), ['node n1', `delete-secret ${t.tokenId}`, `status ${t.name}`]);
    assertFlavored(api, 'n1', t.name);
    assert.ok(!api.secrets.has(t.tokenId));
    assert.deepEqual(
      h.events.filter((e) => e.startsWith('Normal')),
      [],
      'no Normal Event on the join (--verified-events is off by default)',
    );
    await assertQuiescent(h);
  });

  it('with --verified-events, the flavored Node gets one Normal Verified Event', async () => {
    const api = new FakeApi();
    const h = new Harness(api, { verifiedEvents: true });
    const t = issueToken(api);
    await kubeletCsr(api, t.tokenId, 'n1', T0 + 1000);
    h.deliver();
    await h.settle();
    registerNode(api, 'n1', t.flavorToken, T0 + 2000);
    h.deliver();
    await h.settle();
    assert.deepEqual(
      h.events.filter((e) => e.startsWith('Normal')),
      ['Normal Verified Node/n1'],
    );
  });

  it('a Node registered and deleted before its token recorded it: a second CSR for the name with the same token is never approved', async () => {
    const api = new FakeApi();
    const h = new Harness(api);
    const t = issueToken(api);
    const first = await kubeletCsr(api, t.tokenId, 'n1', T0 + 1000);
    h.deliver();
    await h.settle();
    assert.equal(api.writes.at(-1), `approve ${first} NodeflavorBound`);
    // kube-controller-manager signs it; the machine registers a Node with it and deletes it again
    // before our watches bring either (the binding records no Node UID).
    const signed = api.csrs.get(first) as CsrObject;
    signed.status = { ...signed.status, certificate: 'LS0tLS1CRUdJTi0=' };
    signed.metadata.resourceVersion = api.nextRv();
    const second = await kubeletCsr(api, t.tokenId, 'n1', T0 + 3000, 'csr-n1-second');
    h.deliver();
    await h.settle();
    assert.ok(
      !api.writes.includes(`approve ${second} NodeflavorBound`),
      'a second machine on one single use',
    );
    assert.ok(api.writes.includes(`deny ${second} AlreadyJoined`), api.writes.join('\n'));
  });

  it('a new leader sees the Node before its token and CSR: it waits (grace) instead of judging, then verifies', async () => {
    const api = new FakeApi();
    const t = issueToken(api);
    const old = new Harness(api);
    old.deliver();
    await approved(old, t.tokenId, 'n2');
    registerNode(api, 'n2', t.flavorToken, old.now + 1000);
    // The old leader is gone; the new one's Node watch delivers first, its token and CSR watches lag.
    const h = new Harness(api);
    h.now = old.now + 1500;
    h.held.add('tokens').add('csrs');
    const before = api.writes.length;
    h.deliver();
    await h.settle();
    assert.deepEqual(api.writes.slice(before), [], 'nothing judged while its binding may still come');
    h.held.clear();
    h.deliver();
    h.advance(5000);
    await h.settle();
    assertFlavored(api, 'n2', t.name);
    assert.equal(api.writes.filter((w: string) => w.startsWith('node ')).length, 1, 'one Node write');
    await assertQuiescent(h);
  });

  it('a crash after the Node write, before the token recorded it: the next process completes it and rewrites nothing', async () => {
    const api = new FakeApi();
    const t = issueToken(api);
    await kubeletCsr(api, t.tokenId, 'n3', T0 + 1000);
    const first = new Harness(api);
    first.deliver();
    await first.settle();
    registerNode(api, 'n3', t.flavorToken, T0 + 2000);
    first.deliver();
    // Only the node reconciler runs before the crash.
    const { reconcileNode: judge } = await import('../../src/controller/nodes.ts');
    await judge(first.ctx, 'n3');
    assert.equal(api.writes.at(-1), 'node n3');
    assert.equal((api.tokens.get(t.name) as StoredToken).status?.bindings?.[0]?.verifiedAt, undefined);
    const restarted = new Harness(api); // no memory of the first
    const before = api.writes.length;
    restarted.deliver();
    await restarted.settle();
    assert.deepEqual(api.writes.slice(before), [`delete-secret ${t.tokenId}`, `status ${t.name}`]);
    assertFlavored(api, 'n3', t.name);
    await assertQuiescent(restarted);
  });

  it('a conflicting writer: another controller adds a taint meanwhile; the write keeps it and does not conflict', async () => {
    const { api, h } = await registered('n4');
    // kube-controller-manager adds not-ready after our cache saw the Node.
    const notReady = { key: 'node.kubernetes.io/not-ready', effect: 'NoSchedule' };
    const theirs = api.nodes.get('n4') as TrimmedNode;
    theirs.spec.taints?.push(notReady);
    theirs.metadata.resourceVersion = api.nextRv();
    h.held.add('nodes'); // our cache has not seen it when we write
    await h.settle();
    const node = api.nodes.get('n4') as TrimmedNode;
    assert.deepEqual(node.spec.taints, [notReady], 'ours lifted, theirs kept');
    assert.equal(api.writes.filter((w: string) => w === 'node n4').length, 1, 'no conflict, no second write');
    assert.equal(node.metadata.labels?.['nodeflavor.io/flavor'], FLAVOR);
  });

  it('a conflicting writer on a judged fact (the token label changed meanwhile): no write over it, judged again', async () => {
    const { api, h, t } = await registered('n5');
    const changed = api.nodes.get('n5') as TrimmedNode;
    changed.metadata.labels = { 'nodeflavor.io/token': 'x'.repeat(52) };
    changed.metadata.resourceVersion = api.nextRv();
    h.held.add('nodes'); // our cache still shows the label as it was
    await h.settle();
    assert.equal(
      api.writes.filter((w: string) => w === 'node n5').length,
      0,
      'the write that rested on the old label did not land',
    );
    h.held.clear();
    h.deliver();
    h.advance(1500);
    await h.settle();
    const node = api.nodes.get('n5') as TrimmedNode;
    assert.equal(node.metadata.labels?.['nodeflavor.io/flavor'], undefined, 'not flavored on a wrong token');
    assert.ok(h.events.includes('Warning InvalidToken Node/n5'));
    const binding = (api.tokens.get(t.name) as StoredToken).status?.bindings?.[0];
    assert.equal(binding?.failure?.reason, 'InvalidToken', 'the token says why');
    await assertQuiescent(h);
  });

  it('a revoked token (StripNodes) strips its node once and both reconcilers then rest', async () => {
    const { api, h, t } = await registered('n6');
    await h.settle();
    assertFlavored(api, 'n6', t.name);
    const token = api.tokens.get(t.name) as StoredToken;
    Object.assign(token.spec, { revoked: true, revocationPolicy: 'StripNodes' });
    token.metadata.resourceVersion = api.nextRv();
    h.deliver();
    await h.settle();
    const node = api.nodes.get('n6') as TrimmedNode;
    assert.equal(node.metadata.labels?.['nodeflavor.io/flavor'], undefined, 'stripped');
    assert.deepEqual(node.spec.taints, [QUARANTINE], 'quarantined again');
    await assertQuiescent(h);
  });
});

/** The condition a CSR was decided with, as the API server has it. */
function decisionOf(api: FakeApi, csrName: string): string | undefined {
  const condition = api.csrs.get(csrName)?.status?.conditions?.[0];
  return condition ? `${condition.type} ${condition.reason}` : undefined;
}

/** Revokes a token on the API server's side (the issuer's spec.revoked), as another actor would. */
function revoke(api: FakeApi, tokenName: string): void {
  const token = api.tokens.get(tokenName) as StoredToken;
  (token.spec as Record<string, unknown>).revoked = true;
  token.metadata.resourceVersion = api.nextRv();
}

describe('one node name, two tokens at the same instant: a name is claimed exactly once (ADR 0011)', () => {
  // Token B's whole pass (bind, then its CSR's approval) runs while token A's pass waits at each
  // of its API calls in turn: every way the two can interleave at the API, with caches that
  // deliver nothing in between (the watch has not brought either token's binding to the other).
  const points = ['createClaim', 'readClaim', 'writeTokenStatus', 'readToken', 'readNode', 'decideCsr'];
  const cases = [
    { name: 'A whole, then B whole, no watch event in between', point: undefined, nth: 0 },
    ...points.flatMap((point) =>
      [1, 2].map((nth) => ({ name: `B runs at A's ${nth}. ${point}`, point, nth })),
    ),
  ];
  for (const { name, point, nth } of cases) {
    it(name, async () => {
      const api = new FakeApi();
      const h = new Harness(api);
      const a = issueToken(api);
      const b = issueToken(api);
      const csrA = await kubeletCsr(api, a.tokenId, 'n1', T0 + 1000, 'csr-a');
      const csrB = await kubeletCsr(api, b.tokenId, 'n1', T0 + 1000, 'csr-b');
      h.now = T0 + 1000;
      h.deliver();
      const runB = async () => {
        await reconcileToken(h.ctx, b.name);
        await reconcileCsr(h.ctx, csrB);
      };
      if (point) {
        let seen = 0;
        api.before.set(point, async () => {
          if (++seen !== nth) return;
          api.before.clear();
          await runB();
        });
      }
      await reconcileToken(h.ctx, a.name);
      await reconcileCsr(h.ctx, csrA);
      api.before.clear();
      if (!point) await runB();
      await h.settle();
      h.advance(5_000);
      await h.settle();

      const decisions = [decisionOf(api, csrA), decisionOf(api, csrB)];
      const approvedCount = decisions.filter((d) => d?.startsWith('Approved')).length;
      assert.equal(approvedCount, 1, `exactly one CSR approved: ${JSON.stringify(decisions)}`);
      assert.ok(
        decisions.some((d) => d === 'Denied NameTaken'),
        `the other is denied NameTaken: ${JSON.stringify(decisions)}`,
      );
      const winner = decisions[0]?.startsWith('Approved') ? a : b;
      assert.equal(api.claims.get('n1')?.spec.holder?.tokenName, winner.name, 'the claim names the winner');
      const boundBy = [a, b].filter((t) =>
        (api.tokens.get(t.name)?.status?.bindings ?? []).some((binding) => binding.nodeName === 'n1'),
      );
      assert.deepEqual(
        boundBy.map((t) => t.name),
        [winner.name],
        'only the winner records a binding of the name',
      );
    });
  }

  it('many rounds, random order of the two passes and of the watch: never two approvals', async () => {
    for (let round = 0; round < 40; round++) {
      const api = new FakeApi();
      const h = new Harness(api);
      const tokens = [issueToken(api), issueToken(api)];
      const csrs = await Promise.all(
        tokens.map((t, i) => kubeletCsr(api, t.tokenId, `r${round}`, T0 + 1000, `csr-${round}-${i}`)),
      );
      h.now = T0 + 1000;
      h.deliver();
      const order = round % 2 === 0 ? [0, 1] : [1, 0];
      const pick = (round >> 1) % points.length;
      const first = order[0] as number;
      const second = order[1] as number;
      api.before.set(points[pick] as string, async () => {
        api.before.clear();
        if (round % 3 === 0) h.deliver();
        await reconcileToken(h.ctx, (tokens[second] as { name: string }).name);
        await reconcileCsr(h.ctx, csrs[second] as string);
      });
      await reconcileToken(h.ctx, (tokens[first] as { name: string }).name);
      await reconcileCsr(h.ctx, csrs[first] as string);
      api.before.clear();
      await h.settle();
      h.advance(5_000);
      await h.settle();
      const approvedCount = csrs.filter((c) => decisionOf(api, c)?.startsWith('Approved')).length;
      assert.equal(approvedCount, 1, `round ${round}: ${csrs.map((c) => decisionOf(api, c)).join(', ')}`);
    }
  });
});

/**
 * One token's CSR for n1, whose approval meets `interfere` at the first call named `at` (before
 * it reaches the API): the scenario runs to rest, with time enough for every retry.
 */
type Issued = ReturnType<typeof issueToken>;

async function approvalMeets(
  at: string,
  interfere: (api: FakeApi, h: Harness, tokens: { t: Issued; other: Issued }) => void,
) {
  const api = new FakeApi();
  const h = new Harness(api);
  const t = issueToken(api);
  const other = issueToken(api);
  const csr = await kubeletCsr(api, t.tokenId, 'n1', T0 + 1000);
  h.now = T0 + 1000;
  h.deliver();
  api.before.set(at, () => {
    api.before.clear();
    interfere(api, h, { t, other });
  });
  await h.settle();
  h.advance(5_000);
  await h.settle();
  assert.ok(!api.writes.some((w) => w.startsWith(`approve ${csr}`)), 'never approved');
  return { api, other, decision: decisionOf(api, csr) };
}

describe('an approval is carried out only from fresh state', () => {
  it('a revocation that lands between the binding and the approval: never approved; denied, name released', async () => {
    const { api, decision } = await approvalMeets('readToken', (api, _h, { t }) => revoke(api, t.name));
    assert.equal(decision, 'Denied Revoked');
    assert.equal(api.claims.get('n1')?.spec.holder, undefined, 'the name is free again');
    assert.ok(api.claims.get('n1')?.spec.releasedAt, 'the claim records its release');
  });

  it('a token deleted between the binding and the approval: never approved', async () => {
    const { decision } = await approvalMeets('readToken', (api, h, { t }) => {
      const token = api.tokens.get(t.name) as StoredToken;
      token.metadata.deletionTimestamp = rfc3339(new Date(h.now));
      token.metadata.resourceVersion = api.nextRv();
    });
    assert.equal(decision, 'Denied Revoked');
  });

  it('a Node of the name registered by another machine before the approval: never approved; denied NameTaken', async () => {
    const { api, decision } = await approvalMeets('readNode', (api, h, { other }) =>
      registerNode(api, 'n1', other.flavorToken, h.now),
    );
    assert.equal(decision, 'Denied NameTaken');
    assert.equal(api.claims.get('n1')?.spec.holder, undefined, 'the name is released');
  });

  it('a claim taken away (deleted by an admin and claimed by another token) before the approval: never approved', async () => {
    const { api, other, decision } = await approvalMeets('readClaim', (api, h, { other }) => {
      // The other token holds the name now, with a live binding of its own.
      const claim = api.claims.get('n1') as NodeNameClaim;
      const boundAt = rfc3339(new Date(h.now));
      claim.spec = {
        holder: {
          tokenName: other.name,
          tokenUID: `uid-${other.name}`,
          tokenID: other.tokenId,
          csrName: 'csr-other',
          claimedAt: boundAt,
        },
      };
      claim.metadata.resourceVersion = api.nextRv();
      const token = api.tokens.get(other.name) as StoredToken;
      token.status = { bindings: [{ nodeName: 'n1', csrName: 'csr-other', boundAt }], uses: 1 };
      token.metadata.resourceVersion = api.nextRv();
    });
    assert.equal(decision, 'Denied NameTaken');
    assert.equal(api.claims.get('n1')?.spec.holder?.tokenName, other.name, 'the other token keeps the name');
  });
});

// Issue 32: a token bound to a TPM earns one join per proof of its machine, decided on the token's
// durable state (which proof each binding used), never on whether its bootstrap Secret is gone yet
// (the API server keeps authenticating a deleted Secret's token for a while, its 10 s cache), nor
// on times compared in whole seconds.
describe('attested tokens: one join per proof (issue 32)', () => {
  const EK =
    '-----BEGIN PUBLIC KEY-----\nMIIBIjANBgkqhkiG9w0BAQEFAAOCAQ8AMIIBCgKCAQEA\n-----END PUBLIC KEY-----\n';

  /** A rejoin token bound to a TPM, as the issuer leaves it: no bootstrap Secret until a proof. */
  function rejoinToken(api: FakeApi, nodeName: string) {
    const t = issueToken(api);
    api.secrets.delete(t.tokenId);
    const token = api.tokens.get(t.name) as StoredToken;
    token.spec = { ...token.spec, nodeName, attestation: { ekPublicKey: EK, allowRejoin: true } };
    return t;
  }

  /** The issuer records its machine's proof number `count` (at `at`) and mints a new Secret. */
  function prove(api: FakeApi, t: { name: string; tokenId: string }, count: number, at: string): void {
    const token = api.tokens.get(t.name) as StoredToken & {
      metadata: { annotations?: Record<string, string> };
    };
    token.metadata.annotations = {
      ...token.metadata.annotations,
      // (`ticket` too: what the issuer wrote before issue 32, so this runs against that code as well)
      [ATTESTED_ANNOTATION]: JSON.stringify({ ticket: Date.parse(at) - 1000, count, at }),
    };
    token.metadata.resourceVersion = api.nextRv();
    api.secrets.add(t.tokenId);
  }

  /** The Node deleted (a re-install), as the Node watch delivers a deletion. */
  function deleteNode(h: Harness, name: string): void {
    const node = h.api.nodes.get(name) as TrimmedNode;
    h.api.nodes.delete(name);
    h.caches.nodes.objects.delete(name);
    h.indexes.onNodeDeleted(node);
    h.indexes.nodeFlavors.onNode('DELETED', node);
    for (const tokenName of h.indexes.tokensByNodeName.get(name)) h.ctx.enqueueToken(tokenName);
    h.ctx.enqueueNode(name);
  }

  /** Its machine attests (proof 1) and joins: bound, approved, registered, verified. */
  async function joinedOnce() {
    const api = new FakeApi();
    const h = new Harness(api);
    const t = rejoinToken(api, 'n1');
    prove(api, t, 1, new Date(T0 + 500).toISOString());
    h.deliver();
    await approved(h, t.tokenId, 'n1');
    registerNode(api, 'n1', t.flavorToken, h.now + 1000);
    h.now += 1000;
    h.deliver();
    await h.settle();
    assertFlavored(api, 'n1', t.name);
    return { api, h, t };
  }

  it('its Node deleted, a copied bootstrap token of the first proof (still cached by the API server) earns no second join', async () => {
    const { api, h, t } = await joinedOnce();
    deleteNode(h, 'n1');
    await h.settle();
    assert.deepEqual((api.tokens.get(t.name) as StoredToken).status?.bindings, [], 'the binding is released');
    // Someone who copied the first proof's bootstrap token asks for the name within the cache window.
    const copied = await kubeletCsr(api, t.tokenId, 'n1', h.now + 1000, 'csr-n1-copied');
    h.now += 1000;
    h.deliver();
    await h.settle();
    assert.ok(
      !api.writes.includes(`approve ${copied} NodeflavorBound`),
      `a second join on one proof:\n${api.writes.join('\n')}`,
    );
    assert.equal(decisionOf(api, copied), 'Denied NoUsesLeft');
    // Its machine, re-installed, proves itself again: that proof earns the join.
    prove(api, t, 2, new Date(h.now + 500).toISOString());
    const rejoined = await kubeletCsr(api, t.tokenId, 'n1', h.now + 2000, 'csr-n1-rejoined');
    h.now += 2000;
    h.deliver();
    await h.settle();
    assert.equal(decisionOf(api, rejoined), 'Approved NodeflavorBound');
    const status = (api.tokens.get(t.name) as StoredToken).status;
    assert.equal(status?.bindings?.[0]?.attestation, 2, 'the binding records the proof it used');
    assert.equal(status?.attestation?.bound, 2);
  });

  it("a proof recorded in the same second as the last Secret deletion: that proof's Secret is deleted after its join all the same", async () => {
    const { api, h, t } = await joinedOnce();
    const deletedAt = (api.tokens.get(t.name) as StoredToken).status?.conditions?.find(
      (c) => c.type === 'SecretDeleted',
    )?.lastTransitionTime;
    assert.ok(deletedAt && !api.secrets.has(t.tokenId));
    deleteNode(h, 'n1');
    await h.settle();
    // Proof 2 lands in the second the deletion was recorded in (its time in whole seconds).
    prove(api, t, 2, deletedAt);
    const csr = await kubeletCsr(api, t.tokenId, 'n1', h.now + 2000, 'csr-n1-second');
    h.now += 2000;
    h.deliver();
    await h.settle();
    assert.equal(decisionOf(api, csr), 'Approved NodeflavorBound');
    registerNode(api, 'n1', t.flavorToken, h.now + 1000);
    h.now += 1000;
    h.deliver();
    await h.settle();
    assert.ok(!api.secrets.has(t.tokenId), "proof 2's Secret is deleted once its join registered");
    assert.equal((api.tokens.get(t.name) as StoredToken).status?.attestation?.deleted, 2);
  });

  it('a flavor that requires a measured boot state is not given on an EK certificate issuer written by hand (no seal)', async () => {
    const api = new FakeApi();
    const h = new Harness(api);
    h.caches.classes.assume({
      metadata: { name: 'measured', resourceVersion: '2', generation: 1 },
      spec: {
        labels: { 'nodeflavor.io/flavor': 'measured' },
        measuredBoot: { pcrs: [{ index: 7, sha256: 'ab'.repeat(32) }] },
      },
    });
    // Written directly: a record for the class, bound to a "TPM" by a certificate issuer typed in,
    // with a bootstrap Secret and the flavor token of someone who holds the key ring... or a forged quote.
    const t = issueToken(api);
    const token = api.tokens.get(t.name) as StoredToken;
    token.spec = {
      ...token.spec,
      flavorClassName: 'measured',
      attestation: { ekPublicKey: EK, ekCertificateIssuer: 'CN=Example TPM EK CA', allowRejoin: false },
    };
    prove(api, t, 1, new Date(T0 + 500).toISOString());
    const flavorToken = deriveFlavorToken(RING.active, t.tokenId, 'measured').reveal();
    h.deliver();
    await approved(h, t.tokenId, 'n1');
    registerNode(api, 'n1', flavorToken, h.now + 1000);
    h.now += 1000;
    h.deliver();
    await h.settle();
    const node = api.nodes.get('n1') as TrimmedNode;
    assert.equal(node.metadata.labels?.['nodeflavor.io/flavor'], undefined, 'no measured-boot flavor');
    assert.ok(h.events.includes('Warning AttestationRequired Node/n1'), h.events.join('\n'));
  });
});
