import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { parseConfig } from '../../src/config.ts';
import { reconcileClassStatus } from '../../src/controller/class-status.ts';
import type { ControllerContext } from '../../src/controller/context.ts';
import { Indexes } from '../../src/controller/indexes.ts';
import {
  type ClassStatusInput,
  carriedFlavor,
  classStatusChanged,
  desiredClassStatus,
  type NodeFlavorFacts,
} from '../../src/flavor/class-status.ts';
import type { FlavorClassStatus } from '../../src/flavor/resources.ts';
import { FlavorClassStatusSchema } from '../../src/flavor/resources.ts';
import { VERIFIED_ANNOTATION } from '../../src/flavor/verification-record.ts';
import type { StoredFlavorClass } from '../../src/kube/flavor-classes.ts';

// A fake clock: nothing here reads the real one.
const NOW = new Date('2030-01-01T12:00:00Z');
const EARLIER = '2029-12-31T08:00:00Z';
const record = (flavorClass: string) =>
  JSON.stringify({ tokenID: 'abcdef', flavorClass, verifiedAt: EARLIER, mac: 'x'.repeat(43) });
const QUARANTINE = { key: 'nodeflavor.io/unverified', effect: 'NoSchedule' };

describe('carriedFlavor: the class a node counts for', () => {
  const cases: Record<string, { node: NodeFlavorFacts; want: string | undefined }> = {
    'a verified node: its record names the class': {
      node: { annotations: { [VERIFIED_ANNOTATION]: record('sweet') } },
      want: 'sweet',
    },
    'no record: none': { node: { annotations: {} }, want: undefined },
    'no annotations at all: none': { node: {}, want: undefined },
    'a record but quarantined (being stripped): none': {
      node: { annotations: { [VERIFIED_ANNOTATION]: record('sweet') }, taints: [QUARANTINE] },
      want: undefined,
    },
    'other taints do not matter': {
      node: {
        annotations: { [VERIFIED_ANNOTATION]: record('sour') },
        taints: [{ key: 'example.com/gpu' }],
      },
      want: 'sour',
    },
    'a mangled record: none': {
      node: { annotations: { [VERIFIED_ANNOTATION]: '{"flavor' } },
      want: undefined,
    },
  };
  for (const [name, { node, want }] of Object.entries(cases))
    test(name, () => assert.equal(carriedFlavor(node), want));
});

describe('desiredClassStatus', () => {
  const input = (over: Partial<ClassStatusInput> = {}): ClassStatusInput => ({
    generation: 3,
    spec: { labels: { 'example.com/trust': 'a7' } },
    nodes: 2,
    current: undefined,
    now: NOW,
    ...over,
  });

  test('a valid spec: Ready True, the count, observedGeneration on status and condition', () => {
    const status = desiredClassStatus(input());
    assert.deepEqual(status, {
      observedGeneration: 3,
      nodes: 2,
      conditions: [
        {
          type: 'Ready',
          status: 'True',
          reason: 'Accepted',
          message: 'the spec is valid: the controller applies it to every verified node of this flavor',
          observedGeneration: 3,
          lastTransitionTime: '2030-01-01T12:00:00Z',
        },
      ],
    });
    assert.ok(
      FlavorClassStatusSchema.safeParse(status).success,
      'the CRD schema (mirrored in zod) accepts it',
    );
  });

  test('an empty spec (no keys) is valid', () => {
    assert.equal(desiredClassStatus(input({ spec: undefined })).conditions?.[0]?.status, 'True');
  });

  test('an invalid stored spec: Ready False, InvalidSpec, naming the field', () => {
    const status = desiredClassStatus(input({ spec: { labels: { 'kubernetes.io/role': 'x' } } }));
    const ready = status.conditions?.[0];
    assert.equal(ready?.status, 'False');
    assert.equal(ready?.reason, 'InvalidSpec');
    assert.match(ready?.message ?? '', /^spec\.labels/);
    assert.equal(status.nodes, 2, 'the count is still reported');
    assert.ok(FlavorClassStatusSchema.safeParse(status).success);
  });

  test('lastTransitionTime is kept while the status stays, and moves when it changes', () => {
    const current = desiredClassStatus(input({ now: new Date(EARLIER) }));
    const same = desiredClassStatus(input({ current, nodes: 5, generation: 4 }));
    assert.equal(same.conditions?.[0]?.lastTransitionTime, EARLIER);
    assert.equal(same.conditions?.[0]?.observedGeneration, 4);
    const flipped = desiredClassStatus(input({ current, spec: { taints: [{ key: 'x', effect: 'Bad' }] } }));
    assert.equal(flipped.conditions?.[0]?.lastTransitionTime, '2030-01-01T12:00:00Z');
  });

  test('no generation known: no observedGeneration', () => {
    const status = desiredClassStatus(input({ generation: undefined }));
    assert.equal(status.observedGeneration, undefined);
    assert.equal(status.conditions?.[0]?.observedGeneration, undefined);
  });
});

