import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import { readFileSync } from 'node:fs';
import { syncBuiltinESMExports } from 'node:module';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import {
  constantTimeEqual,
  deriveFlavorToken,
  FLAVOR_TOKEN_LENGTH,
  FLAVOR_TOKEN_PATTERN,
  flavorTokenMessage,
  hmacMessage,
  hmacOf,
  verifyFlavorToken,
} from '../../src/flavor/flavor-token.ts';
import type { HmacKey, KeyRing } from '../../src/flavor/keyring.ts';
import { generateHmacKey, newKeyRing, rotateKeyRing } from '../../src/flavor/keyring.ts';
import { seededRandomBytes } from './support/random.ts';

const BASE32_ALPHABET = 'abcdefghijklmnopqrstuvwxyz234567';
const FIXED_KEY: HmacKey = { id: '00010203', key: Buffer.from(Array.from({ length: 32 }, (_, i) => i)) };
const fixedRing: KeyRing = { active: FIXED_KEY, verifyOnly: [] };

const tokenIds = fc.stringMatching(/^[a-z0-9]{6}$/);
const flavors = fc.string({ maxLength: 30 });
const keys = fc.uint8Array({ minLength: 32, maxLength: 32 }).map(
  (bytes): HmacKey => ({
    id: 'aaaaaaaa',
    key: Buffer.from(bytes),
  }),
);

describe('deriveFlavorToken', () => {
  // Computed independently (Python hmac + base64.b32encode). These pin the wire format: a change
  // would invalidate every token already issued.
  const knownAnswers: [string, string, string][] = [
    ['abcdef', 'sweet', 'oxmcc5gbgduo3u7umkvuqjcd6le7qqsfspzaixipbvqavipzmhua'],
    ['abcdef', 'sour', 'cj3z4viv532nud2bosvggt3qifvm7rpjjcvim274xnot5ydva54a'],
    ['ab', 'c', 'sspsjaezj2ivg2ppkvjrk7jg7uevd2u273wfnmzl6idutaclgnna'],
    ['a', 'bc', 'ilatejd72ptmvamegpshflmpu6kh3s47vrwk3oyipvdng53pooia'],
  ];
  for (const [tokenId, flavor, expected] of knownAnswers) {
    it(`matches the known answer for (${tokenId}, ${flavor})`, () => {
      assert.equal(deriveFlavorToken(FIXED_KEY, tokenId, flavor).reveal(), expected);
    });
  }

  it('is 52 characters of [a-z2-7], a valid label value (property)', () => {
    fc.assert(
      fc.property(keys, fc.string(), flavors, (key, tokenId, flavor) => {
        const token = deriveFlavorToken(key, tokenId, flavor).reveal();
        assert.equal(token.length, FLAVOR_TOKEN_LENGTH);
        assert.match(token, FLAVOR_TOKEN_PATTERN);
        assert.match(token, /^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$/);
      }),
    );
  });

  it('is deterministic (property)', () => {
    fc.assert(
      fc.property(keys, tokenIds, flavors, (key, tokenId, flavor) => {
        assert.equal(
          deriveFlavorToken(key, tokenId, flavor).reveal(),
          deriveFlavorToken(key, tokenId, flavor).reveal(),
        );
      }),
    );
  });

  it('differs by token id, flavor and key (property)', () => {
    fc.assert(
      fc.property(
        keys,
        keys,
        tokenIds,
        tokenIds,
        flavors,
        flavors,
        (key1, key2, id1, id2, flavor1, flavor2) => {
          fc.pre(!key1.key.equals(key2.key) || id1 !== id2 || flavor1 !== flavor2);
          const a = deriveFlavorToken(key1, id1, flavor1).reveal();
          const b = deriveFlavorToken(key2, id2, flavor2).reveal();
          assert.notEqual(a, b);
        },
      ),
    );
  });

  it('separates fields unambiguously', () => {
    const pairs: [string, string][] = [
      ['ab', 'c'],
      ['a', 'bc'],
      ['abc', ''],
      ['', 'abc'],
      ['abc\u0000\u0000\u0000\u0000', ''],
      ['abc', '\u0000\u0000\u0000\u0000'],
    ];
    const tokens = pairs.map(([tokenId, flavor]) => deriveFlavorToken(FIXED_KEY, tokenId, flavor).reveal());
    assert.equal(new Set(tokens).size, pairs.length);
  });

  it('encodes distinct (tokenId, flavor) pairs as distinct messages (property)', () => {
    fc.assert(
      fc.property(fc.string(), fc.string(), fc.string(), fc.string(), (id1, flavor1, id2, flavor2) => {
        fc.pre(id1 !== id2 || flavor1 !== flavor2);
        assert.ok(!flavorTokenMessage(id1, flavor1).equals(flavorTokenMessage(id2, flavor2)));
      }),
    );
  });

  it('encodes the message as domain ‖ u32be length ‖ tokenId ‖ u32be length ‖ flavor', () => {
    const expected = Buffer.concat([
      Buffer.from('nodeflavor/v1'),
      Buffer.from([0, 0, 0, 2]),
      Buffer.from('ab'),
      Buffer.from([0, 0, 0, 3]),
      Buffer.from('\u00e9t', 'utf8'), // 3 bytes: lengths count UTF-8 bytes, not characters
    ]);
    assert.deepEqual(flavorTokenMessage('ab', '\u00e9t'), expected);
  });

  it('hmacOf, fed piece by piece, is the HMAC of hmacMessage (property): records signed before still verify', () => {
    fc.assert(
      fc.property(
        fc.string(),
        fc.array(fc.string({ unit: 'grapheme' }), { maxLength: 5 }),
        (domain, fields) => {
          const whole = crypto
            .createHmac('sha256', FIXED_KEY.key)
            .update(hmacMessage(domain, ...fields))
            .digest();
          assert.deepEqual(hmacOf(FIXED_KEY.key, domain, ...fields), whole);
        },
      ),
    );
  });

  it('returns a Secret', () => {
    assert.equal(String(deriveFlavorToken(FIXED_KEY, 'abcdef', 'sweet')), '[redacted]');
  });
});

