// `kubectl flavor explain` and the REASON column (src/cli/explain.ts) on made-up facts: what is
// concluded for a verified, a quarantined, a waiting and an unmanaged node, that the screen names
// the token, the CSR, the failed check and what to do; that every failure reason has a remedy,
// the same set as the operations guide's table; and the aggregated Event names (src/runtime/events.ts).
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { concludeNode, explainNode, explainToken, nodeReason } from '../../src/cli/explain.ts';
import { nodesTable } from '../../src/cli/flavor-output.ts';
import { REMEDIES } from '../../src/flavor/reasons.ts';
import type { FlavoredToken, FlavoredTokenStatus } from '../../src/flavor/resources.ts';
import { FAILURE_REASONS, type NodeFacts } from '../../src/flavor/verdict.ts';
import type { CsrSummary, EventSummary } from '../../src/kube/explain-facts.ts';
import { aggregatedEventName, isRecentRepeat, occurrencePatch } from '../../src/runtime/events.ts';

const NOW = new Date('2030-01-01T12:00:00Z');
const QUARANTINE = { key: 'nodeflavor.io/unverified', effect: 'NoSchedule' };

function node(name: string, extra: Partial<NodeFacts> = {}): NodeFacts {
  return { name, uid: `uid-${name}`, createdAt: NOW, labels: {}, annotations: {}, taints: [], ...extra };
}

function token(status: FlavoredTokenStatus): FlavoredToken {
  return {
    apiVersion: 'nodeflavor.io/v1alpha1',
    kind: 'FlavoredToken',
    metadata: {
      name: 'ft-abc123',
      labels: { 'nodeflavor.io/token-id': 'abc123' },
      creationTimestamp: '2030-01-01T11:00:00Z',
    },
    spec: { flavorClassName: 'sweet', maxUses: 1, revocationPolicy: 'Keep', revoked: false, ttl: '2h' },
    status,
  };
}

const csr: CsrSummary = {
  name: 'csr-edge',
  username: 'system:bootstrap:abc123',
  nodeName: 'edge-1',
  createdAt: '2030-01-01T11:59:00Z',
  state: 'Approved',
  reason: 'NodeflavorBound',
  message: 'bound to token abc123',
};

const event = (reason: string, extra: Partial<EventSummary> = {}): EventSummary => ({
  kind: 'Node',
  name: 'edge-1',
  type: 'Warning',
  reason,
  message: `${reason} happened`,
  count: 3,
  firstAt: '2030-01-01T11:50:00Z',
  lastAt: '2030-01-01T11:59:30Z',
  component: 'nodeflavor-controller',
  ...extra,
});

const binding = {
  nodeName: 'edge-1',
  csrName: 'csr-edge',
  boundAt: '2030-01-01T11:59:01Z',
  nodeUID: 'uid-edge-1',
};

describe('kubectl flavor explain NODE', () => {
  it('quarantined with a failed check: token, CSR, the check, why and what to do', () => {
    const failed = token({
      bindings: [
        {
          ...binding,
          failure: {
            reason: 'InvalidToken',
            message: "node edge-1's flavor token does not match token abc123",
            since: '2030-01-01T11:59:05Z',
          },
        },
      ],
    });
    const text = explainNode(
      node('edge-1', { taints: [QUARANTINE], labels: { 'nodeflavor.io/token': 'x' } }),
      [failed],
      [csr],
      [event('InvalidToken')],
      NOW,
    );
    assert.match(text, /^Node: +edge-1$/m);
    assert.match(text, /^Conclusion: +quarantined: not verified \(InvalidToken\)$/m);
    assert.match(text, /^Token: +ft-abc123 \(token ID abc123, flavor sweet, Failed InvalidToken\)$/m);
    assert.match(
      text,
      /^CSR: +csr-edge, made 60s ago as system:bootstrap:abc123: Approved \(NodeflavorBound\)$/m,
    );
    assert.match(text, /^Check failed: +the flavor token matches the bootstrap token \(InvalidToken\)$/m);
    assert.match(text, /^What to do: +treat it as a possible attack/m);
    assert.match(text, /^ {2}Warning +InvalidToken +x3 over 10m +InvalidToken happened$/m);
  });

  it('a refused CSR names the reason when no binding exists; a later Event wins over an older refusal', () => {
    const refused = token({
      rejections: [
        {
          csrName: 'csr-edge',
          nodeName: 'edge-1',
          reason: 'NameTaken',
          message: 'taken',
          at: '2030-01-01T11:00:00Z',
        },
      ],
    });
    const quarantined = node('edge-1', { taints: [QUARANTINE] });
    assert.equal(concludeNode(quarantined, [refused], [], []).reason, 'NameTaken');
    assert.equal(concludeNode(quarantined, [refused], [], [event('UnknownToken')]).reason, 'UnknownToken');
    assert.equal(concludeNode(quarantined, [refused], [csr], []).csr?.name, 'csr-edge');
  });

  it('verified: the flavor, the token, nothing to do', () => {
    const record = { tokenID: 'abc123', flavorClass: 'sweet', verifiedAt: '2030-01-01T11:59:10Z', mac: 'm' };
    const verified = node('edge-1', { annotations: { 'nodeflavor.io/verified': JSON.stringify(record) } });
    const text = explainNode(
      verified,
      [token({ bindings: [{ ...binding, verifiedAt: record.verifiedAt }] })],
      [csr],
      [],
      NOW,
    );
    assert.match(text, /^Conclusion: +verified: it carries flavor sweet$/m);
    assert.match(text, /^Verified at: +2030-01-01T11:59:10Z$/m);
    assert.match(text, /^What to do: +nothing$/m);
    assert.doesNotMatch(text, /Check failed/);
  });

  it('waiting and unmanaged nodes say so; other components’ Events are ignored', () => {
    const waiting = node('edge-1', { labels: { 'nodeflavor.io/token': 'x' }, taints: [QUARANTINE] });
    assert.equal(
      concludeNode(waiting, [], [], [event('InvalidToken', { component: 'kubelet' })]).state,
      'waiting',
    );
    assert.match(explainNode(waiting, [], [], [], NOW), /not judged yet/);
    assert.equal(concludeNode(node('plain'), [], [], []).state, 'unmanaged');
  });

  it('the nodes table shows the REASON of unverified nodes only', () => {
    const facts = [
      node('edge-1', { taints: [QUARANTINE] }),
      node('edge-2', { taints: [QUARANTINE], labels: { 'nodeflavor.io/token': 'x' } }),
      node('plain'),
    ];
    const text = nodesTable(facts, (n) => nodeReason(n, [], [event('MissingToken')]));
    const rows = text
      .trim()
      .split('\n')
      .map((line) => line.split(/\s+/));
    assert.deepEqual(rows[0], ['NODE', 'FLAVOR', 'STATE', 'VERIFIED-AT', 'TOKEN-ID', 'REASON']);
    assert.deepEqual(
      rows.slice(1).map((r) => [r[0], r[2], r[5]]),
      [
        ['edge-1', 'unverified', 'MissingToken'],
        ['edge-2', 'unverified', 'NotJudgedYet'],
        ['plain', 'unmanaged', '<none>'],
      ],
    );
  });
});

