// Fuzz: forged flavor tokens against verifyFlavorToken at scale (the CI sample is
// test/unit/fuzz-flavor-token.test.ts). 100,000 random strings (half of them in the exact token
// form, 52 characters of [a-z2-7]), 100,000 mutations of a genuine token (one to many characters
// replaced, inserted, deleted, swapped, case-flipped, cut or padded), plus genuine tokens
// presented for the wrong token ID or flavor and tokens made with a key outside the ring; the
// ring holds an active and two retired keys. Goal: 0 verified. Seeded, so a run is repeatable.
//   node --import tsx bench/fuzz-flavor-tokens.ts [--scale quick|full] [--json PATH]

import { createHash } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import fc from 'fast-check';
import { deriveFlavorToken, FLAVOR_TOKEN_LENGTH, verifyFlavorToken } from '../src/flavor/flavor-token.ts';
import { type KeyRing, newKeyRing, rotateKeyRing } from '../src/flavor/keyring.ts';
import { applyEdit } from '../test/unit/support/token-mutations.ts';
import { type Figure, figure, printTable, type Scale, scaleFromArgs } from './lib.ts';

const BASE32 = 'abcdefghijklmnopqrstuvwxyz234567';
const TOKEN_ID_ALPHABET = 'abcdefghijklmnopqrstuvwxyz0123456789';
const TOKEN_ID = 'k3x9qa';
const FLAVOR = 'sweet';
const SEED = 20_240_607;

/** A repeatable byte stream (SHA-256 blocks) for the ring's keys. */
function seededBytes(seed: string): (size: number) => Buffer {
  let counter = 0;
  let pool = Buffer.alloc(0);
  return (size) => {
    while (pool.length < size) {
      pool = Buffer.concat([pool, createHash('sha256').update(`${seed}/${counter++}`).digest()]);
    }
    const out = Buffer.from(pool.subarray(0, size));
    pool = pool.subarray(size);
    return out;
  };
}

export interface FuzzCounts {
  random: number;
  mutated: number;
  wrongBinding: number;
  foreignKey: number;
  verified: number;
  ms: number;
}

