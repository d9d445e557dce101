import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { intern, internStrings, isInterned } from '../../src/kube/intern.ts';
import { trimNode } from '../../src/kube/node-writes.ts';

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

describe('intern never keeps a secret', () => {
  // A flavor token as the kubelet presents it (52 base32 characters), and a Node as the API sends it.
  const token = 'vssdck2edarc5bsqw63qtljd3zzpaaf6u7cvzm4kk3br6f27ppxa';
  const node = (labels: Record<string, string>, annotations: Record<string, string> = {}) =>
    JSON.parse(
      JSON.stringify({
        metadata: { name: 'edge-1', uid: 'u-1', resourceVersion: '7', labels, annotations },
        spec: { taints: [{ key: 'nodeflavor.io/unverified', effect: 'NoSchedule' }] },
        status: { nodeInfo: { operatingSystem: 'linux' } },
      }),
    );

  it("a Node's flavor token label enters no table (the controller's Node transform)", () => {
    const cached = internStrings(
      trimNode(node({ 'nodeflavor.io/token': token, 'kubernetes.io/os': 'linux' })),
    );
    assert.equal(cached.metadata.labels?.['nodeflavor.io/token'], token, 'the cached Node still has it');
    assert.equal(isInterned(token), false, 'the flavor token is in the process-wide intern table');
    assert.equal(isInterned('linux'), true, 'other short values are interned as before');
  });

  it('nor does any value under the token label (a malformed token is still a secret)', () => {
    const malformed = 'not-a-token-but-someones-secret-0001';
    internStrings(trimNode(node({ 'nodeflavor.io/token': malformed })));
    assert.equal(isInterned(malformed), false);
  });

  it('nor a string shaped like a flavor token under any other key, or interned directly', () => {
    const copied = 'abcdefghijklmnopqrstuvwxyz234567abcdefghijklmnopqrst';
    internStrings(trimNode(node({}, { 'example.com/copied-token': copied })));
    assert.equal(isInterned(copied), false);
    const direct = '234567abcdefghijklmnopqrstuvwxyz234567abcdefghijklmn';
    assert.equal(intern(direct), direct);
    assert.equal(isInterned(direct), false);
  });
});
