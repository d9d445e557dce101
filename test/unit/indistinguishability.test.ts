// DESIGN.md, "Indistinguishability rules": a token holder must not tell flavors apart, not even by
// sampling many join materials. Two flavors' materials are compared for byte length, for shape
// (everything but the tokens is identical) and, per character position of each token, for
// character frequencies (chi-square test of homogeneity on a 2×k contingency table).
import assert from 'node:assert/strict';
import { before, describe, it } from 'node:test';
import { formatBootstrapToken, generateBootstrapToken } from '../../src/flavor/bootstrap-token.ts';
import { deriveFlavorToken } from '../../src/flavor/flavor-token.ts';
import { generateHmacKey } from '../../src/flavor/keyring.ts';
import type { JoinMaterial } from '../../src/tokenissuer/issuance/join-material.ts';
import { renderJoinMaterial } from '../../src/tokenissuer/issuance/join-material.ts';
import { seededRandomBytes } from './support/random.ts';

const SAMPLES_PER_FLAVOR = 10_000;
const FLAVORS = ['sweet', 'sour'] as const;
// 74 positions are tested; at 1e-6 each, a false alarm somewhere has odds below 1e-4, and the
// seeded randomness makes the outcome fixed anyway. A real leak gives p-values far smaller.
const SIGNIFICANCE = 1e-6;

interface Sample {
  material: JoinMaterial;
  bootstrapToken: string;
  flavorToken: string;
}

// --- chi-square test of homogeneity -------------------------------------------------------

/** ln Γ(x) for x > 0 (Lanczos approximation, g = 7, n = 9). */
function logGamma(x: number): number {
  const c = [
    0.99999999999980993, 676.5203681218851, -1259.1392167224028, 771.32342877765313, -176.61502916214059,
    12.507343278686905, -0.13857109526572012, 9.9843695780195716e-6, 1.5056327351493116e-7,
  ];
  if (x < 0.5) return Math.log(Math.PI / Math.sin(Math.PI * x)) - logGamma(1 - x);
  const z = x - 1;
  let sum = c[0]!;
  for (let i = 1; i < c.length; i++) sum += c[i]! / (z + i);
  const t = z + 7.5;
  return 0.5 * Math.log(2 * Math.PI) + (z + 0.5) * Math.log(t) - t + Math.log(sum);
}

/** Q(a, x) = Γ(a, x) / Γ(a), the regularized upper incomplete gamma function (Numerical Recipes 6.2). */
function upperRegularizedGamma(a: number, x: number): number {
  if (x <= 0) return 1;
  const logPrefix = -x + a * Math.log(x) - logGamma(a);
  if (x < a + 1) {
    let term = 1 / a;
    let sum = term;
    for (let n = 1; n < 1000 && Math.abs(term) > Math.abs(sum) * 1e-15; n++) {
      term *= x / (a + n);
      sum += term;
    }
    return 1 - sum * Math.exp(logPrefix);
  }
  const tiny = 1e-300;
  let b = x + 1 - a;
  let c = 1 / tiny;
  let d = 1 / b;
  let h = d;
  for (let i = 1; i < 1000; i++) {
    const an = -i * (i - a);
    b += 2;
    d = an * d + b;
    if (Math.abs(d) < tiny) d = tiny;
    c = b + an / c;
    if (Math.abs(c) < tiny) c = tiny;
    d = 1 / d;
    const delta = d * c;
    h *= delta;
    if (Math.abs(delta - 1) < 1e-15) break;
  }
  return Math.exp(logPrefix) * h;
}

/** P(X ≥ statistic) for X ~ χ²(degreesOfFreedom). */
function chiSquarePValue(statistic: number, degreesOfFreedom: number): number {
  return upperRegularizedGamma(degreesOfFreedom / 2, statistic / 2);
}

/** p-value that two samples of characters come from the same distribution. */
function homogeneityPValue(first: string[], second: string[]): number {
  const count = (chars: string[]): Map<string, number> => {
    const counts = new Map<string, number>();
    for (const char of chars) counts.set(char, (counts.get(char) ?? 0) + 1);
    return counts;
  };
  const rows = [count(first), count(second)];
  const totals = [first.length, second.length];
  const grandTotal = first.length + second.length;
  const categories = new Set([...rows[0]!.keys(), ...rows[1]!.keys()]);
  let statistic = 0;
  for (const category of categories) {
    const columnTotal = (rows[0]!.get(category) ?? 0) + (rows[1]!.get(category) ?? 0);
    rows.forEach((row, r) => {
      const expected = (totals[r]! * columnTotal) / grandTotal;
      statistic += ((row.get(category) ?? 0) - expected) ** 2 / expected;
    });
  }
  return categories.size < 2 ? 1 : chiSquarePValue(statistic, categories.size - 1);
}

