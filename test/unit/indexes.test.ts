// The controller's in-memory indexes forget a deleted Node: node churn must not grow them.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { Indexes } from '../../src/controller/state.ts';
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

  it("forgets a deleted Node's refusal, but not one recorded for a newer Node of the same name", () => {
    const indexes = new Indexes();
    indexes.setNodeFailure('n1', { uid: 'uid-1', failure });
    indexes.onNodeDeleted(node('n1', 'uid-1'));
    assert.equal(indexes.nodeFailure('n1', 'uid-1'), undefined);
    indexes.setNodeFailure('n1', { uid: 'uid-2', failure });
    indexes.onNodeDeleted(node('n1', 'uid-1'));
    assert.deepEqual(
      indexes.nodeFailure('n1', 'uid-2'),
      failure,
      "the old Node's deletion leaves the new one's",
    );
  });
});
