import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { NOTHING_APPLIED } from '../../src/flavor/applied-record.ts';
import type { DesiredNodeState } from '../../src/flavor/converge.ts';
import { removalPatch, type TrimmedNode } from '../../src/kube/node-writes.ts';

const node = (taints?: TrimmedNode['spec']['taints']): TrimmedNode => ({
  metadata: {
    name: 'n1',
    uid: 'uid-1',
    resourceVersion: '42',
    creationTimestamp: '2026-01-01T00:00:00Z',
    labels: { 'nodeflavor.io/token': 'abc', 'kubernetes.io/hostname': 'n1' },
    annotations: { 'example.com/a~b': 'forged' },
  },
  spec: taints ? { taints } : {},
});

const desired: DesiredNodeState = {
  labels: {},
  annotations: {},
  taints: [],
  removeLabels: ['nodeflavor.io/token'],
  removeAnnotations: ['example.com/a~b'],
  applied: NOTHING_APPLIED,
};

describe('removalPatch', () => {
  it('rests on the facts judged: uid, taints, and each removed key’s value', () => {
    const taints = [{ key: 'nodeflavor.io/unverified', effect: 'NoSchedule' }];
    assert.deepEqual(removalPatch(node(taints), desired), [
      { op: 'test', path: '/metadata/uid', value: 'uid-1' },
      { op: 'test', path: '/spec/taints', value: taints },
      { op: 'test', path: '/metadata/labels/nodeflavor.io~1token', value: 'abc' },
      { op: 'remove', path: '/metadata/labels/nodeflavor.io~1token' },
      { op: 'test', path: '/metadata/annotations/example.com~1a~0b', value: 'forged' },
      { op: 'remove', path: '/metadata/annotations/example.com~1a~0b' },
    ]);
  });

  it('falls back to the resourceVersion when there are no taints to compare', () => {
    const ops = removalPatch(node(), desired);
    assert.deepEqual(ops[1], { op: 'test', path: '/metadata/resourceVersion', value: '42' });
    assert.ok(!ops.some((op) => (op as { path: string }).path === '/spec/taints'));
  });
});
