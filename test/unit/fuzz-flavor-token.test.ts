// Fuzzing flavor-token verification (seed-stable, bounded: over 20,000 forged tokens in all).
// A forger who knows the format, a valid token of another node, or a valid token for another
// token ID or flavor gets nothing: random strings, random well-formed tokens, single- and
// multi-character mutations of a valid token, valid tokens presented for the wrong token ID or
// flavor, and tokens made with a key outside the ring never verify — against a ring with retired
// keys, so every key is tried. And no input, however odd or large, makes verification throw.
// (flavor-token.test.ts holds the format's properties; bench/fuzz-flavor-tokens.ts runs the same
// forgeries at 100,000s.)
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { deriveFlavorToken, FLAVOR_TOKEN_LENGTH, verifyFlavorToken } from '../../src/flavor/flavor-token.ts';
import { generateHmacKey, type KeyRing, newKeyRing, rotateKeyRing } from '../../src/flavor/keyring.ts';
import { seededRandomBytes } from './support/random.ts';
import { applyEdit } from './support/token-mutations.ts';

const BASE32 = 'abcdefghijklmnopqrstuvwxyz234567';
const TOKEN_ID = 'k3x9qa';
const FLAVOR = 'sweet';

// Active key plus two retired (verify-only) keys: a forgery has three chances to match.
const randomBytes = seededRandomBytes('fuzz-flavor-token');
const ring: KeyRing = rotateKeyRing(rotateKeyRing(newKeyRing(randomBytes), 3, randomBytes), 3, randomBytes);
const keys = [ring.active, ...ring.verifyOnly];
/** The genuine token under each key of the ring. */
const genuine = keys.map((key) => deriveFlavorToken(key, TOKEN_ID, FLAVOR).reveal());
const genuineSet = new Set(genuine);
const outsider = generateHmacKey(seededRandomBytes('not in the ring'));

let attempts = 0;
/** Verification must not throw and must refuse. */
function refused(presented: unknown, tokenId = TOKEN_ID, flavor = FLAVOR): boolean {
  attempts += 1;
  const verdict = verifyFlavorToken(ring, tokenId, flavor, presented as string | undefined);
  return verdict.valid === false && verdict.keyId === undefined;
}

const base32Char = fc.constantFrom(...BASE32);
const anyChar = fc.oneof(
  fc.string({ unit: 'binary', minLength: 1, maxLength: 1 }),
  fc.string({ unit: 'grapheme', minLength: 1, maxLength: 1 }),
  base32Char,
  fc.constantFrom('A', 'Z', '0', '1', '8', '9', '=', ' ', '\n', '\u0000', '\u00e9', '\ud800', '\u{1f600}'),
);
const genuineToken = fc.constantFrom(...genuine);

