// The controller's wiring table (src/controller/wiring.ts) checked two ways: every cache event
// routed through it (routing.ts) against the queue keys it must come out as, and
// docs/architecture.md's "Who writes what" against what each reconciler declares it owns.

import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { describe, test } from 'node:test';
import pino from 'pino';
import { Registry } from 'prom-client';
import type { CacheName, CacheObject, Caches, ControllerContext } from '../../src/controller/context.ts';
import type { Reads } from '../../src/controller/event-keys.ts';
import { Indexes } from '../../src/controller/indexes.ts';
import { controllerMetrics } from '../../src/controller/metrics.ts';
import { type Enqueue, enqueueAll, reconcilerQueues, routeEvents } from '../../src/controller/routing.ts';
import { type QueueName, RECONCILERS, type ReconcilerWiring } from '../../src/controller/wiring.ts';
import { REFUSED_ANNOTATION } from '../../src/flavor/refusal-record.ts';
import type { StoredFlavoredToken } from '../../src/flavor/resources.ts';
import { API_VERSION, type NodeNameClaim, type Stored, TOKEN_ID_LABEL } from '../../src/flavor/resources.ts';
import { VERIFIED_ANNOTATION } from '../../src/flavor/verification-record.ts';
import type { CsrObject } from '../../src/kube/csrs.ts';
import type { StoredFlavorClass } from '../../src/kube/flavor-classes.ts';
import type { TrimmedNode } from '../../src/kube/node-writes.ts';
import type { WatchEventType } from '../../src/runtime/listwatch.ts';
import { MapCache } from './support/map-cache.ts';

const T0 = '2026-12-01T00:00:00Z';
const record = (flavorClass: string) =>
  JSON.stringify({ tokenID: 'abcdef', flavorClass, verifiedAt: T0, mac: 'x'.repeat(43) });

const node = (
  name: string,
  extra: { annotations?: Record<string, string>; labels?: Record<string, string> } = {},
) =>
  ({
    metadata: { name, uid: `uid-${name}`, resourceVersion: '1', creationTimestamp: T0, ...extra },
    spec: {},
  }) as TrimmedNode;

const token = (
  name: string,
  id: string,
  flavorClassName: string,
  boundNodes: string[] = [],
): StoredFlavoredToken => ({
  apiVersion: API_VERSION,
  kind: 'FlavoredToken',
  metadata: {
    name,
    uid: `uid-${name}`,
    resourceVersion: '1',
    creationTimestamp: T0,
    labels: { [TOKEN_ID_LABEL]: id },
  },
  spec: { flavorClassName, maxUses: 1, revocationPolicy: 'Keep', revoked: false },
  status: { bindings: boundNodes.map((nodeName) => ({ nodeName, csrName: `csr-${nodeName}`, boundAt: T0 })) },
});

const csr = (name: string, username: string): CsrObject => ({
  metadata: { name, uid: `uid-${name}`, resourceVersion: '1', creationTimestamp: T0 },
  spec: { username },
});

const claim = (nodeName: string, holder?: { tokenName: string; tokenID: string }): Stored<NodeNameClaim> => ({
  apiVersion: API_VERSION,
  kind: 'NodeNameClaim',
  metadata: { name: nodeName, uid: `uid-claim-${nodeName}`, resourceVersion: '1', creationTimestamp: T0 },
  spec: holder
    ? {
        holder: { ...holder, tokenUID: `uid-${holder.tokenName}`, csrName: `csr-${nodeName}`, claimedAt: T0 },
      }
    : { releasedAt: T0 },
  ...(holder
    ? {
        status: {
          join: {
            tokenName: holder.tokenName,
            tokenID: holder.tokenID,
            csrName: `csr-${nodeName}`,
            nodeUID: `uid-${nodeName}`,
          },
        },
      }
    : {}),
});

const flavorClass = (
  name: string,
  generation: number,
  labels: Record<string, string> = {},
): StoredFlavorClass => ({
  metadata: { name, resourceVersion: String(generation), generation },
  spec: { labels },
});

/** Every key a queue was given, in order: `key` for add, `key@ms` for addAfter. */
type Enqueued = Partial<Record<QueueName, string[]>>;

