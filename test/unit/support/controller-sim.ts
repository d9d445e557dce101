// The controller's reconcilers on event sequences, without an API server: a fake API (the objects,
// JSON patch preconditions, resourceVersion checks and finalizers the real one applies, and every
// request in order), caches that lag it until the test says the watch delivered, the real wiring
// table routing every event (src/controller/wiring.ts), and a fake clock. A restart is a new
// ControllerSim over the same FakeApi: it starts from the objects alone.
import assert from 'node:assert/strict';
import pino from 'pino';
import { Registry } from 'prom-client';
import { parseConfig } from '../../../src/config.ts';
import type { ControllerApi } from '../../../src/controller/api.ts';
import type { CacheName, ControllerContext } from '../../../src/controller/context.ts';
import type { Reads } from '../../../src/controller/event-keys.ts';
import { Indexes } from '../../../src/controller/indexes.ts';
import { controllerMetrics } from '../../../src/controller/metrics.ts';
import { type Enqueue, routeEvents } from '../../../src/controller/routing.ts';
import { type QueueName, RECONCILERS } from '../../../src/controller/wiring.ts';
import type { DesiredNodeState } from '../../../src/flavor/converge.ts';
import { deriveFlavorToken } from '../../../src/flavor/flavor-token.ts';
import { newKeyRing } from '../../../src/flavor/keyring.ts';
import type { StoredFlavoredToken } from '../../../src/flavor/resources.ts';
import {
  type FlavorClassStatus,
  type FlavoredTokenStatus,
  ISSUED_ANNOTATION,
  type NodeNameClaim,
  type Stored,
  TOKEN_FINALIZER,
  TOKEN_ID_LABEL,
} from '../../../src/flavor/resources.ts';
import { rfc3339 } from '../../../src/flavor/rfc3339.ts';
import type { CsrObject } from '../../../src/kube/csrs.ts';
import type { StoredFlavorClass } from '../../../src/kube/flavor-classes.ts';
import { nodeStatePatch, type TrimmedNode } from '../../../src/kube/node-writes.ts';
import { createCertificateRequest } from '../../../src/pki/certs.ts';
import { KubeError } from '../../../src/runtime/kube-error.ts';
import type { EventHandler } from '../../../src/runtime/listwatch.ts';
import { MapCache } from './map-cache.ts';

export const FLAVOR = 'sweet';
export const GROUP = 'system:bootstrappers:nodeflavor';
export const QUARANTINE = { key: 'nodeflavor.io/unverified', effect: 'NoSchedule' };
export const T0 = Date.parse('2026-12-01T00:00:00Z');
export const RING = newKeyRing();

type Named = { metadata: { name: string; resourceVersion?: string } };
const clone = <T>(o: T): T => structuredClone(o);

