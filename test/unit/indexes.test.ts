// The controller's in-memory indexes forget a deleted Node: node churn must not grow them.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { Indexes } from '../../src/controller/indexes.ts';
import { SetIndex } from '../../src/flavor/set-index.ts';
import type { Failure } from '../../src/flavor/verdict.ts';
import type { TrimmedNode } from '../../src/kube/node-writes.ts';

const node = (name: string, uid: string) =>
  ({
    metadata: { name, uid, resourceVersion: '1', creationTimestamp: '2026-12-01T00:00:00Z' },
    spec: {},
  }) as TrimmedNode;
const failure: Failure = { reason: 'InvalidToken', message: 'the flavor token does not match' };

describe('Indexes', () => {
  it('reports a failure reason once per node UID, and again for a Node re-created under the name', () => {
    const indexes = new Indexes();
    assert.equal(indexes.reported('uid-1', failure.reason), false);
    assert.equal(indexes.reported('uid-1', failure.reason), true);
    indexes.onNodeDeleted(node('n1', 'uid-1'));
    assert.equal(indexes.reported('uid-1', failure.reason), false, 'forgotten with its Node');
  });
});

describe('SetIndex', () => {
  it('keeps members per key through adds and removes, one member or many', () => {
    const index = new SetIndex();
    assert.deepEqual(index.get('n1'), []);
    index.add('n1', 'a');
    index.add('n1', 'a');
    assert.deepEqual(index.get('n1'), ['a'], 'a member added twice is there once');
    index.add('n1', 'b');
    index.add('n1', 'c');
    assert.deepEqual(index.get('n1').sort(), ['a', 'b', 'c']);
    index.remove('n1', 'b');
    index.remove('n1', 'c');
    assert.deepEqual(index.get('n1'), ['a']);
    index.remove('n1', 'zzz');
    assert.deepEqual(index.get('n1'), ['a'], 'removing a stranger changes nothing');
    index.add('n1', 'd');
    assert.deepEqual(index.get('n1').sort(), ['a', 'd'], 'grows again after shrinking to one');
    index.remove('n1', 'a');
    index.remove('n1', 'd');
    assert.deepEqual(index.get('n1'), []);
    index.add('n2', 'x');
    index.remove('n2', 'y');
    assert.deepEqual(index.get('n2'), ['x']);
  });
});