describe('verifyFlavorToken', () => {
  const tokenId = 'abcdef';
  const flavor = 'sweet';
  const good = deriveFlavorToken(FIXED_KEY, tokenId, flavor).reveal();

  it('accepts the right token and names the key', () => {
    assert.deepEqual(verifyFlavorToken(fixedRing, tokenId, flavor, good), {
      valid: true,
      keyId: FIXED_KEY.id,
    });
  });

  it('rejects the token of another flavor or another token id', () => {
    assert.deepEqual(verifyFlavorToken(fixedRing, tokenId, 'sour', good), { valid: false });
    assert.deepEqual(verifyFlavorToken(fixedRing, 'abcdeg', flavor, good), { valid: false });
    assert.deepEqual(verifyFlavorToken(fixedRing, tokenId, 'Sweet', good), { valid: false });
  });

  const malformed: Record<string, string | undefined> = {
    missing: undefined,
    empty: '',
    uppercased: good.toUpperCase(),
    'one character short': good.slice(1),
    'one character long': good + 'a',
    'trailing newline': good + '\n',
    'with padding': good + '====',
    'characters outside the alphabet': good.slice(0, 51) + '1',
  };
  for (const [name, presented] of Object.entries(malformed)) {
    it(`rejects a token that is ${name}`, () => {
      assert.deepEqual(verifyFlavorToken(fixedRing, tokenId, flavor, presented), { valid: false });
    });
  }

  it('rejects every single-character mutation (property)', () => {
    fc.assert(
      fc.property(
        fc.nat(FLAVOR_TOKEN_LENGTH - 1),
        fc.constantFrom(...BASE32_ALPHABET),
        fc.string({ unit: 'binary', minLength: 1, maxLength: 1 }),
        fc.boolean(),
        (position, inAlphabet, anyChar, stayInAlphabet) => {
          const replacement = stayInAlphabet ? inAlphabet : anyChar;
          fc.pre(replacement !== good[position]);
          const mutated = good.slice(0, position) + replacement + good.slice(position + 1);
          assert.equal(verifyFlavorToken(fixedRing, tokenId, flavor, mutated).valid, false);
        },
      ),
    );
  });

  it('rejects random tokens of the right form (property)', () => {
    const wellFormed = fc.stringMatching(/^[a-z2-7]{52}$/);
    fc.assert(
      fc.property(wellFormed, (presented) => !verifyFlavorToken(fixedRing, tokenId, flavor, presented).valid),
    );
  });

  it('rejects random strings of any length (property)', () => {
    fc.assert(
      fc.property(fc.string({ maxLength: 120 }), (presented) => {
        return !verifyFlavorToken(fixedRing, tokenId, flavor, presented).valid;
      }),
    );
  });
});