/** Runs every forgery class; returns how many of each were tried and how many verified. */
export function fuzzFlavorTokens(perClass: { random: number; mutated: number }): FuzzCounts {
  const bytes = seededBytes('bench-fuzz-flavor-tokens');
  const ring: KeyRing = rotateKeyRing(rotateKeyRing(newKeyRing(bytes), 3, bytes), 3, bytes);
  const genuine = [ring.active, ...ring.verifyOnly].map((k) =>
    deriveFlavorToken(k, TOKEN_ID, FLAVOR).reveal(),
  );
  const genuineSet = new Set(genuine);
  const counts: FuzzCounts = { random: 0, mutated: 0, wrongBinding: 0, foreignKey: 0, verified: 0, ms: 0 };
  const started = performance.now();
  const attempt = (
    kind: keyof Omit<FuzzCounts, 'verified' | 'ms'>,
    presented: string,
    id = TOKEN_ID,
    flavor = FLAVOR,
  ) => {
    counts[kind] += 1;
    if (verifyFlavorToken(ring, id, flavor, presented).valid) counts.verified += 1;
  };
  // The property never fails: every verified forgery is counted, and the run goes on. A class
  // runs until it has tried `target` forgeries (a mutation that gives back the genuine token, such
  // as swapping two equal characters, is not a forgery and does not count).
  const run = <T>(
    kind: keyof Omit<FuzzCounts, 'verified' | 'ms'>,
    target: number,
    seed: number,
    arbitrary: fc.Arbitrary<T>,
    body: (value: T) => void,
  ) => {
    const goal = counts[kind] + target;
    for (let round = 0; counts[kind] < goal; round++) {
      fc.assert(
        fc.property(arbitrary, (value) => {
          if (counts[kind] < goal) body(value);
        }),
        { numRuns: goal - counts[kind], seed: seed + 1000 * round },
      );
    }
  };

  const base32Char = fc.constantFrom(...BASE32);
  const anyChar = fc.oneof(
    base32Char,
    fc.string({ unit: 'binary', minLength: 1, maxLength: 1 }),
    fc.constantFrom('A', 'Z', '0', '1', '8', '9', '=', ' ', '\n', '\u0000', '\u00e9', '\ud800'),
  );

  // Random: half in the exact token form, half anything.
  const wellFormed = Math.ceil(perClass.random / 2);
  run('random', wellFormed, SEED + 1, fc.string({ unit: base32Char, minLength: 52, maxLength: 52 }), (s) => {
    if (!genuineSet.has(s)) attempt('random', s);
  });
  run(
    'random',
    perClass.random - wellFormed,
    SEED + 2,
    fc.oneof(
      fc.string({ maxLength: 120 }),
      fc.string({ unit: 'binary', maxLength: 120 }),
      fc.string({ unit: base32Char, maxLength: 120 }),
      fc.string({ unit: fc.constantFrom(...TOKEN_ID_ALPHABET), minLength: 52, maxLength: 52 }),
    ),
    (s) => {
      if (!genuineSet.has(s)) attempt('random', s);
    },
  );

  // Mutated: 1 to 8 edits of a genuine token, or a wholesale rewrite of a head or tail.
  const edit = fc.record({
    kind: fc.constantFrom('replace', 'replace', 'insert', 'delete', 'swap', 'case'),
    at: fc.nat(FLAVOR_TOKEN_LENGTH - 1),
    char: fc.oneof(base32Char, anyChar),
  });

  const mutation = fc.oneof(
    { weight: 3, arbitrary: fc.array(edit, { minLength: 1, maxLength: 1 }) },
    { weight: 3, arbitrary: fc.array(edit, { minLength: 2, maxLength: 8 }) },
    {
      weight: 1,
      arbitrary: fc
        .tuple(
          fc.integer({ min: 1, max: FLAVOR_TOKEN_LENGTH }),
          fc.string({ unit: base32Char, minLength: 52, maxLength: 52 }),
          fc.boolean(),
        )
        .map(([k, fill, head]) => [{ kind: head ? 'head' : 'tail', at: k, char: fill }]),
    },
  );
  run(
    'mutated',
    perClass.mutated,
    SEED + 3,
    fc.tuple(fc.constantFrom(...genuine), mutation),
    ([token, edits]) => {
      const mutated = edits.reduce((t, e) => {
        if (e.kind === 'head') return e.char.slice(0, e.at) + t.slice(e.at);
        if (e.kind === 'tail') return t.slice(0, FLAVOR_TOKEN_LENGTH - e.at) + e.char.slice(0, e.at);
        return applyEdit(t, e);
      }, token);
      if (!genuineSet.has(mutated)) attempt('mutated', mutated);
    },
  );

  // A genuine token for the wrong token ID or flavor.
  const bindings = Math.ceil(perClass.random / 5);
  run(
    'wrongBinding',
    bindings,
    SEED + 4,
    fc.tuple(
      fc.constantFrom(...genuine),
      fc.oneof(
        fc.string({ unit: fc.constantFrom(...TOKEN_ID_ALPHABET), minLength: 6, maxLength: 6 }),
        fc.string({ maxLength: 12 }),
      ),
      fc.oneof(
        fc.constantFrom('sour', 'Sweet', 'sweet ', 'swee', 'sw\u0435et', ''),
        fc.string({ maxLength: 40 }),
      ),
      fc.nat(2),
    ),
    ([token, id, flavor, which]) => {
      const tokenId = which === 1 ? TOKEN_ID : id;
      const claimed = which === 0 ? FLAVOR : flavor;
      if (tokenId !== TOKEN_ID || claimed !== FLAVOR) attempt('wrongBinding', token, tokenId, claimed);
    },
  );

  // The right binding under a key the ring does not hold.
  run(
    'foreignKey',
    Math.ceil(perClass.random / 10),
    SEED + 5,
    fc.uint8Array({ minLength: 32, maxLength: 32 }),
    (key) =>
      attempt(
        'foreignKey',
        deriveFlavorToken({ id: 'ffffffff', key: Buffer.from(key) }, TOKEN_ID, FLAVOR).reveal(),
      ),
  );
  counts.ms = performance.now() - started;
  // A control: the genuine tokens do verify, so 0 above means refused, not broken.
  for (const token of genuine) {
    if (!verifyFlavorToken(ring, TOKEN_ID, FLAVOR, token).valid)
      throw new Error('a genuine token did not verify');
  }
  return counts;
}

export async function runFuzz(scale: Scale): Promise<Figure[]> {
  const perClass =
    scale === 'quick' ? { random: 10_000, mutated: 10_000 } : { random: 100_000, mutated: 100_000 };
  const counts = fuzzFlavorTokens(perClass);
  const tried = counts.random + counts.mutated + counts.wrongBinding + counts.foreignKey;
  console.log(
    `fuzz: ${counts.random} random, ${counts.mutated} mutated, ${counts.wrongBinding} for a wrong token ID or flavor, ` +
      `${counts.foreignKey} under a foreign key: ${tried} forged tokens in ${(counts.ms / 1000).toFixed(1)} s, ${counts.verified} verified`,
  );
  return [
    figure({
      name: 'fuzz: forged flavor tokens accepted',
      value: counts.verified,
      unit: 'tokens',
      baseline: null,
      baselineName: null,
      goal: '0',
      met: counts.verified === 0,
      notes: `${tried} forged (${counts.random} random, ${counts.mutated} mutated, ${counts.wrongBinding} wrong binding, ${counts.foreignKey} foreign key), seed ${SEED}`,
    }),
  ];
}

if (import.meta.main) {
  // No control plane needed: verification is pure.
  const figures = await runFuzz(scaleFromArgs());
  printTable(figures);
  const at = process.argv.indexOf('--json');
  const path = at >= 0 ? process.argv[at + 1] : undefined;
  if (path) writeFileSync(path, JSON.stringify(figures));
  if (!figures.every((f) => f.met)) process.exitCode = 1;
}
