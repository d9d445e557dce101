// The token lifecycle a node administrator sees (src/flavor/token-lifecycle.ts): a table of
// FlavoredToken statuses and the phase, reason and nodes each must show; and how refused CSRs
// are kept on the record.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { FlavoredToken, FlavoredTokenStatus } from '../../src/flavor/resources.ts';
import { tokenLifecycle, withRejections } from '../../src/flavor/token-lifecycle.ts';

const NOW = new Date('2030-01-01T12:00:00Z');

function token(
  status: FlavoredTokenStatus | undefined,
  spec: Partial<FlavoredToken['spec']> = {},
): FlavoredToken {
  return {
    apiVersion: 'nodeflavor.io/v1alpha1',
    kind: 'FlavoredToken',
    metadata: { name: 'ft-abc123', creationTimestamp: '2030-01-01T10:00:00Z' },
    spec: {
      flavorClassName: 'sweet',
      maxUses: 1,
      revocationPolicy: 'Keep',
      revoked: false,
      ttl: '4h',
      ...spec,
    },
    ...(status ? { status } : {}),
  };
}

const bound = { nodeName: 'edge-1', csrName: 'csr-1', boundAt: '2030-01-01T11:00:00Z', nodeUID: 'u1' };
const failure = {
  reason: 'InvalidToken',
  message: "node edge-1's flavor token does not match",
  since: '2030-01-01T11:00:05Z',
};
const refused = {
  csrName: 'csr-0',
  nodeName: 'edge-0',
  reason: 'NodeNameMismatch',
  message: 'node name "edge-0" does not match',
  at: '2030-01-01T10:30:00Z',
};

describe('tokenLifecycle', () => {
  const cases: [string, FlavoredToken, { phase: string; reason: string | null; since: string | null }][] = [
    [
      'no status yet: issued',
      token(undefined),
      { phase: 'Issued', reason: null, since: '2030-01-01T10:00:00Z' },
    ],
    [
      'unused and past its expiry (from spec and creation time): expired',
      token(undefined, { ttl: '1h' }),
      { phase: 'Expired', reason: null, since: '2030-01-01T11:00:00Z' },
    ],
    [
      'a CSR bound it: bound',
      token({ bindings: [bound] }),
      { phase: 'Bound', reason: null, since: bound.boundAt },
    ],
    [
      'bound, then the node was verified: verified (even past expiry)',
      token({ bindings: [{ ...bound, verifiedAt: '2030-01-01T11:00:02Z' }] }, { ttl: '1h' }),
      { phase: 'Verified', reason: null, since: '2030-01-01T11:00:02Z' },
    ],
    [
      "bound, the node's check failed: failed with its reason",
      token({ bindings: [{ ...bound, failure }] }),
      { phase: 'Failed', reason: 'InvalidToken', since: failure.since },
    ],
    [
      'a CSR refused, no binding: failed with the refusal',
      token({ rejections: [refused] }),
      { phase: 'Failed', reason: 'NodeNameMismatch', since: refused.at },
    ],
    [
      'a refusal older than the binding that followed it: bound',
      token({ rejections: [refused], bindings: [bound] }),
      { phase: 'Bound', reason: null, since: bound.boundAt },
    ],
    [
      'revoked wins over everything',
      token({ bindings: [{ ...bound, verifiedAt: '2030-01-01T11:00:02Z' }] }, { revoked: true }),
      { phase: 'Revoked', reason: null, since: null },
    ],
  ];
  for (const [name, input, expected] of cases) {
    it(name, () => {
      const life = tokenLifecycle(input, NOW);
      assert.deepEqual({ phase: life.phase, reason: life.reason, since: life.since }, expected);
    });
  }

  it('lists bound and refused nodes, and the reason only for a node not verified', () => {
    const life = tokenLifecycle(
      token({ bindings: [{ ...bound, verifiedAt: '2030-01-01T11:00:02Z' }], rejections: [refused] }),
      NOW,
    );
    assert.deepEqual(life.nodes, [
      {
        nodeName: 'edge-1',
        csrName: 'csr-1',
        boundAt: bound.boundAt,
        verifiedAt: '2030-01-01T11:00:02Z',
        reason: null,
        message: null,
      },
      {
        nodeName: 'edge-0',
        csrName: 'csr-0',
        boundAt: null,
        verifiedAt: null,
        reason: 'NodeNameMismatch',
        message: refused.message,
      },
    ]);
  });
});

describe('a token whose node lost its flavor', () => {
  it('no longer reads Verified: Failed with the reason, the node shows why (issue 25, item 6)', () => {
    const lost = {
      ...bound,
      verifiedAt: '2030-01-01T11:00:02Z',
      failure: {
        reason: 'FlavorClassNotFound',
        message: 'FlavorClass "sweet" does not exist',
        since: '2030-01-01T11:30:00Z',
      },
    };
    const life = tokenLifecycle(token({ bindings: [lost] }), NOW);
    assert.equal(life.phase, 'Failed');
    assert.equal(life.reason, 'FlavorClassNotFound');
    assert.deepEqual(life.nodes[0], {
      nodeName: 'edge-1',
      csrName: 'csr-1',
      boundAt: bound.boundAt,
      verifiedAt: null,
      reason: 'FlavorClassNotFound',
      message: 'FlavorClass "sweet" does not exist',
    });
  });
});

describe('withRejections', () => {
  const at = '2030-01-01T12:00:00Z';
  it('adds a refused CSR once: judging it again changes nothing', () => {
    const first = withRejections(
      [],
      [{ csrName: 'c1', nodeName: 'n', reason: 'NameTaken', message: 'm' }],
      at,
    );
    assert.equal(first.length, 1);
    const again = withRejections(
      first,
      [{ csrName: 'c1', nodeName: 'n', reason: 'NameTaken', message: 'm' }],
      '2031-01-01T00:00:00Z',
    );
    assert.deepEqual(again, first);
  });

  it('keeps the newest ten, newest last', () => {
    let kept = withRejections([], [], at);
    for (let i = 0; i < 14; i++)
      kept = withRejections(kept, [{ csrName: `c${i}`, reason: 'Expired', message: 'late' }], at);
    assert.equal(kept.length, 10);
    assert.equal(kept[0]?.csrName, 'c4');
    assert.equal(kept.at(-1)?.csrName, 'c13');
  });

  it('caps a message at 1024 characters', () => {
    const [entry] = withRejections(
      [],
      [{ csrName: 'c', reason: 'MalformedCSR', message: 'x'.repeat(5000) }],
      at,
    );
    assert.equal(entry?.message.length, 1024);
  });
});