/** A queue that records what it is given into `into[name]`. */
function recordingQueue(name: QueueName, into: Enqueued): Enqueue {
  const record = (key: string) => {
    into[name] = [...(into[name] ?? []), key];
  };
  return { add: record, addAfter: (key, delayMs) => record(`${key}@${delayMs}`) };
}

/**
 * A little cluster: token ft-a (ID aaaaaa, class sweet) bound to node-1; node-1 verified for
 * sweet; node-2 carrying the class's label key; node-3 unrelated; a class sweet.
 */
function world() {
  const tokens = new MapCache(token('ft-a', 'aaaaaa', 'sweet', ['node-1']), token('ft-b', 'bbbbbb', 'sour'));
  const nodes = new MapCache(
    node('node-1', { annotations: { [VERIFIED_ANNOTATION]: record('sweet') } }),
    node('node-2', { labels: { 'example.com/sweet': 'yes' } }),
    node('node-3'),
  );
  const csrs = new MapCache(
    csr('csr-ours', 'system:bootstrap:aaaaaa'),
    csr('csr-foreign', 'system:bootstrap:zzzzzz'),
  );
  const classes = new MapCache(flavorClass('sweet', 1, { 'example.com/sweet': 'yes' }));
  const claims = new MapCache(claim('node-1', { tokenName: 'ft-a', tokenID: 'aaaaaa' }));
  const caches: Caches = { nodes, csrs, tokens, classes, claims };
  const indexes = new Indexes();
  for (const t of tokens.list()) indexes.onToken(t, undefined);
  for (const c of csrs.list()) indexes.onCsr(c, false);
  for (const c of claims.list()) indexes.onClaim(c, undefined);
  for (const n of nodes.list()) indexes.nodeFlavors.onNode('ADDED', n);
  return { caches, indexes, read: { caches, indexes } satisfies Reads };
}

function recorder(): { enqueued: Enqueued; queues: Record<QueueName, Enqueue> } {
  const enqueued: Enqueued = {};
  const queues = {} as Record<QueueName, Enqueue>;
  for (const { queue } of RECONCILERS) queues[queue] = recordingQueue(queue, enqueued);
  return { enqueued, queues };
}

/** Routes one event of `cache` through the real table; the keys each queue got. */
function route<C extends CacheName>(
  read: Reads,
  cache: C,
  type: WatchEventType,
  object: CacheObject<C>,
  previous?: CacheObject<C>,
): Enqueued {
  const { enqueued, queues } = recorder();
  routeEvents(cache, RECONCILERS, queues, read)(type, object, previous);
  return enqueued;
}

