import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { sameJson } from '../../src/flavor/json-equal.ts';

/** The same document with every object's keys in reverse order, as a JSON round trip yields it. */
function reordered(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(reordered);
  if (value === null || typeof value !== 'object') return value;
  return Object.fromEntries(
    Object.entries(value)
      .reverse()
      .map(([k, v]) => [k, reordered(v)]),
  );
}

describe('sameJson', () => {
  it('ignores key order at every depth, as the API server reorders keys', () => {
    fc.assert(
      fc.property(fc.jsonValue(), (value) => {
        assert.equal(sameJson(value, reordered(JSON.parse(JSON.stringify(value)))), true);
      }),
    );
  });

  it('sees any change of a leaf', () => {
    fc.assert(
      fc.property(fc.dictionary(fc.string(), fc.integer()), fc.string(), (object, key) => {
        const changed = { ...object, [key]: (object[key] ?? 0) + 1 };
        assert.equal(sameJson(object, changed), false);
      }),
    );
  });

  it('treats an undefined property as absent, as JSON.stringify does', () => {
    assert.equal(sameJson({ a: 1, b: undefined }, { a: 1 }), true);
    assert.equal(sameJson({ a: 1 }, { a: 1, b: null }), false);
  });

  it('tells arrays from objects and keeps array order', () => {
    assert.equal(sameJson([1, 2], { 0: 1, 1: 2 }), false);
    assert.equal(sameJson([1, 2], [2, 1]), false);
    assert.equal(sameJson({ c: [{ x: 1, y: 2 }] }, { c: [{ y: 2, x: 1 }] }), true);
  });

  it('compares a status as computed against the same status read back from the API server', () => {
    const computed = {
      tokenID: 'abc123',
      uses: 1,
      conditions: [
        { type: 'Ready', status: 'False', reason: 'Consumed', message: '', observedGeneration: 1 },
      ],
    };
    const stored = {
      conditions: [
        { message: '', observedGeneration: 1, reason: 'Consumed', status: 'False', type: 'Ready' },
      ],
      tokenID: 'abc123',
      uses: 1,
    };
    assert.notEqual(JSON.stringify(computed), JSON.stringify(stored));
    assert.equal(sameJson(computed, stored), true);
  });
});
