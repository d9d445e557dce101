// The one JSON patch a Node write is: its preconditions are the facts judged, and it changes only
// what the decision changes.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { NOTHING_APPLIED } from '../../src/flavor/applied-record.ts';
import type { DesiredNodeState } from '../../src/flavor/converge.ts';
import { nodeStatePatch, type TrimmedNode } from '../../src/kube/node-writes.ts';

const QUARANTINE = { key: 'nodeflavor.io/unverified', effect: 'NoSchedule' };

const node = (over: { taints?: TrimmedNode['spec']['taints']; annotations?: Record<string, string> } = {}) =>
  ({
    metadata: {
      name: 'n1',
      uid: 'uid-1',
      resourceVersion: '42',
      creationTimestamp: '2026-01-01T00:00:00Z',
      labels: { 'nodeflavor.io/token': 'abc', 'kubernetes.io/hostname': 'n1' },
      ...(over.annotations ? { annotations: over.annotations } : {}),
    },
    spec: over.taints ? { taints: over.taints } : {},
  }) satisfies TrimmedNode;

const desired = (over: Partial<DesiredNodeState> = {}): DesiredNodeState => ({
  labels: {},
  annotations: {},
  taints: [],
  removeLabels: [],
  removeAnnotations: [],
  applied: NOTHING_APPLIED,
  ...over,
});

describe('nodeStatePatch', () => {
  it('verifying: one patch removes the token label, adds the flavor, lifts the quarantine', () => {
    const ops = nodeStatePatch(
      node({ taints: [QUARANTINE], annotations: { 'example.com/a~b': 'forged' } }),
      desired({
        labels: { 'nodeflavor.io/flavor': 'sweet' },
        annotations: { 'nodeflavor.io/verified': '{}' },
        removeLabels: ['nodeflavor.io/token'],
        removeAnnotations: ['example.com/a~b'],
      }),
    );
    assert.deepEqual(ops, [
      { op: 'test', path: '/metadata/uid', value: 'uid-1' },
      { op: 'test', path: '/spec/taints/0', value: QUARANTINE },
      { op: 'test', path: '/metadata/labels/nodeflavor.io~1token', value: 'abc' },
      { op: 'test', path: '/metadata/annotations/example.com~1a~0b', value: 'forged' },
      { op: 'remove', path: '/spec/taints/0' },
      { op: 'remove', path: '/metadata/labels/nodeflavor.io~1token' },
      { op: 'add', path: '/metadata/labels/nodeflavor.io~1flavor', value: 'sweet' },
      { op: 'remove', path: '/metadata/annotations/example.com~1a~0b' },
      { op: 'add', path: '/metadata/annotations/nodeflavor.io~1verified', value: '{}' },
    ]);
  });

  it('rests on no resourceVersion when every map and list it touches exists (kubelet status writes do not conflict)', () => {
    const ops = nodeStatePatch(
      node({ taints: [QUARANTINE], annotations: {} }),
      desired({
        labels: { 'nodeflavor.io/flavor': 'sweet' },
        annotations: { 'nodeflavor.io/verified': '{}' },
      }),
    );
    assert.ok(!ops.some((op) => (op as { path: string }).path === '/metadata/resourceVersion'));
  });

  it('taints that do not change are neither tested nor written (order does not count)', () => {
    const other = { key: 'example.com/gpu', effect: 'NoSchedule' };
    const ops = nodeStatePatch(
      node({ taints: [other, QUARANTINE] }),
      desired({ taints: [QUARANTINE, other] }),
    );
    assert.deepEqual(ops, [{ op: 'test', path: '/metadata/uid', value: 'uid-1' }]);
  });

  it('taints change one by one: a taint another controller added after ours is neither tested nor touched', () => {
    const notReady = { key: 'node.kubernetes.io/not-ready', effect: 'NoSchedule' };
    const dedicated = { key: 'nodeflavor.io/dedicated', value: 'sweet', effect: 'NoSchedule' };
    const other = { key: 'example.com/gpu', effect: 'NoSchedule' };
    const ops = nodeStatePatch(
      node({ taints: [other, QUARANTINE, notReady] }),
      desired({ taints: [other, notReady, dedicated] }),
    );
    assert.deepEqual(ops, [
      { op: 'test', path: '/metadata/uid', value: 'uid-1' },
      { op: 'test', path: '/spec/taints/1', value: QUARANTINE },
      { op: 'remove', path: '/spec/taints/1' },
      { op: 'add', path: '/spec/taints/-', value: dedicated },
    ]);
  });

  it('several taints go from the last index down, each tested where it stands', () => {
    const a = { key: 'nodeflavor.io/a', effect: 'NoSchedule' };
    const b = { key: 'nodeflavor.io/b', effect: 'NoExecute' };
    const keep = { key: 'example.com/keep', effect: 'NoSchedule' };
    const ops = nodeStatePatch(node({ taints: [a, keep, b] }), desired({ taints: [keep] }));
    assert.deepEqual(ops, [
      { op: 'test', path: '/metadata/uid', value: 'uid-1' },
      { op: 'test', path: '/spec/taints/2', value: b },
      { op: 'test', path: '/spec/taints/0', value: a },
      { op: 'remove', path: '/spec/taints/2' },
      { op: 'remove', path: '/spec/taints/0' },
    ]);
  });

  it('a map the Node lacks is added whole if still absent; a taint list it lacks, at its resourceVersion', () => {
    const ops = nodeStatePatch(
      node(),
      desired({ annotations: { 'nodeflavor.io/verified': '{}' }, taints: [QUARANTINE] }),
    );
    assert.deepEqual(ops, [
      { op: 'test', path: '/metadata/uid', value: 'uid-1' },
      { op: 'test', path: '/metadata/annotations', value: null },
      { op: 'test', path: '/metadata/resourceVersion', value: '42' },
      { op: 'add', path: '/spec/taints', value: [QUARANTINE] },
      { op: 'add', path: '/metadata/annotations', value: { 'nodeflavor.io/verified': '{}' } },
    ]);
  });

  it('a label already as wanted is not written again', () => {
    const ops = nodeStatePatch(node(), desired({ labels: { 'kubernetes.io/hostname': 'n1' } }));
    assert.equal(ops.length, 1);
  });
});