describe('wiring: which queue keys each cache event enqueues', () => {
  describe('Nodes', () => {
    test("ADDED: the node, the request its name's record follows, the class it carries (coalesced)", () => {
      const { read } = world();
      const added = node('node-1', { annotations: { [VERIFIED_ANNOTATION]: record('sweet') } });
      assert.deepEqual(route(read, 'nodes', 'ADDED', added), { joins: ['csr-node-1'], nodes: ['node-1'] });
      const fresh = node('node-9', { annotations: { [VERIFIED_ANNOTATION]: record('sweet') } });
      assert.deepEqual(route(read, 'nodes', 'ADDED', fresh), {
        nodes: ['node-9'],
        flavorclasses: ['sweet@1000'],
      });
      assert.equal(read.indexes.nodeFlavors.count('sweet'), 2);
    });
    test('MODIFIED: the node; its join only when it was judged (verified or refused); the classes whose count changed', () => {
      const { read } = world();
      const before = read.caches.nodes.get('node-1') as TrimmedNode;
      assert.deepEqual(route(read, 'nodes', 'MODIFIED', before, before), { nodes: ['node-1'] });
      const sour = node('node-1', { annotations: { [VERIFIED_ANNOTATION]: record('sour') } });
      assert.deepEqual(route(read, 'nodes', 'MODIFIED', sour, before), {
        joins: ['csr-node-1'],
        nodes: ['node-1'],
        flavorclasses: ['sweet@1000', 'sour@1000'],
      });
      const refused = node('node-1', {
        annotations: { [REFUSED_ANNOTATION]: '{"reason":"InvalidToken","message":"m","since":"x"}' },
      });
      const quarantined = {
        ...refused,
        spec: { taints: [{ key: 'nodeflavor.io/unverified', effect: 'NoSchedule' }] },
      };
      assert.deepEqual(route(read, 'nodes', 'MODIFIED', quarantined, sour), {
        joins: ['csr-node-1'],
        nodes: ['node-1'],
        flavorclasses: ['sour@1000'],
      });
      assert.equal(read.indexes.nodeFlavors.count('sweet'), 0);
      assert.equal(read.indexes.nodeFlavors.count('sour'), 0);
    });
    test("DELETED: not the node; the request its name's record follows (released); its class", () => {
      const { read } = world();
      const gone = read.caches.nodes.get('node-1') as TrimmedNode;
      assert.deepEqual(route(read, 'nodes', 'DELETED', gone, gone), {
        joins: ['csr-node-1'],
        flavorclasses: ['sweet@1000'],
      });
      assert.deepEqual(route(read, 'nodes', 'DELETED', node('node-3')), {});
    });
  });

  describe('CSRs', () => {
    test('a bootstrap CSR, ours or not: the join reconciler, under its own key', () => {
      const { read } = world();
      const ours = read.caches.csrs.get('csr-ours') as CsrObject;
      for (const type of ['ADDED', 'MODIFIED'] as const)
        assert.deepEqual(route(read, 'csrs', type, ours, ours), { joins: ['csr-ours'] });
      const foreign = read.caches.csrs.get('csr-foreign') as CsrObject;
      assert.deepEqual(route(read, 'csrs', 'ADDED', foreign), { joins: ['csr-foreign'] });
    });
    test("a node's own renewal: nothing, unless a join record names it; deleted: the index follows", () => {
      const { read } = world();
      assert.deepEqual(route(read, 'csrs', 'ADDED', csr('csr-node', 'system:node:node-1')), {});
      const ours = read.caches.csrs.get('csr-ours') as CsrObject;
      assert.deepEqual(read.indexes.csrsByTokenId.get('aaaaaa'), ['csr-ours']);
      assert.deepEqual(route(read, 'csrs', 'DELETED', ours, ours), { joins: ['csr-ours'] });
      assert.deepEqual(read.indexes.csrsByTokenId.get('aaaaaa'), []);
      const named = csr('csr-node-1', 'system:node:node-1');
      assert.deepEqual(route(read, 'csrs', 'DELETED', named, named), { joins: ['csr-node-1'] });
    });
  });

  describe('FlavoredTokens', () => {
    test("added: itself; its requests and its joins' requests", () => {
      const { read } = world();
      const t = token('ft-c', 'cccccc', 'sweet');
      route(read, 'csrs', 'ADDED', csr('csr-c', 'system:bootstrap:cccccc'));
      assert.deepEqual(route(read, 'tokens', 'ADDED', t), { joins: ['csr-c'], tokens: ['ft-c'] });
      assert.equal(read.indexes.tokenNameById.get('cccccc'), 'ft-c');
    });
    test('its spec changed (a revocation): its requests, its joins, the nodes of its joins', () => {
      const { read } = world();
      const before = read.caches.tokens.get('ft-a') as StoredFlavoredToken;
      const revoked = {
        ...before,
        metadata: { ...before.metadata, generation: 2 },
        spec: { ...before.spec, revoked: true },
      };
      assert.deepEqual(route(read, 'tokens', 'MODIFIED', revoked, before), {
        joins: ['csr-ours', 'csr-node-1'],
        nodes: ['node-1'],
        tokens: ['ft-a'],
      });
    });
    test('a status write (a use counted): itself only; a refusal newly recorded: the node it names', () => {
      const { read } = world();
      const before = read.caches.tokens.get('ft-a') as StoredFlavoredToken;
      const counted = { ...before, status: { ...before.status, uses: 1 } };
      assert.deepEqual(route(read, 'tokens', 'MODIFIED', counted, before), { tokens: ['ft-a'] });
      const refused = {
        ...counted,
        status: {
          ...counted.status,
          rejections: [{ csrName: 'csr-x', nodeName: 'node-3', reason: 'NameTaken', message: 'm', at: T0 }],
        },
      };
      assert.deepEqual(route(read, 'tokens', 'MODIFIED', refused, counted), {
        nodes: ['node-3'],
        tokens: ['ft-a'],
      });
      assert.deepEqual(read.indexes.tokensRefusingName.get('node-3'), ['ft-a']);
    });
  });

  describe('NodeNameClaims (join records)', () => {
    test("claimed: the name's Node; the indexes learn the holder and the request", () => {
      const { read } = world();
      const fresh = claim('node-7', { tokenName: 'ft-b', tokenID: 'bbbbbb' });
      assert.deepEqual(route(read, 'claims', 'ADDED', fresh), { nodes: ['node-7'] });
      assert.deepEqual(read.indexes.claimsByTokenUid.get('uid-ft-b'), ['node-7']);
      assert.equal(read.indexes.claimByRequest.get('csr-node-7'), 'node-7');
    });
    test("released: the Node; the holder's index lets go; a write that changes neither holder nor Node: nothing", () => {
      const { read } = world();
      const held = read.caches.claims.get('node-1') as Stored<NodeNameClaim>;
      const recorded = { ...held, status: { ...held.status, history: [] } };
      assert.deepEqual(route(read, 'claims', 'MODIFIED', recorded, held), {});
      assert.deepEqual(route(read, 'claims', 'MODIFIED', claim('node-1'), held), { nodes: ['node-1'] });
      assert.deepEqual(read.indexes.claimsByTokenUid.get('uid-ft-a'), []);
    });
  });

  describe('FlavorClasses', () => {
    test("ADDED: its status, and the nodes of its tokens' joins, whose record names it, that carry its keys", () => {
      const { read } = world();
      const sweet = read.caches.classes.get('sweet') as StoredFlavorClass;
      assert.deepEqual(route(read, 'classes', 'ADDED', sweet), {
        nodes: ['node-1', 'node-1', 'node-2'],
        flavorclasses: ['sweet'],
      });
    });
    test('MODIFIED at the same generation (a status write, ours): nothing, or each write would bring another', () => {
      const { read } = world();
      const sweet = read.caches.classes.get('sweet') as StoredFlavorClass;
      assert.deepEqual(route(read, 'classes', 'MODIFIED', sweet, sweet), {});
    });
    test('a spec change (a new generation): the nodes again', () => {
      const { read } = world();
      const sweet = read.caches.classes.get('sweet') as StoredFlavorClass;
      const edited = flavorClass('sweet', 2, { 'example.com/other': 'x' });
      assert.deepEqual(route(read, 'classes', 'MODIFIED', edited, sweet), {
        nodes: ['node-1', 'node-1'],
        flavorclasses: ['sweet'],
      });
    });
    test('DELETED: no status to write, the nodes that may lose it', () => {
      const { read } = world();
      const sweet = read.caches.classes.get('sweet') as StoredFlavorClass;
      assert.deepEqual(route(read, 'classes', 'DELETED', sweet, sweet), {
        nodes: ['node-1', 'node-1', 'node-2'],
      });
    });
  });

  test("resync: every bootstrap CSR and every record's request, node, token and class", () => {
    const { read } = world();
    const { enqueued, queues } = recorder();
    enqueueAll(RECONCILERS, queues, read);
    assert.deepEqual(enqueued, {
      joins: ['csr-ours', 'csr-foreign', 'csr-node-1'],
      nodes: ['node-1', 'node-2', 'node-3'],
      tokens: ['ft-a', 'ft-b'],
      flavorclasses: ['sweet'],
    });
  });

  test('every cache is watched, every queue is declared once', () => {
    const watched = new Set(RECONCILERS.flatMap((r) => Object.keys(r.watches)));
    assert.deepEqual([...watched].sort(), ['claims', 'classes', 'csrs', 'nodes', 'tokens']);
    const queues = RECONCILERS.map((r) => r.queue);
    assert.equal(new Set(queues).size, queues.length);
  });
});

