// "A retry of the same join", the one rule (src/flavor/join-request.ts), as one table: what a new
// request of the token that holds a name's join is, for every state that join can be in.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import {
  type HeldJoin,
  type JoinRequestFacts,
  type JoinRequestKind,
  joinRequestKind,
  provenAfter,
} from '../../src/flavor/join-request.ts';

const T = Date.parse('2030-01-01T12:00:00Z');
const at = (s: number) => new Date(T + s * 1000);
const join = (over: Partial<HeldJoin> = {}): HeldJoin => ({
  csrName: 'csr-1',
  boundAt: at(0).toISOString(),
  ...over,
});
const facts = (over: Partial<JoinRequestFacts> = {}): JoinRequestFacts => ({
  csr: { name: 'csr-2', createdAt: at(60) },
  joinCsrIssued: false,
  ...over,
});

describe('joinRequestKind: what a new request of the same token for the same name is', () => {
  const cases: [string, HeldJoin, JoinRequestFacts, JoinRequestKind][] = [
    [
      "the join's own request, judged again",
      join(),
      facts({ csr: { name: 'csr-1', createdAt: at(0) } }),
      'same',
    ],
    [
      "the join's own request, though its certificate was issued (idempotent)",
      join(),
      facts({ csr: { name: 'csr-1', createdAt: at(0) }, joinCsrIssued: true }),
      'same',
    ],
    ['the first request has no certificate and will get none, no Node: a retry', join(), facts(), 'retry'],
    [
      'the first request may hold a certificate (issued, approved, or gone): AlreadyJoined',
      join(),
      facts({ joinCsrIssued: true }),
      'already-joined',
    ],
    [
      'its Node registered and is still there: AlreadyJoined',
      join({ nodeUID: 'u1' }),
      facts({ nodeUid: 'u1' }),
      'already-joined',
    ],
    [
      'its Node registered and is still there, a plain token that may not rejoin: AlreadyJoined',
      join({ nodeUID: 'u1' }),
      facts({ nodeUid: 'u1', provenAgain: true }),
      'already-joined',
    ],
    [
      'its Node registered, a rejoin token without a new proof: AlreadyJoined',
      join({ nodeUID: 'u1' }),
      facts({ nodeUid: 'u1', rejoin: true, provenAgain: false }),
      'already-joined',
    ],
    [
      'its Node registered, a rejoin token proven again since: the join moves (rebind)',
      join({ nodeUID: 'u1' }),
      facts({ nodeUid: 'u1', rejoin: true, provenAgain: true }),
      'rebind',
    ],
    ['its Node registered and is gone: the join is over', join({ nodeUID: 'u1' }), facts(), 'over'],
    [
      'its Node registered, another Node of the name now: the join is over',
      join({ nodeUID: 'u1' }),
      facts({ nodeUid: 'u2' }),
      'over',
    ],
  ];
  for (const [name, held, request, want] of cases)
    test(name, () => assert.equal(joinRequestKind(held, request), want));
});

describe('provenAfter: a rejoin is earned once per proof', () => {
  test('a request before the proof: no', () => assert.equal(provenAfter(at(10), at(20)), false));
  test('no proof at all: no', () => assert.equal(provenAfter(at(10), undefined), false));
  test('after the proof, no join since it: yes', () => assert.equal(provenAfter(at(30), at(20)), true));
  test('after the proof, the join moved after it already: no', () =>
    assert.equal(provenAfter(at(30), at(20), at(25)), false));
  test('after the proof, the join last moved before it: yes', () =>
    assert.equal(provenAfter(at(30), at(20), at(5)), true));
});