describe('kubectl flavor explain TOKEN', () => {
  it('phase, nodes with their CSR, the failed check and what to do', () => {
    const text = explainToken(
      token({
        rejections: [
          {
            csrName: 'csr-edge',
            nodeName: 'edge-1',
            reason: 'NodeNameMismatch',
            message: 'wrong name',
            at: '2030-01-01T11:59:00Z',
          },
        ],
      }),
      [{ ...csr, state: 'Denied', reason: 'NodeNameMismatch' }],
      [],
      NOW,
    );
    assert.match(text, /^Phase: +Failed since 2030-01-01T11:59:00Z \(60s ago\)$/m);
    assert.match(text, /^Check failed: +the node name is one the token allows \(NodeNameMismatch\)$/m);
    assert.match(text, /^ {2}edge-1 +refused: NodeNameMismatch {2}\(CSR csr-edge: Denied\)$/m);
  });
});

describe('failure reasons and their remedies', () => {
  it('every reason the controller can give has a remedy, and nothing else', () => {
    assert.deepEqual(Object.keys(REMEDIES).sort(), [...FAILURE_REASONS].sort());
  });

  it("the operations guide's table lists exactly the same reasons", () => {
    const guide = readFileSync(join(import.meta.dirname, '..', '..', 'docs', 'operations.md'), 'utf8');
    const section = guide.slice(guide.indexOf('## A node stays quarantined'));
    const table = section.slice(0, section.indexOf('\n\n', section.indexOf('| reason |')));
    const listed = [...table.matchAll(/^\| `([A-Za-z]+)`/gm)].map((m) => m[1]);
    assert.deepEqual([...new Set(listed)].sort(), [...FAILURE_REASONS].sort());
  });
});

describe('aggregated Events', () => {
  const nodeObject = { apiVersion: 'v1', kind: 'Node', name: 'edge-1', uid: 'u1' };
  it('one name per object, type and reason; stable; a valid object name', () => {
    const a = aggregatedEventName(nodeObject, 'Warning', 'InvalidToken');
    assert.equal(a, aggregatedEventName(nodeObject, 'Warning', 'InvalidToken'));
    assert.notEqual(a, aggregatedEventName(nodeObject, 'Warning', 'MissingToken'));
    assert.notEqual(a, aggregatedEventName({ ...nodeObject, uid: 'u2' }, 'Warning', 'InvalidToken'));
    assert.notEqual(a, aggregatedEventName(nodeObject, 'Normal', 'InvalidToken'));
    assert.match(a, /^edge-1\.[0-9a-f]{16}$/);
    const long = aggregatedEventName({ ...nodeObject, name: 'n'.repeat(253) }, 'Warning', 'X');
    assert.ok(long.length <= 253);
  });

  it('an occurrence patch counts, stamps and caps the message', () => {
    const patch = occurrencePatch(4, 'm'.repeat(2000), NOW);
    assert.deepEqual(Object.keys(patch).sort(), ['count', 'lastTimestamp', 'message']);
    assert.equal(patch.count, 4);
    assert.equal(patch.lastTimestamp, NOW.toISOString());
    assert.equal(patch.message.length, 1024);
  });

  it('a stored Event with the same message seen within the dedupe window is no new occurrence', () => {
    const tenMinutes = 10 * 60_000;
    const seen = (ago: number, message = 'm') => ({
      message,
      lastTimestamp: new Date(NOW.getTime() - ago).toISOString(),
    });
    assert.equal(
      isRecentRepeat(seen(60_000), 'm', NOW, tenMinutes),
      true,
      'a restart re-judging an unchanged node',
    );
    assert.equal(isRecentRepeat(seen(60_000, 'other'), 'm', NOW, tenMinutes), false, 'a new message');
    assert.equal(isRecentRepeat(seen(tenMinutes + 1), 'm', NOW, tenMinutes), false, 'outside the window');
    assert.equal(isRecentRepeat({ message: 'm' }, 'm', NOW, tenMinutes), false, 'no timestamp');
    assert.equal(
      isRecentRepeat(seen(0, 'm'.repeat(1024)), 'm'.repeat(2000), NOW, tenMinutes),
      true,
      'capped',
    );
  });
});