describe('reconcilerQueues: one queue per reconciler', () => {
  const setup = (available: { value: boolean }) => {
    const seen: string[] = [];
    const wiring = (queue: QueueName, needsKeyRing: boolean): ReconcilerWiring => ({
      name: `${queue} reconciler`,
      queue,
      reconcile: async (_ctx, key) => {
        seen.push(`${queue}:${key}`);
      },
      owns: [],
      watches: {},
      resync: () => [],
      needsKeyRing,
      retryLog: { field: queue, message: 'failed' },
    });
    const registry = new Registry();
    const metrics = controllerMetrics(registry);
    const queues = reconcilerQueues({
      reconcilers: [wiring('nodes', true), wiring('tokens', false)],
      context: () => ({}) as ControllerContext,
      keyRingAvailable: () => available.value,
      workers: 2,
      metrics,
      log: pino({ level: 'silent' }),
    });
    return { seen, queues, registry };
  };

  test('a reconciler that needs the key ring: its keys are dropped while the ring is unusable', async () => {
    const available = { value: false };
    const { seen, queues, registry } = setup(available);
    for (const queue of Object.values(queues)) queue.start();
    queues.nodes.add('n1');
    queues.tokens.add('t1');
    for (const queue of Object.values(queues)) await queue.whenIdle();
    assert.deepEqual(seen, ['tokens:t1']);
    available.value = true;
    queues.nodes.add('n1');
    await queues.nodes.whenIdle();
    assert.deepEqual(seen, ['tokens:t1', 'nodes:n1']);
    const reconciles = await registry.getSingleMetricAsString('nodeflavor_reconciles_total');
    assert.match(reconciles, /queue="nodes",result="ok"\} 1/);
    assert.match(reconciles, /queue="tokens",result="ok"\} 1/);
  });
});

