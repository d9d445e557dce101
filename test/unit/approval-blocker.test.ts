// The approval's last check (src/flavor/node-name-claim.ts approvalBlocker), on fresh facts: the
// token, its binding, the claim, and the name itself. A pending CSR for a name whose Node exists is
// never approved, except a rejoin token's own machine coming back to the Node its binding recorded
// (ADR 0014).
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { type ApprovalFacts, approvalBlocker, newClaim } from '../../src/flavor/node-name-claim.ts';
import type { TokenBinding } from '../../src/flavor/resources.ts';

const binding = (overrides: Partial<TokenBinding> = {}): TokenBinding => ({
  nodeName: 'n1',
  csrName: 'csr-new',
  boundAt: '2030-01-01T00:00:00Z',
  ...overrides,
});

function facts(overrides: Partial<ApprovalFacts> & { rejoin?: boolean; bindings?: TokenBinding[] } = {}) {
  const { rejoin, bindings, ...rest } = overrides;
  return {
    csrName: 'csr-new',
    nodeName: 'n1',
    tokenUID: 'uid-token',
    token: {
      uid: 'uid-token',
      tokenId: 'abcdef',
      revoked: false,
      deleting: false,
      bindings: bindings ?? [binding()],
      ...(rejoin !== undefined ? { rejoin } : {}),
    },
    claim: newClaim('n1', {
      tokenName: 'ft-abcdef',
      tokenUID: 'uid-token',
      tokenID: 'abcdef',
      csrName: 'csr-new',
      claimedAt: '2030-01-01T00:00:00Z',
    }),
    ...rest,
  } satisfies ApprovalFacts;
}

describe('approvalBlocker', () => {
  it('approves a recorded binding, held claim and a name with no Node yet', () => {
    assert.equal(approvalBlocker(facts()), undefined);
  });

  it('approves a retry of the same join only while the first request has no certificate', () => {
    const retry = { csrName: 'csr-retry', bindings: [binding({ csrName: 'csr-first' })] };
    assert.equal(approvalBlocker(facts(retry)), undefined, 'the first request never got its certificate');
    assert.match(
      approvalBlocker(facts({ ...retry, boundCsrIssued: true })) ?? '',
      /no binding of node name n1 to this CSR/,
      'issued: its machine may have registered a Node and deleted it before the binding recorded it',
    );
  });

  it('refuses when a Node of the name exists (this request did not create it)', () => {
    assert.match(
      approvalBlocker(facts({ node: { uid: 'uid-node' }, bindings: [binding({ nodeUID: 'uid-node' })] })) ??
        '',
      /exists already/,
    );
  });

  it("lets a rejoin token's machine come back to the Node its binding recorded", () => {
    assert.equal(
      approvalBlocker(
        facts({ rejoin: true, node: { uid: 'uid-node' }, bindings: [binding({ nodeUID: 'uid-node' })] }),
      ),
      undefined,
    );
  });

  it('refuses a rejoin token a Node of its name that is not the one it registered', () => {
    assert.match(
      approvalBlocker(
        facts({ rejoin: true, node: { uid: 'uid-other' }, bindings: [binding({ nodeUID: 'uid-node' })] }),
      ) ?? '',
      /exists already/,
    );
  });

  it('refuses a rejoin token whose binding is not moved to this CSR yet', () => {
    assert.match(
      approvalBlocker(
        facts({
          rejoin: true,
          node: { uid: 'uid-node' },
          bindings: [binding({ csrName: 'csr-old', nodeUID: 'uid-node' })],
        }),
      ) ?? '',
      /no binding of node name n1 to this CSR/,
    );
  });

  it('refuses a revoked rejoin token', () => {
    const revoked = facts({
      rejoin: true,
      node: { uid: 'uid-node' },
      bindings: [binding({ nodeUID: 'uid-node' })],
    });
    revoked.token.revoked = true;
    assert.match(approvalBlocker(revoked) ?? '', /was revoked/);
  });
});