describe('verifyFlavorToken across key rotation', () => {
  const tokenId = 'q1w2e3';
  const flavor = 'sweet';

  it('verifies an old token while its key is retained, and not once it is dropped', () => {
    const randomBytes = seededRandomBytes('rotation');
    let ring = newKeyRing(randomBytes);
    const oldKey = ring.active;
    const oldToken = deriveFlavorToken(oldKey, tokenId, flavor).reveal();

    for (let rotation = 1; rotation <= 3; rotation++) {
      ring = rotateKeyRing(ring, 3, randomBytes);
      assert.deepEqual(verifyFlavorToken(ring, tokenId, flavor, oldToken), { valid: true, keyId: oldKey.id });
    }
    ring = rotateKeyRing(ring, 3, randomBytes);
    assert.equal(ring.verifyOnly.length, 3);
    assert.deepEqual(verifyFlavorToken(ring, tokenId, flavor, oldToken), { valid: false });
  });

  it('fails at once when a rotation retains no keys', () => {
    const ring = newKeyRing();
    const token = deriveFlavorToken(ring.active, tokenId, flavor).reveal();
    assert.equal(verifyFlavorToken(rotateKeyRing(ring, 0), tokenId, flavor, token).valid, false);
  });

  it('derives new tokens with the new active key', () => {
    const before = newKeyRing();
    const after = rotateKeyRing(before);
    const fresh = deriveFlavorToken(after.active, tokenId, flavor).reveal();
    assert.notEqual(fresh, deriveFlavorToken(before.active, tokenId, flavor).reveal());
    assert.deepEqual(verifyFlavorToken(after, tokenId, flavor, fresh), {
      valid: true,
      keyId: after.active.id,
    });
    assert.equal(verifyFlavorToken(before, tokenId, flavor, fresh).valid, false);
  });
});

describe('constant-time comparison', () => {
  it('constantTimeEqual compares bytes and treats different lengths as unequal', () => {
    assert.equal(constantTimeEqual(Buffer.from('abc'), Buffer.from('abc')), true);
    assert.equal(constantTimeEqual(Buffer.from('abc'), Buffer.from('abd')), false);
    assert.equal(constantTimeEqual(Buffer.from('abc'), Buffer.from('abcd')), false);
    assert.equal(constantTimeEqual(Buffer.alloc(0), Buffer.alloc(0)), true);
  });

  /** Runs `action` with crypto.timingSafeEqual wrapped, returning the lengths it compared. */
  function recordComparisons(action: () => void): number[] {
    const original = crypto.timingSafeEqual;
    const lengths: number[] = [];
    crypto.timingSafeEqual = (a, b) => {
      lengths.push(a.byteLength, b.byteLength);
      return original(a, b);
    };
    syncBuiltinESMExports(); // make `import { timingSafeEqual }` in the module see the wrapper
    try {
      action();
    } finally {
      crypto.timingSafeEqual = original;
      syncBuiltinESMExports();
    }
    return lengths;
  }

  it('compares against every key, with equal lengths, whether the token is right, wrong or malformed', () => {
    const randomBytes = seededRandomBytes('every key');
    const ring = rotateKeyRing(rotateKeyRing(newKeyRing(randomBytes), 3, randomBytes), 3, randomBytes);
    const matchesActive = deriveFlavorToken(ring.active, 'abcdef', 'sweet').reveal();
    const matchesOldest = deriveFlavorToken(ring.verifyOnly[1]!, 'abcdef', 'sweet').reveal();
    for (const presented of [matchesActive, matchesOldest, 'a'.repeat(52), 'short', undefined]) {
      const lengths = recordComparisons(() => verifyFlavorToken(ring, 'abcdef', 'sweet', presented));
      assert.deepEqual(lengths, Array(6).fill(FLAVOR_TOKEN_LENGTH), `comparisons for ${String(presented)}`);
    }
  });

  it('the source compares tokens only through timingSafeEqual', () => {
    const source = readFileSync(new URL('../../src/flavor/flavor-token.ts', import.meta.url), 'utf8');
    assert.match(source, /timingSafeEqual\(a, b\)/);
    assert.match(source, /constantTimeEqual\(candidate, expected\)/);
    // Every equality operator in the file, each reviewed: none compares token contents.
    const equalities = [...source.matchAll(/[\w.'[\]]+ *[!=]==? *[\w.'[\]]+/g)].map((m) => m[0]);
    assert.deepEqual(equalities, [
      'a.length === b.length',
      "presented === 'string'",
      'matchedKeyId === undefined',
      'matchedKeyId === undefined',
    ]);
  });
});

describe('generateHmacKey keys in practice', () => {
  it('two fresh keys give unrelated tokens for the same input', () => {
    const a = deriveFlavorToken(generateHmacKey(), 'abcdef', 'sweet').reveal();
    const b = deriveFlavorToken(generateHmacKey(), 'abcdef', 'sweet').reveal();
    assert.notEqual(a, b);
  });
});
