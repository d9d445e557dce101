// The quote verifier on bytes a real swtpm and tpm2-tools 5.4 wrote: PCR 0 untouched and PCR 7
// extended once with 0x00…01 (test/unit/fixtures/tpm/quote-*; `tpm2_quote -l sha256:0,7 -q
// 0011223344556677`, `tpm2_pcrread sha256:0,7 -o`).
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { parseQuote, quoteProblems } from '../../src/flavor/tpm/quote.ts';
import { parseTpm2bPublic } from '../../src/flavor/tpm/tpm-public.ts';

const fixture = (name: string) => readFileSync(join(import.meta.dirname, 'fixtures', 'tpm', name));
const ak = parseTpm2bPublic(fixture('quote-ak.pub'));
const message = fixture('quote-pcr0-7.msg');
const signature = fixture('quote-pcr0-7.sig');
const values = fixture('quote-pcr0-7.pcrs');
const nonce = Buffer.from('0011223344556677', 'hex');
const PCR7 = '90f4b39548df55ad6187a1d20d731ecee78c545b94afd16f42ef7592d99cd365';
const required = [
  { index: 0, sha256: '0'.repeat(64) },
  { index: 7, sha256: PCR7 },
];
const check = (overrides: Partial<Parameters<typeof quoteProblems>[0]> = {}) =>
  quoteProblems({ ak, message, signature, values, nonce, required, ...overrides });

describe('TPM quote', () => {
  it('parses what tpm2_quote wrote: the nonce, the selection and the digest', () => {
    const quote = parseQuote(message);
    assert.deepEqual(quote.qualifyingData, nonce);
    assert.deepEqual(quote.sha256Indexes, [0, 7]);
    assert.deepEqual(quote.otherBanks, []);
    assert.equal(quote.pcrDigest.length, 32);
  });

  it('accepts the quote when every required PCR has its value', () => {
    assert.deepEqual(check(), []);
  });

  it('names a PCR whose value differs (another boot state)', () => {
    assert.deepEqual(check({ required: [required[0]!, { index: 7, sha256: 'ab'.repeat(32) }] }), [
      `PCR 7 is ${PCR7}, not the required ${'ab'.repeat(32)}`,
    ]);
  });

  it("refuses a quote for another challenge's nonce", () => {
    assert.deepEqual(check({ nonce: Buffer.from('ffeeddccbbaa9988', 'hex') }), [
      "the quote was not made for this challenge's nonce",
    ]);
  });

  it('refuses a quote of other PCRs than the ones required', () => {
    assert.match(
      check({ required: [{ index: 7, sha256: PCR7 }] })[0] ?? '',
      /selects sha256:0,7, not sha256:7/,
    );
  });

  it('refuses reported values the TPM did not quote', () => {
    const forged = Buffer.from(values);
    forged[40] = (forged[40] ?? 0) ^ 1;
    assert.deepEqual(check({ values: forged }), ['the reported PCR values are not the ones the TPM quoted']);
  });

  it('refuses a quote signed by another key, or altered after signing', () => {
    assert.deepEqual(check({ ak: parseTpm2bPublic(fixture('ak.pub')) }), [
      "the quote is not signed by this challenge's attestation key",
    ]);
    const altered = Buffer.from(message);
    altered[altered.length - 1] = (altered[altered.length - 1] ?? 0) ^ 1;
    assert.deepEqual(check({ message: altered }), [
      "the quote is not signed by this challenge's attestation key",
    ]);
  });

  it('refuses a quote with more than one PCR selection (values could be paired with other PCRs)', () => {
    // TPMS_ATTEST: magic 4, type 2, signer 2+34, extraData 2+8, clock 17, firmware 8, then the count.
    const twoSelections = Buffer.from(message);
    twoSelections.writeUInt32BE(2, 4 + 2 + 36 + 10 + 17 + 8);
    assert.throws(() => parseQuote(twoSelections), /2 PCR selections, not exactly one/);
  });

  it('reports a malformed signature structure instead of throwing', () => {
    assert.equal(check({ signature: Buffer.from([0, 0x14]) }).length, 1);
  });
});