describe('classStatusChanged: written only when it changed', () => {
  const desired = desiredClassStatus({ generation: 1, spec: {}, nodes: 1, current: undefined, now: NOW });

  test('no status yet: changed', () => assert.equal(classStatusChanged(undefined, desired), true));

  test('the same status with keys in the API server order: unchanged', () => {
    // Custom resources come back with their keys sorted (FACTS.md): order must not count.
    const condition = desired.conditions?.[0];
    assert.ok(condition);
    const stored: FlavorClassStatus = {
      conditions: [Object.fromEntries(Object.entries(condition).sort()) as typeof condition],
      nodes: 1,
      observedGeneration: 1,
    };
    assert.equal(classStatusChanged(stored, desired), false);
    // And recomputing from it yields the same status again: a second reconcile writes nothing.
    const again = desiredClassStatus({
      generation: 1,
      spec: {},
      nodes: 1,
      current: stored,
      now: new Date(0),
    });
    assert.equal(classStatusChanged(stored, again), false);
  });

  test('a new count or generation: changed', () => {
    assert.equal(classStatusChanged(desired, { ...desired, nodes: 2 }), true);
    assert.equal(classStatusChanged(desired, { ...desired, observedGeneration: 2 }), true);
  });
});

describe('reconcileClassStatus: the one writer of FlavorClass status', () => {
  const setup = () => {
    const stored = new Map<string, StoredFlavorClass & { status?: FlavorClassStatus }>([
      ['sweet', { metadata: { name: 'sweet', resourceVersion: '1', generation: 1 }, spec: {} }],
    ]);
    const writes: string[] = [];
    const events: string[] = [];
    const indexes = new Indexes();
    const verified = {
      metadata: {
        name: 'node-1',
        uid: 'uid-1',
        resourceVersion: '1',
        creationTimestamp: EARLIER,
        annotations: { [VERIFIED_ANNOTATION]: record('sweet') },
      },
      spec: {},
    };
    indexes.nodeFlavors.onNode('ADDED', verified);
    const ctx = {
      now: () => NOW,
      config: parseConfig({ capiSyncedLabelPatterns: ['^example\\.com/pool$'] }),
      events: { emit: (_object: unknown, type: string, reason: string) => events.push(`${type} ${reason}`) },
      indexes,
      caches: {
        classes: {
          get: (name: string) => stored.get(name),
          assume: (raw: unknown) => {
            const written = raw as StoredFlavorClass;
            stored.set(written.metadata.name, written);
          },
        },
      },
      api: {
        writeClassStatus: async (flavorClass: StoredFlavorClass, status: FlavorClassStatus) => {
          writes.push(`${flavorClass.metadata.name} nodes=${status.nodes}`);
          return { ...flavorClass, status };
        },
      },
    } as unknown as ControllerContext;
    return { ctx, writes, events, stored };
  };

  test('writes the count from the Node index once; the same status again is not written', async () => {
    const { ctx, writes } = setup();
    await reconcileClassStatus(ctx, 'sweet');
    await reconcileClassStatus(ctx, 'sweet');
    assert.deepEqual(writes, ['sweet nodes=1']);
  });

  test('a class that is gone: nothing', async () => {
    const { ctx, writes } = setup();
    await reconcileClassStatus(ctx, 'sour');
    assert.deepEqual(writes, []);
  });

  test('keys Cluster API also syncs: the condition and one Warning Event, both gone once the key moves', async () => {
    const { ctx, events, stored } = setup();
    const sweet = stored.get('sweet');
    assert.ok(sweet);
    // A key matching the configured --additional-sync-machine-labels pattern.
    stored.set('sweet', { ...sweet, spec: { labels: { 'example.com/pool': 'a' } } });
    await reconcileClassStatus(ctx, 'sweet');
    await reconcileClassStatus(ctx, 'sweet');
    const conflict = () =>
      stored.get('sweet')?.status?.conditions?.find((c) => c.type === 'ClusterAPISyncConflict');
    assert.equal(conflict()?.status, 'True');
    assert.match(conflict()?.message ?? '', /label example\.com\/pool \(--additional-sync-machine-labels/);
    assert.deepEqual(events, ['Warning ClusterAPISyncConflict'], 'one Event, not one per reconcile');
    const current = stored.get('sweet');
    assert.ok(current);
    stored.set('sweet', { ...current, spec: { labels: { 'example.com/tier': 'a' } } });
    await reconcileClassStatus(ctx, 'sweet');
    assert.equal(conflict(), undefined);
    assert.deepEqual(events, ['Warning ClusterAPISyncConflict']);
  });
});
