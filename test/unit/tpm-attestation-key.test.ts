// attestationKeyProblems on real keys from swtpm (test/unit/fixtures/tpm) and on the AK's public
// area with one attribute changed at a time: each weakness is named, and a real AK has none.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { attestationKeyProblems } from '../../src/flavor/tpm/attestation-key.ts';
import { OBJECT_ATTRIBUTE, type ObjectAttributeName } from '../../src/flavor/tpm/tpm-algorithms.ts';
import { parseTpm2bPublic, parseTpmtPublic } from '../../src/flavor/tpm/tpm-public.ts';

const fixture = (name: string) => readFileSync(join(import.meta.dirname, 'fixtures', 'tpm', name));

/** The RSA AK's TPMT_PUBLIC with its objectAttributes (bytes 4..7) changed. */
function akWithAttributes(change: (attributes: number) => number) {
  const area = Buffer.from(fixture('ak.pub').subarray(2));
  area.writeUInt32BE(change(area.readUInt32BE(4)) >>> 0, 4);
  return parseTpmtPublic(area);
}
const clear = (name: ObjectAttributeName) => (attributes: number) => attributes & ~OBJECT_ATTRIBUTE[name];

describe('attestationKeyProblems', () => {
  it('finds none in the AKs tpm2_createak made (RSA and ECC)', () => {
    assert.deepEqual(attestationKeyProblems(parseTpm2bPublic(fixture('ak.pub'))), []);
    assert.deepEqual(attestationKeyProblems(parseTpm2bPublic(fixture('ak-ecc.pub'))), []);
  });

  it('names the one problem of a real signing key that is not restricted', () => {
    assert.deepEqual(attestationKeyProblems(parseTpm2bPublic(fixture('signer.pub'))), [
      'restricted is clear: the key signs arbitrary data, not only what the TPM attests',
    ]);
  });

  it('refuses the EK as an AK: a decryption key, not a signing one', () => {
    const problems = attestationKeyProblems(parseTpm2bPublic(fixture('ek.pub')));
    assert.deepEqual(problems, [
      'sign is clear: the key is not a signing key',
      'decrypt is set: an attestation key signs and does not decrypt',
    ]);
  });

  const cases: [ObjectAttributeName, RegExp][] = [
    ['fixedTPM', /^fixedTPM is clear: the key can be exported/],
    ['fixedParent', /^fixedParent is clear: the key can be duplicated/],
    ['sensitiveDataOrigin', /^sensitiveDataOrigin is clear: the key was not created by the TPM/],
    ['restricted', /^restricted is clear/],
    ['sign', /^sign is clear/],
  ];
  for (const [attribute, problem] of cases) {
    it(`names a cleared ${attribute}, and only that`, () => {
      const problems = attestationKeyProblems(akWithAttributes(clear(attribute)));
      assert.equal(problems.length, 1, problems.join('; '));
      assert.match(problems[0]!, problem);
    });
  }

  it('does not require userWithAuth (neither go-attestation nor SPIRE does)', () => {
    assert.deepEqual(attestationKeyProblems(akWithAttributes(clear('userWithAuth'))), []);
  });

  it('names a name algorithm other than sha256', () => {
    const area = Buffer.from(fixture('ak.pub').subarray(2));
    area.writeUInt16BE(0x0004, 2); // TPM_ALG_SHA1
    const ak = parseTpmtPublic(area);
    assert.equal(ak.name.length, 22);
    assert.deepEqual(attestationKeyProblems(ak), ['its name algorithm is sha1, not sha256']);
  });
});
