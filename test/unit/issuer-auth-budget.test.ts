// The failed-authentication budget (auth-budget.ts): reserve before the review, refund what proved
// valid, spend what proved invalid; answers remembered; known bearers outside the budget.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { type Admission, AuthBudget, type Ticket } from '../../src/tokenissuer/defences/auth-budget.ts';

const budget = (capacity = 3, overrides: { cacheMs?: number; knownMs?: number } = {}) =>
  new AuthBudget<string>({
    perAddress: { capacity, refillPerSecond: 0.001 },
    cacheMs: overrides.cacheMs ?? 10_000,
    knownMs: overrides.knownMs ?? 3_600_000,
    maxKeys: 100,
  });

function ticketOf(admission: Admission<string>): Ticket {
  assert.equal(admission.kind, 'review', JSON.stringify(admission));
  return (admission as { ticket: Ticket }).ticket;
}

describe('AuthBudget', () => {
  it('reserves before the review: N unknown bearers at once get at most the budget in tickets', () => {
    const b = budget(3);
    const admissions = Array.from({ length: 20 }, (_, i) => b.admit(`bad-${i}`, 'a', 0));
    assert.equal(admissions.filter((a) => a.kind === 'review').length, 3);
    const limited = admissions.filter((a) => a.kind === 'limited');
    assert.equal(limited.length, 17);
    assert.ok(limited.every((a) => a.kind === 'limited' && a.retryAfterSeconds >= 1));
  });

  it('a valid bearer gives its unit back; an invalid one spends it', () => {
    const b = budget(1);
    b.valid(ticketOf(b.admit('good', 'a', 0)), 'alice', 0);
    b.invalid(ticketOf(b.admit('bad', 'a', 0)), 0);
    assert.equal(b.admit('bad-2', 'a', 0).kind, 'limited');
  });

  it('a review that could not be made gives the unit back', () => {
    const b = budget(1);
    b.unanswered(ticketOf(b.admit('x', 'a', 0)), 0);
    assert.equal(b.admit('y', 'a', 0).kind, 'review');
  });

  it('remembers answers for cacheMs: a valid caller without review, an invalid bearer refused from memory', () => {
    const b = budget(5, { cacheMs: 1_000 });
    b.valid(ticketOf(b.admit('good', 'a', 0)), 'alice', 0);
    b.invalid(ticketOf(b.admit('bad', 'a', 0)), 0);
    assert.deepEqual(b.admit('good', 'b', 500), { kind: 'cached', caller: 'alice' });
    assert.deepEqual(b.admit('bad', 'b', 500), { kind: 'refused' });
    // Expired: reviewed again.
    assert.equal(b.admit('good', 'b', 1_500).kind, 'review');
    assert.equal(b.admit('bad', 'b', 1_500).kind, 'review');
  });

  it('keeps addresses apart', () => {
    const b = budget(1);
    b.invalid(ticketOf(b.admit('bad-1', 'a', 0)), 0);
    assert.equal(b.admit('bad-2', 'a', 0).kind, 'limited');
    assert.equal(b.admit('bad-3', 'b', 0).kind, 'review');
  });

  it('a known bearer is reviewed outside an exhausted budget, until it proves invalid', () => {
    const b = budget(1, { cacheMs: 0 });
    b.valid(ticketOf(b.admit('good', 'proxy', 0)), 'alice', 0);
    b.invalid(ticketOf(b.admit('bad', 'proxy', 0)), 0);
    assert.equal(b.admit('bad-2', 'proxy', 0).kind, 'limited');
    const again = ticketOf(b.admit('good', 'proxy', 10));
    assert.equal(again.reserved, false);
    // Revoked meanwhile: it is no longer known, and waits like anyone else.
    b.invalid(again, 10);
    assert.equal(b.admit('good', 'proxy', 20).kind, 'limited');
  });

  it('without a per-address budget every unknown bearer is reviewed', () => {
    const b = new AuthBudget<string>({ cacheMs: 0, knownMs: 0, maxKeys: 10 });
    for (let i = 0; i < 50; i++) assert.equal(b.admit(`t${i}`, 'a', 0).kind, 'review');
  });

  it('settling a ticket twice changes nothing', () => {
    const b = budget(1);
    const ticket = ticketOf(b.admit('x', 'a', 0));
    b.valid(ticket, 'alice', 0);
    b.valid(ticket, 'alice', 0); // a second refund would lift the bucket above what was taken
    b.invalid(ticketOf(b.admit('y', 'a', 0)), 0);
    assert.equal(b.admit('z', 'a', 0).kind, 'limited');
  });

  it('reviews in flight plus invalid ones never exceed capacity + elapsed × rate, however they interleave (property)', () => {
    type Step =
      | { kind: 'admit'; valid: boolean; gap: number }
      | { kind: 'settle'; pick: number; gap: number };
    const step = fc.oneof(
      fc.record({
        kind: fc.constant('admit' as const),
        valid: fc.boolean(),
        gap: fc.integer({ min: 0, max: 300 }),
      }),
      fc.record({
        kind: fc.constant('settle' as const),
        pick: fc.nat(),
        gap: fc.integer({ min: 0, max: 300 }),
      }),
    );
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 10 }),
        fc.array(step, { maxLength: 300 }),
        (capacity, steps: Step[]) => {
          const rate = 2;
          const b = new AuthBudget<string>({
            perAddress: { capacity, refillPerSecond: rate },
            cacheMs: 0,
            knownMs: 0,
            maxKeys: 1000,
          });
          let now = 0;
          let n = 0;
          let spent = 0;
          const open: { ticket: Ticket; valid: boolean }[] = [];
          for (const s of steps) {
            now += s.gap;
            if (s.kind === 'admit') {
              const admission = b.admit(`bearer-${n++}`, 'a', now);
              if (admission.kind === 'review') open.push({ ticket: admission.ticket, valid: s.valid });
            } else if (open.length > 0) {
              const [settled] = open.splice(s.pick % open.length, 1);
              if (settled?.valid) b.valid(settled.ticket, 'caller', now);
              else if (settled) {
                b.invalid(settled.ticket, now);
                spent += 1;
              }
            }
            // Units leave the bucket only by a reservation and come back only for a valid or
            // unanswered review: what is out (in flight or spent) is bounded by what it ever held.
            if (open.length + spent > capacity + (now / 1000) * rate + 1e-9) return false;
          }
          return true;
        },
      ),
    );
  });
});