describe('docs/architecture.md agrees with the wiring', () => {
  const doc = readFileSync(new URL('../../docs/architecture.md', import.meta.url), 'utf8');
  const section = doc.slice(doc.indexOf('## Who writes what'));
  const table = section.slice(0, section.indexOf('\n\n', section.indexOf('| what |')) + 1);
  const writers = table
    .split('\n')
    .filter((line) => line.startsWith('| ') && !line.startsWith('| what') && !line.startsWith('| ---'))
    .map((line) => line.split(' | ').at(-1)?.replace(/ \|$/, '') ?? '');

  test('each reconciler\'s row in "Who writes what" names everything it owns', () => {
    for (const wiring of RECONCILERS) {
      const rows = writers.filter((writer) => writer.startsWith(`${wiring.name}:`));
      assert.ok(rows.length > 0, `no row of "Who writes what" has the writer "${wiring.name}:"`);
      for (const owned of wiring.owns)
        assert.ok(
          rows.some((row) => row.includes(owned)),
          `${wiring.name} owns ${owned}, which its row does not say`,
        );
    }
  });

  test('every reconciler the table names as a writer is declared', () => {
    const declared = new Set(RECONCILERS.map((r) => r.name));
    for (const writer of writers) {
      const named = /^([\w ]+ reconciler):/.exec(writer)?.[1];
      if (named) assert.ok(declared.has(named), `"${named}" writes in the doc but is not in wiring.ts`);
    }
  });

  test('the wiring table in the doc is the one the declaration makes', () => {
    const expected = wiringTable(RECONCILERS);
    assert.ok(doc.includes(expected), `docs/architecture.md should contain:\n\n${expected}`);
  });
});

const CACHE_TITLES: Record<CacheName, string> = {
  tokens: 'FlavoredToken',
  csrs: 'CSR',
  nodes: 'Node',
  claims: 'NodeNameClaim',
  classes: 'FlavorClass',
};

/** The declaration as a markdown table: one row per reconciler. */
function wiringTable(reconcilers: readonly ReconcilerWiring[]): string {
  const rows = reconcilers.map((r) => {
    const watches = Object.entries(r.watches).map(([cache, watch]) => {
      const after = watch.afterMs === undefined ? '' : ` (after ${watch.afterMs / 1000} s, coalesced)`;
      return `${CACHE_TITLES[cache as CacheName]} → ${watch.why}${after}`;
    });
    const gate = r.needsKeyRing ? ' (not while the key ring is unusable)' : '';
    return `| \`${r.queue}\` | ${r.name}: \`${r.reconcile.name}\`${gate} | ${r.owns.join('; ')} | ${watches.join('; ')} |`;
  });
  return [
    '| queue | reconciler | writes (its one writer) | an event of … enqueues |',
    '| --- | --- | --- | --- |',
    ...rows,
    '',
  ].join('\n');
}
