import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import {
  BOOTSTRAP_SECRET_GRACE_MS,
  bootstrapSecretDeleteAfterMs,
} from '../../src/flavor/bootstrap-secret.ts';
import type { TokenBinding } from '../../src/flavor/resources.ts';

const NOW = new Date('2030-01-01T12:00:00Z');
const bound = (agoMs: number, nodeUID?: string): TokenBinding => ({
  nodeName: `n${agoMs}`,
  csrName: `csr-${agoMs}`,
  boundAt: new Date(NOW.getTime() - agoMs).toISOString(),
  ...(nodeUID ? { nodeUID } : {}),
});
const state = (over: Partial<{ consumed: boolean; expired: boolean; revoked: boolean }> = {}) => ({
  consumed: false,
  expired: false,
  revoked: false,
  ...over,
});

describe('when a bootstrap token Secret may be deleted', () => {
  const cases: Record<
    string,
    { token: ReturnType<typeof state>; bindings: TokenBinding[]; want: number | undefined }
  > = {
    'usable (uses left): kept': { token: state(), bindings: [bound(1000)], want: undefined },
    'revoked: at once, even with a kubelet still bootstrapping': {
      token: state({ revoked: true, consumed: true }),
      bindings: [bound(1000)],
      want: 0,
    },
    'expired: at once': { token: state({ expired: true }), bindings: [], want: 0 },
    'consumed, the node registered: now': {
      token: state({ consumed: true }),
      bindings: [bound(1000, 'u')],
      want: 0,
    },
    'consumed, the kubelet still fetching its certificate: after the grace': {
      token: state({ consumed: true }),
      bindings: [bound(1000)],
      want: BOOTSTRAP_SECRET_GRACE_MS - 1000,
    },
    'consumed, one of two nodes registered: waits for the other': {
      token: state({ consumed: true }),
      bindings: [bound(5000, 'u'), bound(2000)],
      want: BOOTSTRAP_SECRET_GRACE_MS - 2000,
    },
    'consumed, a node that never registers: once the grace is over': {
      token: state({ consumed: true }),
      bindings: [bound(BOOTSTRAP_SECRET_GRACE_MS + 1)],
      want: 0,
    },
  };
  for (const [name, c] of Object.entries(cases)) {
    test(name, () =>
      assert.equal(bootstrapSecretDeleteAfterMs(c.token, { bindings: c.bindings }, NOW), c.want),
    );
  }
});

// A token bound to a TPM gets a new Secret with each proof of its machine (ADR 0014): it waits
// for the join it was minted for (a binding that used that proof), then goes a grace after it.
describe('bootstrapSecretDeleteAfterMs after a new attestation', () => {
  const ago = (ms: number) => new Date(NOW.getTime() - ms);
  const verified = (boundAgoMs: number, verifiedAgoMs: number, attestation: number): TokenBinding => ({
    ...bound(boundAgoMs, 'u'),
    verifiedAt: ago(verifiedAgoMs).toISOString(),
    attestation,
  });
  test('attested, not joined again yet: the Secret waits (it expires on its own)', () => {
    const status = { bindings: [verified(3_600_000, 3_590_000, 1)], attestation: { bound: 1 } };
    assert.equal(bootstrapSecretDeleteAfterMs(state({ consumed: true }), status, NOW, 2), undefined);
  });
  test('the binding moved to the new join: a grace after it, though the Node is registered', () => {
    const status = { bindings: [verified(10_000, 3_590_000, 2)], attestation: { bound: 2 } };
    assert.equal(
      bootstrapSecretDeleteAfterMs(state({ consumed: true }), status, NOW, 2),
      BOOTSTRAP_SECRET_GRACE_MS - 10_000,
    );
  });
  test('a first join, verified: now, as for any token', () => {
    const status = { bindings: [verified(60_000, 50_000, 1)], attestation: { bound: 1 } };
    assert.equal(bootstrapSecretDeleteAfterMs(state({ consumed: true }), status, NOW, 1), 0);
  });
  test("the proof's join was made and its Node is gone already (binding released): now", () => {
    assert.equal(
      bootstrapSecretDeleteAfterMs(
        state({ consumed: true }),
        { bindings: [], attestation: { bound: 3 } },
        NOW,
        3,
      ),
      0,
    );
  });
  test('revoked: at once, whatever the attestation', () => {
    assert.equal(bootstrapSecretDeleteAfterMs(state({ revoked: true }), {}, NOW, 5), 0);
  });
});
