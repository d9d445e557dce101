import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import fc from 'fast-check';
import { type AppliedKeys, readAppliedRecord, signAppliedRecord } from '../../src/flavor/applied-record.ts';
import { newKeyRing, rotateKeyRing } from '../../src/flavor/keyring.ts';

const ring = newKeyRing();
const UID = 'uid-1';
const APPLIED: AppliedKeys = {
  labels: ['example.com/tier', 'nodeflavor.io/flavor'],
  annotations: ['example.com/note'],
  taints: [
    { key: 'example.com/gpu', effect: 'NoExecute' },
    { key: 'example.com/gpu', effect: 'NoSchedule' },
  ],
};

/** A signed record as JSON, edited by `edit` (the MAC is kept: what a forger would try). */
function edited(edit: (record: Record<string, unknown>) => void): string {
  const record = JSON.parse(signAppliedRecord(ring, UID, APPLIED)) as Record<string, unknown>;
  edit(record);
  return JSON.stringify(record);
}

describe('the applied record', () => {
  test('has a compact, versioned, readable form', () => {
    const record = JSON.parse(signAppliedRecord(ring, UID, APPLIED));
    assert.deepEqual(Object.keys(record), ['v', 'labels', 'annotations', 'taints', 'mac']);
    assert.equal(record.v, 1);
    assert.deepEqual(record.taints, ['example.com/gpu:NoExecute', 'example.com/gpu:NoSchedule']);
    assert.match(record.mac, /^[A-Za-z0-9_-]{43}$/);
  });

  test('reads back what was signed, for this node', () => {
    assert.deepEqual(readAppliedRecord(ring, UID, signAppliedRecord(ring, UID, APPLIED)), {
      state: 'valid',
      applied: APPLIED,
    });
  });

  test('is canonical: the same keys in any order sign to the same text', () => {
    const shuffled: AppliedKeys = {
      labels: [...APPLIED.labels].reverse(),
      annotations: APPLIED.annotations,
      taints: [...APPLIED.taints].reverse(),
    };
    assert.equal(signAppliedRecord(ring, UID, shuffled), signAppliedRecord(ring, UID, APPLIED));
  });

  test('a record signed with a key that is now verify-only still proves; a retired key does not', () => {
    const text = signAppliedRecord(ring, UID, APPLIED);
    const rotated = rotateKeyRing(ring);
    assert.equal(readAppliedRecord(rotated, UID, text).state, 'valid');
    assert.equal(readAppliedRecord(rotateKeyRing(ring, 0), UID, text).state, 'invalid');
  });

  test('absent is not invalid', () => {
    assert.deepEqual(readAppliedRecord(ring, UID, undefined), { state: 'absent' });
  });

  const invalid: Record<string, string> = {
    'copied from another node': signAppliedRecord(ring, 'uid-2', APPLIED),
    'signed with another ring': signAppliedRecord(newKeyRing(), UID, APPLIED),
    'a key added': edited((r) => {
      (r.taints as string[]).push('example.com/admin-taint:NoExecute');
    }),
    'a key removed': edited((r) => {
      r.labels = ['nodeflavor.io/flavor'];
    }),
    'no MAC': edited((r) => {
      delete r.mac;
    }),
    'another version': edited((r) => {
      r.v = 2;
    }),
    'an unknown field': edited((r) => {
      r.extra = true;
    }),
    // Even signed: no class can name such a key, so no record may license its removal.
    'it names a kubernetes.io key': signAppliedRecord(ring, UID, {
      ...APPLIED,
      labels: ['kubernetes.io/hostname'],
    }),
    'a taint without an effect': edited((r) => {
      r.taints = ['example.com/gpu'];
    }),
    'a taint with an unknown effect': edited((r) => {
      r.taints = ['example.com/gpu:Evict'];
    }),
    'a list that is not one': edited((r) => {
      r.annotations = 'example.com/note';
    }),
    'more keys than a FlavorClass may have': edited((r) => {
      r.labels = Array.from({ length: 65 }, (_, i) => `example.com/l${i}`);
    }),
    'not JSON': '{"v":1,',
    'JSON null': 'null',
    'an empty string': '',
  };
  for (const [name, text] of Object.entries(invalid)) {
    test(`proves nothing when ${name}`, () => {
      const reading = readAppliedRecord(ring, UID, text);
      assert.equal(reading.state, 'invalid');
      // The reason is ours to write, never a quote of the (untrusted) record.
      if (reading.state === 'invalid') assert.ok(!reading.why.includes('example.com'), reading.why);
    });
  }

  test('no string at all is ever read as a record it was not signed as', () => {
    fc.assert(
      fc.property(fc.oneof(fc.string(), fc.json()), (text) => {
        assert.notEqual(readAppliedRecord(ring, UID, text).state, 'valid');
      }),
      { numRuns: 2000, seed: 17 },
    );
  });
});
