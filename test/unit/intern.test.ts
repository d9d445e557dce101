import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { intern, internStrings } from '../../src/kube/intern.ts';

describe('intern', () => {
  it('keeps values and structure, and shares equal short strings', () => {
    const a = JSON.parse('{"s":{"c":[{"type":"Ready","n":1,"x":null}],"l":["linux"]}}');
    const b = JSON.parse('{"s":{"c":[{"type":"Ready","n":1,"x":null}],"l":["linux"]}}');
    const before = structuredClone(a);
    assert.deepEqual(internStrings(a), before);
    internStrings(b);
    assert.equal(a.s.c[0].type, b.s.c[0].type);
    assert.equal(intern('linux'), a.s.l[0]);
  });

  it('leaves long strings alone', () => {
    const long = 'x'.repeat(100);
    assert.equal(intern(long), long);
  });
});
