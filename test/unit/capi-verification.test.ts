import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { type TokenStatus, verifyMachine } from '../../src/capi/verification.ts';

const BOUND = '2030-01-01T00:00:00Z';
const VERIFIED = '2030-01-01T00:00:05Z';

const token = (over: Partial<TokenStatus> = {}): TokenStatus => ({
  flavor: 'sweet',
  phase: 'Issued',
  reason: null,
  message: null,
  nodes: [],
  ...over,
});
const node = (nodeName: string, over: Partial<TokenStatus['nodes'][number]> = {}) => ({
  nodeName,
  boundAt: BOUND,
  verifiedAt: null,
  reason: null,
  message: null,
  ...over,
});

describe('verifyMachine: NodeFlavorVerified from the token the Machine joined with', () => {
  const cases: Record<string, { token: TokenStatus; nodeRef?: string; want: string; settled: boolean }> = {
    'issued, no node yet': { token: token(), want: 'False WaitingForNode', settled: false },
    'bound: the node is being verified': {
      token: token({ phase: 'Bound', nodes: [node('m-1')] }),
      want: 'False Verifying',
      settled: false,
    },
    'verified, the Machine linked to that very Node': {
      token: token({ phase: 'Verified', nodes: [node('m-1', { verifiedAt: VERIFIED })] }),
      nodeRef: 'm-1',
      want: 'True Verified',
      settled: true,
    },
    'verified, but Cluster API has not linked a Node yet': {
      token: token({ phase: 'Verified', nodes: [node('m-1', { verifiedAt: VERIFIED })] }),
      want: 'False WaitingForNodeRef',
      settled: false,
    },
    'Cluster API linked another Node (a providerID taken by someone else)': {
      token: token({ phase: 'Verified', nodes: [node('m-1', { verifiedAt: VERIFIED })] }),
      nodeRef: 'squatter',
      want: 'False NodeMismatch',
      settled: false,
    },
    'a refused CSR after the join does not unverify the Machine (phase Failed, node verified)': {
      token: token({
        phase: 'Failed',
        reason: 'NoUsesLeft',
        nodes: [
          node('m-1', { verifiedAt: VERIFIED }),
          node('other', { boundAt: null, reason: 'NoUsesLeft' }),
        ],
      }),
      nodeRef: 'm-1',
      want: 'True Verified',
      settled: true,
    },
    'its node failed verification (the quarantine stays)': {
      token: token({
        phase: 'Failed',
        reason: 'InvalidToken',
        nodes: [node('m-1', { reason: 'InvalidToken' })],
      }),
      nodeRef: 'm-1',
      want: 'False VerificationFailed',
      settled: false,
    },
    'a CSR with its token was refused before any binding': {
      token: token({
        phase: 'Failed',
        reason: 'NameTaken',
        nodes: [node('m-1', { boundAt: null, reason: 'NameTaken' })],
      }),
      want: 'False VerificationFailed',
      settled: false,
    },
    'expired before a node joined (a MachineHealthCheck replaces it)': {
      token: token({ phase: 'Expired' }),
      want: 'False TokenExpired',
      settled: true,
    },
    'revoked before its node was verified': {
      token: token({ phase: 'Revoked' }),
      want: 'False TokenRevoked',
      settled: true,
    },
    'the MachineDeployment asks for another flavor now': {
      token: token({ flavor: 'sour', phase: 'Verified', nodes: [node('m-1', { verifiedAt: VERIFIED })] }),
      nodeRef: 'm-1',
      want: 'False FlavorChanged',
      settled: true,
    },
  };
  for (const [name, { token: status, nodeRef, want, settled }] of Object.entries(cases))
    test(name, () => {
      const verdict = verifyMachine({
        flavor: 'sweet',
        tokenId: 'abc123',
        token: status,
        nodeRefName: nodeRef,
      });
      assert.equal(`${verdict.status} ${verdict.reason}`, want);
      assert.equal(verdict.settled, settled);
      assert.match(verdict.message, /abc123/, 'the message names the token');
    });

  test('a mismatch names both Nodes', () => {
    const verdict = verifyMachine({
      flavor: 'sweet',
      tokenId: 'abc123',
      token: token({ phase: 'Verified', nodes: [node('m-1', { verifiedAt: VERIFIED })] }),
      nodeRefName: 'squatter',
    });
    assert.match(verdict.message, /squatter.*m-1/);
  });
});
