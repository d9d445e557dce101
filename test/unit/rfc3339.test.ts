import assert from 'node:assert/strict';
import { test } from 'node:test';
import { rfc3339 } from '../../src/flavor/rfc3339.ts';

test('rfc3339 writes whole seconds in UTC, dropping the fraction rather than rounding it up', () => {
  assert.equal(rfc3339(new Date('2026-12-02T01:02:03.999Z')), '2026-12-02T01:02:03Z');
  assert.equal(rfc3339(new Date('2026-12-02T01:02:03Z')), '2026-12-02T01:02:03Z');
  // Another zone's offset comes out in UTC, as metav1.Time serialises.
  assert.equal(rfc3339(new Date('2026-12-02T03:02:03.5+02:00')), '2026-12-02T01:02:03Z');
});