/** The API server's side: objects, resourceVersions, and every request in order. */
export class FakeApi implements ControllerApi {
  rv = 100;
  readonly tokens = new Map<string, StoredFlavoredToken>();
  readonly nodes = new Map<string, TrimmedNode>();
  readonly csrs = new Map<string, CsrObject>();
  readonly secrets = new Set<string>();
  readonly claims = new Map<string, NodeNameClaim & Named>();
  readonly classes = new Map<string, StoredFlavorClass>();
  /** Every write, in order, as `verb object` (the tests' transcript). */
  readonly writes: string[] = [];
  /** Every request, reads included (`GET node n1`), for the request counts. */
  readonly requests: string[] = [];
  /** Runs before each call named here reaches the API: a test's hook to interleave another actor. */
  readonly before = new Map<string, () => Promise<void> | void>();
  private async hook(call: string) {
    await this.before.get(call)?.();
  }
  nextRv() {
    return String(++this.rv);
  }
  private write(line: string) {
    this.writes.push(line);
    this.requests.push(line);
  }
  async writeNode(node: TrimmedNode, desired: DesiredNodeState) {
    await this.hook('writeNode');
    const stored = this.nodes.get(node.metadata.name);
    const doc = clone(stored) as unknown as Record<string, unknown>;
    this.requests.push(`PATCH node ${node.metadata.name}`);
    if (!stored || !applyJsonPatch(doc, nodeStatePatch(node, desired)))
      throw new KubeError(409, 'Conflict', 'node changed since it was judged');
    const written = doc as unknown as TrimmedNode;
    written.metadata.resourceVersion = this.nextRv();
    this.nodes.set(node.metadata.name, written);
    this.writes.push(`node ${node.metadata.name}`);
    return clone(written);
  }
  async writeTokenStatus(token: StoredFlavoredToken, status: FlavoredTokenStatus) {
    await this.hook('writeTokenStatus');
    const stored = this.tokens.get(token.metadata.name);
    this.requests.push(`PUT status ${token.metadata.name}`);
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
    this.requests.push(`GET token ${name}`);
    return clone(this.tokens.get(name));
  }
  async deleteTokenVersion(token: StoredFlavoredToken) {
    this.tokens.delete(token.metadata.name);
    this.write(`delete ${token.metadata.name}`);
  }
  async setFinalizer(token: StoredFlavoredToken, present: boolean) {
    const stored = this.tokens.get(token.metadata.name) as StoredFlavoredToken;
    const has = stored.metadata.finalizers?.includes(TOKEN_FINALIZER) ?? false;
    if (has === present) return undefined;
    stored.metadata.finalizers = present ? [TOKEN_FINALIZER] : [];
    stored.metadata.resourceVersion = this.nextRv();
    this.write(`finalizer ${token.metadata.name}`);
    if (!present && stored.metadata.deletionTimestamp) this.tokens.delete(token.metadata.name);
    return clone(stored);
  }
  async deleteBootstrapSecret(tokenId: string) {
    await this.hook('deleteBootstrapSecret');
    this.write(`delete-secret ${tokenId}`);
    return this.secrets.delete(tokenId);
  }
  async decideCsr(csr: CsrObject, approve: boolean, reason: string) {
    await this.hook('decideCsr');
    const stored = this.csrs.get(csr.metadata.name) as CsrObject;
    this.requests.push(`PUT approval ${csr.metadata.name}`);
    if (stored.metadata.resourceVersion !== csr.metadata.resourceVersion)
      throw new KubeError(409, 'Conflict', 'csr changed');
    stored.status = { conditions: [{ type: approve ? 'Approved' : 'Denied', status: 'True', reason }] };
    stored.metadata.resourceVersion = this.nextRv();
    this.writes.push(`${approve ? 'approve' : 'deny'} ${csr.metadata.name} ${reason}`);
    return clone(stored);
  }
  async flavoredTokenExists(name: string) {
    this.requests.push(`GET token ${name}`);
    return this.tokens.has(name);
  }
  async readNode(name: string) {
    await this.hook('readNode');
    this.requests.push(`GET node ${name}`);
    return clone(this.nodes.get(name));
  }
  async createClaim(claim: NodeNameClaim) {
    await this.hook('createClaim');
    const name = claim.metadata.name as string;
    this.requests.push(`POST claim ${name}`);
    if (this.claims.has(name)) throw new KubeError(409, 'AlreadyExists', `claim ${name} exists`);
    const written = clone(claim) as NodeNameClaim & Named;
    written.metadata = {
      ...written.metadata,
      name,
      uid: `uid-claim-${name}`,
      resourceVersion: this.nextRv(),
    };
    this.claims.set(name, written);
    this.writes.push(`claim ${name} ${claim.spec.holder?.tokenID}`);
    return clone(written);
  }
  async readClaim(name: string) {
    await this.hook('readClaim');
    this.requests.push(`GET claim ${name}`);
    return clone(this.claims.get(name));
  }
  async replaceClaim(claim: NodeNameClaim) {
    await this.hook('replaceClaim');
    const name = claim.metadata.name as string;
    const stored = this.claims.get(name);
    this.requests.push(`PUT claim ${name}`);
    if (!stored || stored.metadata.resourceVersion !== claim.metadata.resourceVersion)
      throw new KubeError(409, 'Conflict', 'claim changed');
    const written = clone(claim) as NodeNameClaim & Named;
    written.metadata.resourceVersion = this.nextRv();
    const holderBefore = stored.spec.holder;
    const holder = claim.spec.holder;
    this.writes.push(
      !holder
        ? `release ${name}`
        : holderBefore?.tokenUID === holder.tokenUID && holderBefore.claimedAt === holder.claimedAt
          ? `record ${name}`
          : `claim ${name} ${holder.tokenID}`,
    );
    // A deletion asked for while a finalizer held it completes once the last one goes.
    if (written.metadata.deletionTimestamp && (written.metadata.finalizers ?? []).length === 0)
      this.claims.delete(name);
    else this.claims.set(name, written);
    return clone(written);
  }
  async deleteClaimVersion(claim: NodeNameClaim) {
    const name = claim.metadata.name as string;
    const stored = this.claims.get(name);
    this.requests.push(`DELETE claim ${name}`);
    if (!stored) return;
    if (stored.metadata.resourceVersion !== claim.metadata.resourceVersion)
      throw new KubeError(409, 'Conflict', 'claim changed');
    this.claims.delete(name);
    this.writes.push(`collect ${name}`);
  }
  /** An admin's `kubectl delete nodenameclaim`: held back by a finalizer, else gone at once. */
  adminDeleteClaim(name: string, at: number) {
    const stored = this.claims.get(name);
    if (!stored) return;
    if ((stored.metadata.finalizers ?? []).length === 0) this.claims.delete(name);
    else {
      stored.metadata.deletionTimestamp = rfc3339(new Date(at));
      stored.metadata.resourceVersion = this.nextRv();
    }
  }
  async writeClassStatus(flavorClass: StoredFlavorClass, status: FlavorClassStatus) {
    this.write(`class-status ${flavorClass.metadata.name}`);
    const written = { ...clone(flavorClass), status: clone(status) } as StoredFlavorClass;
    written.metadata.resourceVersion = this.nextRv();
    this.classes.set(flavorClass.metadata.name, written);
    return clone(written);
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

type CacheOf = {
  nodes: MapCache<TrimmedNode>;
  csrs: MapCache<CsrObject>;
  tokens: MapCache<StoredFlavoredToken>;
  classes: MapCache<StoredFlavorClass>;
  claims: MapCache<Stored<NodeNameClaim>>;
};

const SOURCES: Record<CacheName, (api: FakeApi) => Map<string, Named>> = {
  nodes: (api) => api.nodes as Map<string, Named>,
  csrs: (api) => api.csrs as Map<string, Named>,
  tokens: (api) => api.tokens as Map<string, Named>,
  classes: (api) => api.classes as Map<string, Named>,
  claims: (api) => api.claims as Map<string, Named>,
};

/** One controller (its caches and indexes) over the fake API: a restart is a new ControllerSim. */
export class ControllerSim {
  now = T0;
  readonly caches: CacheOf = {
    nodes: new MapCache<TrimmedNode>(),
    csrs: new MapCache<CsrObject>(),
    tokens: new MapCache<StoredFlavoredToken>(),
    classes: new MapCache<StoredFlavorClass>(),
    claims: new MapCache<Stored<NodeNameClaim>>(),
  };
  readonly indexes = new Indexes();
  readonly events: string[] = [];
  readonly queues: Record<QueueName, Set<string>> = {
    joins: new Set(),
    nodes: new Set(),
    tokens: new Set(),
    flavorclasses: new Set(),
  };
  private readonly timers: { due: number; queue: QueueName; key: string }[] = [];
  readonly ctx: ControllerContext;
  /** Watches that lag: they deliver nothing until released. */
  readonly held = new Set<CacheName>();
  private readonly delivered = new Map<string, Named>();
  private readonly handlers: { [C in CacheName]: EventHandler<Named> };
  keyRing = RING;

  readonly api: FakeApi;

  constructor(
    api: FakeApi,
    settings: Record<string, unknown> = {},
    /** Watches that lag from the start (a new leader whose other watches delivered first). */
    lagging: CacheName[] = [],
  ) {
    this.api = api;
    for (const cache of lagging) this.held.add(cache);
    if (!api.classes.has(FLAVOR))
      api.classes.set(FLAVOR, {
        metadata: { name: FLAVOR, resourceVersion: '1', generation: 1 },
        spec: { labels: { 'nodeflavor.io/flavor': FLAVOR } },
      });
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
    };
    const enqueue = (queue: QueueName): Enqueue => ({
      add: (key) => this.queues[queue].add(key),
      addAfter: (key, ms) => this.timers.push({ due: this.now + ms, queue, key }),
    });
    const queues = {
      joins: enqueue('joins'),
      nodes: enqueue('nodes'),
      tokens: enqueue('tokens'),
      flavorclasses: enqueue('flavorclasses'),
    };
    const reads: Reads = { caches: this.caches, indexes: this.indexes };
    this.handlers = Object.fromEntries(
      (Object.keys(SOURCES) as CacheName[]).map((cache) => [
        cache,
        routeEvents(cache, RECONCILERS, queues, reads) as unknown as EventHandler<Named>,
      ]),
    ) as { [C in CacheName]: EventHandler<Named> };
    this.deliver();
  }

  /**
   * The watches deliver what changed in the API since they last did (added, modified, deleted),
   * through the real wiring: indexes follow, and each event's keys are queued. Our own writes sit
   * in the caches already (assume); their watch events still come, as on a real API server.
   */
  deliver(): number {
    let events = 0;
    for (const cache of Object.keys(SOURCES) as CacheName[]) {
      if (this.held.has(cache)) continue;
      const source = SOURCES[cache](this.api);
      const mapCache = this.caches[cache] as unknown as MapCache<Named>;
      for (const [name, object] of source) {
        const key = `${cache}/${name}`;
        const previous = this.delivered.get(key);
        if (previous?.metadata.resourceVersion === object.metadata.resourceVersion) continue;
        events += 1;
        this.delivered.set(key, clone(object));
        mapCache.objects.set(name, clone(object));
        this.handlers[cache](previous ? 'MODIFIED' : 'ADDED', clone(object), previous);
      }
      for (const [key, previous] of [...this.delivered]) {
        if (!key.startsWith(`${cache}/`)) continue;
        const name = key.slice(cache.length + 1);
        if (source.has(name)) continue;
        events += 1;
        this.delivered.delete(key);
        mapCache.objects.delete(name);
        this.handlers[cache]('DELETED', previous, previous);
      }
    }
    return events;
  }

  private async run(queue: QueueName, key: string): Promise<void> {
    const wiring = RECONCILERS.find((r) => r.queue === queue);
    assert.ok(wiring);
    if (wiring.needsKeyRing && !this.keyRing) return;
    const requeue = await wiring.reconcile(this.ctx, key);
    if (requeue !== undefined) this.timers.push({ due: this.now + requeue, queue, key });
  }

  /** Runs one key of a queue now (as one worker would), outside `settle`. */
  reconcile(queue: QueueName, key: string): Promise<void> {
    return this.run(queue, key);
  }

  /** Runs what is queued, lets the watches deliver, and again, until nothing is left to do. */
  async settle(): Promise<void> {
    for (let round = 0; ; round++) {
      assert.ok(round < 60, 'the reconcilers keep waking each other: no quiescence');
      const batch = (Object.keys(this.queues) as QueueName[]).flatMap((queue) =>
        [...this.queues[queue]].map((key) => () => this.run(queue, key)),
      );
      for (const queue of Object.values(this.queues)) queue.clear();
      for (const run of batch) await run();
      const delivered = this.deliver();
      if (batch.length === 0 && delivered === 0) return;
    }
  }

  /** A resync: every reconciler's resync keys once more (what the manager does every --resync). */
  resync(): void {
    const reads: Reads = { caches: this.caches, indexes: this.indexes };
    for (const wiring of RECONCILERS)
      for (const key of wiring.resync(reads)) this.queues[wiring.queue].add(key);
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

let serial = 0;
export interface Issued {
  name: string;
  tokenId: string;
  flavorToken: string;
}

/** A token as the issuer leaves it: record, finalizer, and its bootstrap Secret. */
export function issueToken(
  api: FakeApi,
  options: { at?: number; spec?: Record<string, unknown>; keyed?: boolean } = {},
): Issued {
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
      creationTimestamp: rfc3339(new Date(options.at ?? T0)),
      generation: 1,
      labels: { [TOKEN_ID_LABEL]: tokenId },
      ...(options.keyed ? { annotations: { [ISSUED_ANNOTATION]: 'true' } } : {}),
      finalizers: [TOKEN_FINALIZER],
    },
    spec: { flavorClassName: FLAVOR, maxUses: 1, ttl: '1h', ...options.spec },
  } as unknown as StoredFlavoredToken);
  api.secrets.add(tokenId);
  return { name, tokenId, flavorToken: deriveFlavorToken(RING.active, tokenId, FLAVOR).reveal() };
}