/** One edit of a string: replace, insert or delete a character, or swap two neighbours. */
const edit = fc.record({
  kind: fc.constantFrom('replace', 'insert', 'delete', 'swap', 'case'),
  at: fc.nat(FLAVOR_TOKEN_LENGTH - 1),
  char: fc.oneof(base32Char, anyChar),
});
describe('fuzz: forged flavor tokens never verify', () => {
  it('the genuine tokens verify (the forgeries below are refused by the check, not by a broken ring)', () => {
    for (const [i, token] of genuine.entries()) {
      assert.deepEqual(verifyFlavorToken(ring, TOKEN_ID, FLAVOR, token), { valid: true, keyId: keys[i]?.id });
    }
  });

  it('random strings of any length and alphabet (4,000)', () => {
    const strings = fc.oneof(
      fc.string({ maxLength: 120 }),
      fc.string({ unit: 'binary', maxLength: 120 }),
      fc.string({ unit: 'grapheme', minLength: 40, maxLength: 60 }),
      fc.string({ unit: base32Char, minLength: 0, maxLength: 120 }),
      fc.string({
        unit: fc.constantFrom(...'abcdefghijklmnopqrstuvwxyz0123456789'),
        minLength: 52,
        maxLength: 52,
      }),
    );
    fc.assert(
      fc.property(strings, (s) => refused(s)),
      { numRuns: 4000, seed: 7001 },
    );
  });

  it('random 52-character [a-z2-7] strings, the exact form of a token (5,000)', () => {
    fc.assert(
      fc.property(fc.string({ unit: base32Char, minLength: 52, maxLength: 52 }), (s) => {
        fc.pre(!genuineSet.has(s));
        return refused(s);
      }),
      { numRuns: 5000, seed: 7002 },
    );
  });

  it('single-character mutations of a genuine token (3,000)', () => {
    fc.assert(
      fc.property(
        genuineToken,
        fc.nat(FLAVOR_TOKEN_LENGTH - 1),
        fc.oneof(base32Char, anyChar),
        (token, at, char) => {
          const mutated = token.slice(0, at) + char + token.slice(at + 1);
          fc.pre(!genuineSet.has(mutated));
          return refused(mutated);
        },
      ),
      { numRuns: 3000, seed: 7003 },
    );
  });

  it('multi-character mutations: replacements, insertions, deletions, swaps, case flips, cuts (4,000)', () => {
    const mutation = fc.oneof(
      fc
        .array(edit, { minLength: 2, maxLength: 8 })
        .map((edits) => (t: string) => edits.reduce(applyEdit, t)),
      // The last k characters (or the first k) rewritten at random.
      fc
        .tuple(
          fc.integer({ min: 1, max: FLAVOR_TOKEN_LENGTH }),
          fc.string({ unit: base32Char, minLength: 52, maxLength: 52 }),
          fc.boolean(),
        )
        .map(
          ([k, fill, head]) =>
            (t: string) =>
              head ? fill.slice(0, k) + t.slice(k) : t.slice(0, FLAVOR_TOKEN_LENGTH - k) + fill.slice(0, k),
        ),
      // Truncated, extended, padded, repeated, reversed, rotated.
      fc.integer({ min: 0, max: FLAVOR_TOKEN_LENGTH - 1 }).map((k) => (t: string) => t.slice(0, k)),
      fc.string({ minLength: 1, maxLength: 8 }).map((s) => (t: string) => t + s),
      fc.string({ minLength: 1, maxLength: 8 }).map((s) => (t: string) => s + t),
      fc.constantFrom(
        (t: string) => `${t}====`,
        (t: string) => ` ${t}`,
        (t: string) => `${t}\n`,
        (t: string) => t + t,
        (t: string) => [...t].reverse().join(''),
        (t: string) => t.toUpperCase(),
        (t: string) => t.normalize('NFKC').replace(/a/g, '\u0430'), // Cyrillic a
      ),
      fc
        .integer({ min: 1, max: FLAVOR_TOKEN_LENGTH - 1 })
        .map((k) => (t: string) => t.slice(k) + t.slice(0, k)),
    );
    fc.assert(
      fc.property(genuineToken, mutation, (token, mutate) => {
        const mutated = mutate(token);
        fc.pre(!genuineSet.has(mutated));
        return refused(mutated);
      }),
      { numRuns: 4000, seed: 7004 },
    );
  });

  it('genuine tokens presented for another token ID or another flavor (3,000)', () => {
    const otherId = fc.oneof(
      fc.string({
        unit: fc.constantFrom(...'abcdefghijklmnopqrstuvwxyz0123456789'),
        minLength: 6,
        maxLength: 6,
      }),
      fc.constantFrom('K3X9QA', 'k3x9q', 'k3x9qa ', ' k3x9qa', 'k3x9qb', '', 'k3x9qak3x9qa'),
      fc.string({ maxLength: 12 }),
    );
    const otherFlavor = fc.oneof(
      fc.constantFrom(
        'sour',
        'Sweet',
        'SWEET',
        'sweet ',
        ' sweet',
        'sweet\u0000',
        'swee',
        'sweets',
        'sw\u0435et',
        '',
      ),
      fc.string({ maxLength: 40 }),
      fc.string({ unit: 'binary', maxLength: 20 }),
    );
    fc.assert(
      fc.property(genuineToken, otherId, otherFlavor, fc.nat(2), (token, id, flavor, which) => {
        // which: 0 = wrong ID, 1 = wrong flavor, 2 = both wrong.
        const tokenId = which === 1 ? TOKEN_ID : id;
        const claimed = which === 0 ? FLAVOR : flavor;
        fc.pre(tokenId !== TOKEN_ID || claimed !== FLAVOR);
        return refused(token, tokenId, claimed);
      }),
      { numRuns: 3000, seed: 7005 },
    );
  });

  it('tokens derived with a key outside the ring, for the right token ID and flavor (1,000)', () => {
    const foreignKeys = fc
      .uint8Array({ minLength: 32, maxLength: 32 })
      .map((bytes) => ({ id: 'ffffffff', key: Buffer.from(bytes) }));
    fc.assert(
      fc.property(foreignKeys, (key) => refused(deriveFlavorToken(key, TOKEN_ID, FLAVOR).reveal())),
      { numRuns: 1000, seed: 7006 },
    );
    assert.ok(refused(deriveFlavorToken(outsider, TOKEN_ID, FLAVOR).reveal()));
  });

  it('never throws on arbitrary input: any value, non-ASCII and lone surrogates, huge strings (1,000)', () => {
    const strings = fc.oneof(
      fc.string({ unit: 'binary', maxLength: 200 }),
      fc.string({
        unit: fc.integer({ min: 0xd800, max: 0xdfff }).map((c) => String.fromCharCode(c)),
        maxLength: 60,
      }),
    );
    fc.assert(
      fc.property(fc.anything(), strings, strings, (presented, tokenId, flavor) => {
        assert.doesNotThrow(() => refused(presented, tokenId, flavor));
      }),
      { numRuns: 1000, seed: 7007 },
    );
    const huge = [
      'a'.repeat(1 << 20),
      `${genuine[0]}${'a'.repeat(1 << 20)}`,
      '\u{1f600}'.repeat(1 << 18),
      '\ud800'.repeat(1 << 18),
      `${genuine[0]}\u0000`,
    ];
    for (const presented of huge) {
      assert.ok(refused(presented));
      assert.ok(refused(genuine[0], presented, FLAVOR), 'a huge token ID');
      assert.ok(refused(genuine[0], TOKEN_ID, presented), 'a huge flavor');
    }
  });

  it('tried over 20,000 forgeries in all', (t) => {
    t.diagnostic(`${attempts} verification attempts, 0 verified`);
    assert.ok(attempts >= 20_000, `only ${attempts} attempts`);
  });
});
