import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { base32Encode } from '../../src/flavor/base32.ts';

describe('base32Encode', () => {
  // RFC 4648 section 10, lowercased, padding removed.
  const vectors: Record<string, string> = {
    '': '',
    f: 'my',
    fo: 'mzxq',
    foo: 'mzxw6',
    foob: 'mzxw6yq',
    fooba: 'mzxw6ytb',
    foobar: 'mzxw6ytboi',
  };
  for (const [input, expected] of Object.entries(vectors)) {
    it(`encodes ${JSON.stringify(input)} as ${JSON.stringify(expected)}`, () => {
      assert.equal(base32Encode(Buffer.from(input, 'utf8')), expected);
    });
  }

  it('encodes all-ones and all-zeros blocks', () => {
    assert.equal(base32Encode(Buffer.alloc(5, 0xff)), '77777777');
    assert.equal(base32Encode(Buffer.alloc(5, 0)), 'aaaaaaaa');
  });

  it('has length ceil(8n/5) and alphabet [a-z2-7] (property)', () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 100 }), (bytes) => {
        const encoded = base32Encode(bytes);
        assert.equal(encoded.length, Math.ceil((bytes.length * 8) / 5));
        assert.match(encoded, /^[a-z2-7]*$/);
      }),
    );
  });

  it('agrees with a bit-string reference implementation (property)', () => {
    const alphabet = 'abcdefghijklmnopqrstuvwxyz234567';
    const reference = (bytes: Uint8Array): string => {
      const bits = [...bytes].map((b) => b.toString(2).padStart(8, '0')).join('');
      const groups = bits.match(/.{1,5}/g) ?? [];
      return groups.map((g) => alphabet[Number.parseInt(g.padEnd(5, '0'), 2)]).join('');
    };
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 64 }), (bytes) => base32Encode(bytes) === reference(bytes)),
    );
  });
});