/** A kubelet client CSR for `nodeName`, made with the bootstrap token `tokenId` (or another user). */
export async function kubeletCsr(
  api: FakeApi,
  tokenId: string,
  nodeName: string,
  at: number,
  name = `csr-${nodeName}`,
  username = `system:bootstrap:${tokenId}`,
  groups = [GROUP, 'system:authenticated'],
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
      username,
      signerName: 'kubernetes.io/kube-apiserver-client-kubelet',
      request: Buffer.from(csrPem).toString('base64'),
      groups,
      usages: ['digital signature', 'client auth'],
    },
    status: {},
  } as CsrObject);
  return name;
}

/** kube-controller-manager's signer issues an approved CSR's certificate. */
export function sign(api: FakeApi, csrName: string): void {
  const csr = api.csrs.get(csrName) as CsrObject;
  csr.status = { ...csr.status, certificate: 'LS0tLS1CRUdJTi0=' };
  csr.metadata.resourceVersion = api.nextRv();
}

export function registerNode(
  api: FakeApi,
  nodeName: string,
  flavorToken: string | undefined,
  at: number,
): void {
  api.nodes.set(nodeName, {
    metadata: {
      name: nodeName,
      uid: `uid-${nodeName}-${at}`,
      resourceVersion: api.nextRv(),
      creationTimestamp: rfc3339(new Date(at)),
      labels: {
        'kubernetes.io/hostname': nodeName,
        ...(flavorToken ? { 'nodeflavor.io/token': flavorToken } : {}),
      },
      annotations: { 'volumes.kubernetes.io/controller-managed-attach-detach': 'true' },
    },
    spec: { taints: [QUARANTINE] },
  });
}

/** Revokes a token on the API server's side (the issuer's spec.revoked), as another actor would. */
export function revoke(api: FakeApi, tokenName: string): void {
  const token = api.tokens.get(tokenName) as StoredFlavoredToken;
  (token.spec as Record<string, unknown>).revoked = true;
  token.metadata.generation = (token.metadata.generation ?? 1) + 1;
  token.metadata.resourceVersion = api.nextRv();
}

/** The condition a CSR was decided with, as the API server has it. */
export function decisionOf(api: FakeApi, csrName: string): string | undefined {
  const condition = api.csrs.get(csrName)?.status?.conditions?.[0];
  return condition ? `${condition.type} ${condition.reason}` : undefined;
}

/** Another pass over everything writes nothing: the state is a fixed point. */
export async function assertQuiescent(sim: ControllerSim): Promise<void> {
  // Coalesced work still scheduled (a FlavorClass's count, 1 s) runs first.
  sim.advance(2_000);
  await sim.settle();
  const before = sim.api.writes.length;
  sim.deliver();
  sim.resync();
  await sim.settle();
  assert.deepEqual(sim.api.writes.slice(before), [], 'a settled state writes nothing more');
}
