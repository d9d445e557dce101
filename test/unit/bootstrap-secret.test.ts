import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import {
  BOOTSTRAP_SECRET_GRACE_MS,
  bootstrapSecretDeleteAfterMs,
  type JoinSecretFacts,
} from '../../src/flavor/bootstrap-secret.ts';

const NOW = new Date('2030-01-01T12:00:00Z');
const iso = (agoMs: number) => new Date(NOW.getTime() - agoMs).toISOString();
/** A join bound `agoMs` ago; `registeredAgoMs`: its Node seen then (after its claim: registered). */
const bound = (agoMs: number, registeredAgoMs?: number, secretDeleted = false): JoinSecretFacts => ({
  boundAt: iso(agoMs),
  ...(registeredAgoMs !== undefined ? { registeredAt: iso(registeredAgoMs) } : {}),
  ...(secretDeleted ? { secretDeleted } : {}),
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
    { token: ReturnType<typeof state>; bindings: JoinSecretFacts[]; want: number | undefined }
  > = {
    'usable (uses left): kept': { token: state(), bindings: [bound(1000)], want: undefined },
    'revoked: at once, even with a kubelet still bootstrapping': {
      token: state({ revoked: true, consumed: true }),
      bindings: [bound(1000)],
      want: 0,
    },
    'expired: at once': { token: state({ expired: true }), bindings: [], want: 0 },
    'consumed, the node registered and its join deleted the Secret: nothing left to do': {
      token: state({ consumed: true }),
      bindings: [bound(1000, 500, true)],
      want: undefined,
    },
    'consumed, the node registered, no join deleted it (an older version, a crash): now': {
      token: state({ consumed: true }),
      bindings: [bound(1000, 500)],
      want: 0,
    },
    'consumed, the kubelet still fetching its certificate: after the grace': {
      token: state({ consumed: true }),
      bindings: [bound(1000)],
      want: BOOTSTRAP_SECRET_GRACE_MS - 1000,
    },
    'consumed, one of two nodes registered: waits for the other': {
      token: state({ consumed: true }),
      bindings: [bound(5000, 4000), bound(2000)],
      want: BOOTSTRAP_SECRET_GRACE_MS - 2000,
    },
    'consumed, a node that never registers: once the grace is over': {
      token: state({ consumed: true }),
      bindings: [bound(BOOTSTRAP_SECRET_GRACE_MS + 1)],
      want: 0,
    },
  };
  for (const [name, c] of Object.entries(cases)) {
    test(name, () => assert.equal(bootstrapSecretDeleteAfterMs(c.token, c.bindings, undefined, NOW), c.want));
  }
});

// A token bound to a TPM gets a new Secret with each proof of its machine (ADR 0014): it waits
// for the join it was minted for (a join that used that proof), then goes as any join's does.
describe('bootstrapSecretDeleteAfterMs after a new proof', () => {
  const consumed = state({ consumed: true });
  /** A join bound `boundAgoMs` ago, its Node first seen `registeredAgoMs` ago, on proof `proof`. */
  const join = (boundAgoMs: number, registeredAgoMs: number, proof: number, secretDeleted = false) => ({
    ...bound(boundAgoMs, registeredAgoMs, secretDeleted),
    proof,
  });
  test('proven again, not joined again yet: the Secret waits (it expires on its own)', () => {
    const joins = [join(3_600_000, 3_590_000, 1, true)];
    assert.equal(
      bootstrapSecretDeleteAfterMs(consumed, joins, { attestation: { bound: 1 } }, NOW, 2),
      undefined,
    );
  });
  test('the join came back on the new proof (a rejoin): a grace after it, though its Node registered long before', () => {
    const joins = [join(10_000, 3_590_000, 2)];
    assert.equal(
      bootstrapSecretDeleteAfterMs(consumed, joins, { attestation: { bound: 2 } }, NOW, 2),
      BOOTSTRAP_SECRET_GRACE_MS - 10_000,
    );
  });
  test("a first join, registered, its join deleted that proof's Secret: nothing left", () => {
    const joins = [join(60_000, 50_000, 1, true)];
    assert.equal(
      bootstrapSecretDeleteAfterMs(consumed, joins, { attestation: { bound: 1 } }, NOW, 1),
      undefined,
    );
  });
  test("the proof's join was made and its Node is gone already (its record released): now", () => {
    assert.equal(bootstrapSecretDeleteAfterMs(consumed, [], { attestation: { bound: 3 } }, NOW, 3), 0);
  });
  test('revoked: at once, whatever the proof', () => {
    assert.equal(bootstrapSecretDeleteAfterMs(state({ revoked: true }), [], undefined, NOW, 5), 0);
  });
});
