import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { bindingWithNodeOutcome } from '../../src/flavor/binding-outcome.ts';
import type { TokenBinding } from '../../src/flavor/resources.ts';

const NOW = '2026-12-01T00:00:10Z';
const bound: TokenBinding = { nodeName: 'n1', csrName: 'csr-1', boundAt: '2026-12-01T00:00:00Z' };
const refused = { reason: 'InvalidToken' as const, message: 'no match' };

describe('bindingWithNodeOutcome', () => {
  const cases: {
    name: string;
    binding: TokenBinding;
    outcome: Parameters<typeof bindingWithNodeOutcome>[1];
    want: TokenBinding | 'same';
  }[] = [
    { name: 'no Node judged yet: unchanged', binding: bound, outcome: undefined, want: 'same' },
    {
      name: 'a Node with neither record nor refusal: unchanged',
      binding: bound,
      outcome: { uid: 'u1' },
      want: 'same',
    },
    {
      name: 'verified: the UID and the record’s time',
      binding: bound,
      outcome: { uid: 'u1', verifiedAt: '2026-12-01T00:00:05Z' },
      want: { ...bound, nodeUID: 'u1', verifiedAt: '2026-12-01T00:00:05Z' },
    },
    {
      name: 'verified after a refusal: the refusal goes',
      binding: { ...bound, nodeUID: 'u1', failure: { ...refused, since: '2026-12-01T00:00:01Z' } },
      outcome: { uid: 'u1', verifiedAt: '2026-12-01T00:00:05Z' },
      want: { ...bound, nodeUID: 'u1', verifiedAt: '2026-12-01T00:00:05Z' },
    },
    {
      name: 'verified again: unchanged (the first time stays)',
      binding: { ...bound, nodeUID: 'u1', verifiedAt: '2026-12-01T00:00:05Z' },
      outcome: { uid: 'u1', verifiedAt: '2026-12-01T00:00:09Z' },
      want: 'same',
    },
    {
      name: 'refused: the UID, the reason and since when',
      binding: bound,
      outcome: { uid: 'u1', failure: refused },
      want: { ...bound, nodeUID: 'u1', failure: { ...refused, since: NOW } },
    },
    {
      name: 'refused again for the same reason: unchanged (no write, no wake-up)',
      binding: { ...bound, nodeUID: 'u1', failure: { ...refused, since: '2026-12-01T00:00:01Z' } },
      outcome: { uid: 'u1', failure: { ...refused, message: 'other words' } },
      want: 'same',
    },
    {
      name: 'a verified node that lost its flavor: the binding keeps when it was verified and says why it is not now',
      binding: { ...bound, nodeUID: 'u1', verifiedAt: '2026-12-01T00:00:05Z' },
      outcome: { uid: 'u1', failure: { reason: 'FlavorClassNotFound', message: 'class gone' } },
      want: {
        ...bound,
        nodeUID: 'u1',
        verifiedAt: '2026-12-01T00:00:05Z',
        failure: { reason: 'FlavorClassNotFound', message: 'class gone', since: NOW },
      },
    },
    {
      name: 'flavored again (the class is back): the failure goes, the first verification stays',
      binding: {
        ...bound,
        nodeUID: 'u1',
        verifiedAt: '2026-12-01T00:00:05Z',
        failure: { reason: 'FlavorClassNotFound', message: 'class gone', since: NOW },
      },
      outcome: { uid: 'u1', verifiedAt: '2026-12-01T00:00:09Z' },
      want: { ...bound, nodeUID: 'u1', verifiedAt: '2026-12-01T00:00:05Z' },
    },
    {
      name: 'another Node of the name (another UID): not this binding’s',
      binding: { ...bound, nodeUID: 'u1', verifiedAt: '2026-12-01T00:00:05Z' },
      outcome: { uid: 'u2', verifiedAt: '2026-12-01T00:00:09Z' },
      want: 'same',
    },
  ];
  for (const c of cases) {
    it(c.name, () => {
      const got = bindingWithNodeOutcome(c.binding, c.outcome, NOW);
      if (c.want === 'same') assert.equal(got, c.binding);
      else assert.deepEqual(got, c.want);
    });
  }

  it('a long refusal message is cut to the status limit', () => {
    const got = bindingWithNodeOutcome(
      bound,
      { uid: 'u1', failure: { reason: 'Expired', message: 'm'.repeat(5000) } },
      NOW,
    );
    assert.ok((got.failure?.message.length ?? 0) < 5000);
  });
});