function charactersAt(tokens: string[], position: number): string[] {
  return tokens.map((token) => token[position]!);
}

// --- the samples ---------------------------------------------------------------------------

function sampleFlavors(): Record<(typeof FLAVORS)[number], Sample[]> {
  const randomBytes = seededRandomBytes('indistinguishability');
  const key = generateHmacKey(randomBytes);
  const expiresAt = new Date('2031-06-30T12:00:00Z');
  const sampleOne = (flavor: string): Sample => {
    const token = generateBootstrapToken(randomBytes);
    const flavorToken = deriveFlavorToken(key, token.id, flavor);
    const material = renderJoinMaterial({
      apiServerEndpoint: '192.0.2.10:6443',
      caCertHash: `sha256:${'5e'.repeat(32)}`,
      caCertPem: '-----BEGIN CERTIFICATE-----\nMIIBcluster\n-----END CERTIFICATE-----\n',
      token,
      flavorToken,
      expiresAt,
    });
    return { material, bootstrapToken: formatBootstrapToken(token), flavorToken: flavorToken.reveal() };
  };
  const samples = { sweet: [] as Sample[], sour: [] as Sample[] };
  // Interleaved, so both flavors draw from the same stretch of the random stream.
  for (let i = 0; i < SAMPLES_PER_FLAVOR; i++)
    for (const flavor of FLAVORS) samples[flavor].push(sampleOne(flavor));
  return samples;
}

describe('indistinguishability of flavors', () => {
  let samples: Record<(typeof FLAVORS)[number], Sample[]>;
  let all: Sample[];
  before(() => {
    samples = sampleFlavors();
    all = [...samples.sweet, ...samples.sour];
  });

  it('gives every material the same byte length, field by field', () => {
    const lengthsOf = (m: JoinMaterial): number[] =>
      [m.joinConfiguration, m.joinCommand, m.cloudInit, JSON.stringify(m)].map((text) =>
        Buffer.byteLength(text),
      );
    const reference = lengthsOf(all[0]!.material);
    for (const sample of all) assert.deepEqual(lengthsOf(sample.material), reference);
  });

  it('differs between materials only in the tokens themselves', () => {
    const masked = (sample: Sample): string =>
      JSON.stringify(sample.material)
        .replaceAll(sample.bootstrapToken, '<bootstrap token>')
        .replaceAll(sample.bootstrapToken.slice(0, 6), '<token id>')
        .replaceAll(sample.flavorToken, '<flavor token>');
    const reference = masked(all[0]!);
    for (const sample of all) assert.equal(masked(sample), reference);
    assert.ok(!reference.includes('sweet') && !reference.includes('sour'));
  });

  const tokenKinds = [
    { name: 'flavor token', length: 52, pick: (s: Sample) => s.flavorToken },
    { name: 'bootstrap token', length: 23, pick: (s: Sample) => s.bootstrapToken },
  ];
  for (const { name, length, pick } of tokenKinds) {
    it(`shows no flavor-dependent character frequencies at any position of the ${name}`, () => {
      const sweet = samples.sweet.map(pick);
      const sour = samples.sour.map(pick);
      for (let position = 0; position < length; position++) {
        const p = homogeneityPValue(charactersAt(sweet, position), charactersAt(sour, position));
        assert.ok(p >= SIGNIFICANCE, `${name} position ${position}: p = ${p}`);
      }
    });
  }
});

describe('the chi-square test itself', () => {
  it('matches tabulated critical values', () => {
    assert.ok(Math.abs(chiSquarePValue(3.841, 1) - 0.05) < 1e-3);
    assert.ok(Math.abs(chiSquarePValue(23.209, 10) - 0.01) < 1e-4);
    assert.ok(Math.abs(chiSquarePValue(44.985, 31) - 0.05) < 1e-3);
    assert.equal(chiSquarePValue(0, 5), 1);
  });

  it('detects a small flavor-dependent skew at the sample size used', () => {
    const randomBytes = seededRandomBytes('skew');
    const alphabet = 'abcdefghijklmnopqrstuvwxyz234567';
    const draw = (): string => alphabet[randomBytes(1)[0]! % 32]!;
    const fair = Array.from({ length: SAMPLES_PER_FLAVOR }, draw);
    // One character in 20 replaced by 'a': what a subtly flavor-dependent token would look like.
    const skewed = Array.from({ length: SAMPLES_PER_FLAVOR }, (_, i) => (i % 20 === 0 ? 'a' : draw()));
    assert.ok(homogeneityPValue(fair, skewed) < SIGNIFICANCE);
    assert.ok(homogeneityPValue(fair, Array.from({ length: SAMPLES_PER_FLAVOR }, draw)) >= SIGNIFICANCE);
  });
});
