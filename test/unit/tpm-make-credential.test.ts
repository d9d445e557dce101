// makeCredential without a TPM: KDFa against OpenSSL's KBKDF, the encrypted seed against an RSA
// key whose private half the test holds, the blob's layout against the file
// `tpm2_makecredential -T none` wrote (test/unit/fixtures/tpm/cred.blob), and the round trip
// through the seed. That a TPM accepts it is test/e2e/tpm-credential.test.ts.
import assert from 'node:assert/strict';
import { constants, generateKeyPairSync, privateDecrypt } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { credentialBlobFile, parseCredentialBlobFile } from '../../src/flavor/tpm/credential-blob-file.ts';
import { kdfa } from '../../src/flavor/tpm/kdfa.ts';
import { makeCredential } from '../../src/flavor/tpm/make-credential.ts';
import { openCredentialWithSeed } from '../../src/flavor/tpm/open-credential.ts';
import { hashById, TPM_ALG } from '../../src/flavor/tpm/tpm-algorithms.ts';
import { parseTpm2bPublic } from '../../src/flavor/tpm/tpm-public.ts';

const fixture = (name: string) => readFileSync(join(import.meta.dirname, 'fixtures', 'tpm', name));
const sha256 = hashById(TPM_ALG.SHA256)!;
const ek = parseTpm2bPublic(fixture('ek.pub'));
const akName = fixture('ak.name');
const credential = Buffer.from('the credential, 32 bytes long!!!');
const seed = Buffer.alloc(32, 0x5a);

describe('kdfa', () => {
  // Expected values from OpenSSL 3: `openssl kdf -keylen N -kdfopt mac:HMAC -kdfopt digest:SHA256
  // -kdfopt hexkey:000102…1f -kdfopt salt:LABEL [-kdfopt hexinfo:CONTEXT] KBKDF`.
  const key = Buffer.from('000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f', 'hex');
  it('equals SP 800-108 counter mode (OpenSSL KBKDF) for one block', () => {
    const out = kdfa(sha256, key, 'STORAGE', Buffer.from('000b00112233', 'hex'), Buffer.alloc(0), 128);
    assert.equal(out.toString('hex'), '5c91bf77baac0a1423bcf747dc827769');
  });
  it('and for two blocks (384 bits), with no context', () => {
    const out = kdfa(sha256, key, 'INTEGRITY', Buffer.alloc(0), Buffer.alloc(0), 384);
    assert.equal(
      out.toString('hex'),
      '062b7f39dfd0e1c6b000f9a037b29cf44a3cbbd2316607e04f9761a91fad5a53da3f0f498aaf86d674a9bfb727aaf060',
    );
  });
  it('a label given with its NUL is the same label', () => {
    assert.deepEqual(
      kdfa(sha256, key, 'STORAGE\0', akName, Buffer.alloc(0), 128),
      kdfa(sha256, key, 'STORAGE', akName, Buffer.alloc(0), 128),
    );
  });
});

describe('makeCredential', () => {
  it("has the structure TPM2_MakeCredential's has for an RSA-2048 SHA-256 EK", () => {
    const made = makeCredential({ ekPublic: ek, akName, credential, seed });
    // TPM2B_ID_OBJECT: size 68 = TPM2B_DIGEST(32-byte HMAC) + encIdentity (2 + 32).
    assert.equal(made.idObject.readUInt16BE(0), 68);
    assert.equal(made.idObject.length, 70);
    assert.equal(made.idObject.readUInt16BE(2), 32);
    // TPM2B_ENCRYPTED_SECRET: the 2048-bit OAEP ciphertext.
    assert.equal(made.encryptedSecret.readUInt16BE(0), 256);
    assert.equal(made.encryptedSecret.length, 258);
  });

  it('round trip: with the seed, the credential opens for that AK Name only, and not once modified', () => {
    const made = makeCredential({ ekPublic: ek, akName, credential, seed });
    assert.deepEqual(openCredentialWithSeed({ ekPublic: ek, akName, idObject: made.idObject, seed }), {
      ok: true,
      credential,
    });
    const otherName = fixture('signer.name');
    assert.equal(
      openCredentialWithSeed({ ekPublic: ek, akName: otherName, idObject: made.idObject, seed }).ok,
      false,
    );
    assert.equal(
      openCredentialWithSeed({ ekPublic: ek, akName, idObject: made.idObject, seed: Buffer.alloc(32, 1) }).ok,
      false,
    );
    const modified = Buffer.from(made.idObject);
    modified[modified.length - 1]! ^= 0x01;
    assert.match(
      JSON.stringify(openCredentialWithSeed({ ekPublic: ek, akName, idObject: modified, seed })),
      /integrity check failed/,
    );
  });

  it('a short credential round-trips too; the encrypted identity is the credential as a TPM2B_DIGEST', () => {
    const short = Buffer.from('hi');
    const made = makeCredential({ ekPublic: ek, akName, credential: short, seed });
    assert.equal(made.idObject.readUInt16BE(0), 2 + 32 + 2 + 2);
    const opened = openCredentialWithSeed({ ekPublic: ek, akName, idObject: made.idObject, seed });
    assert.deepEqual(opened, { ok: true, credential: short });
  });

  it('same seed, same idObject; a random seed each call otherwise', () => {
    const a = makeCredential({ ekPublic: ek, akName, credential, seed });
    const b = makeCredential({ ekPublic: ek, akName, credential, seed });
    assert.deepEqual(a.idObject, b.idObject);
    assert.notDeepEqual(a.encryptedSecret, b.encryptedSecret); // OAEP is randomised
    const c = makeCredential({ ekPublic: ek, akName, credential });
    assert.notDeepEqual(c.idObject, a.idObject);
  });

  it('encrypts the seed to the EK with RSA-OAEP, SHA-256 and the label "IDENTITY\\0"', () => {
    // An RSA-2048 key the test holds stands for an EK given as a bare public key (standard template).
    const { publicKey, privateKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
    const made = makeCredential({ ekPublic: publicKey, akName, credential, seed });
    const decrypt = (label: string) =>
      privateDecrypt(
        {
          key: privateKey,
          padding: constants.RSA_PKCS1_OAEP_PADDING,
          oaepHash: 'sha256',
          oaepLabel: Buffer.from(label),
        },
        made.encryptedSecret.subarray(2),
      );
    assert.deepEqual(decrypt('IDENTITY\0'), seed);
    assert.throws(() => decrypt('IDENTITY'));
    const recovered = decrypt('IDENTITY\0');
    const opened = openCredentialWithSeed({
      ekPublic: publicKey,
      akName,
      idObject: made.idObject,
      seed: recovered,
    });
    assert.deepEqual(opened, { ok: true, credential });
  });

  it('refuses what no TPM would activate, saying why', () => {
    assert.throws(
      () => makeCredential({ ekPublic: ek, akName, credential: Buffer.alloc(33) }),
      /1 to 32 bytes, not 33/,
    );
    assert.throws(() => makeCredential({ ekPublic: ek, akName, credential: Buffer.alloc(0) }), /not 0/);
    assert.throws(
      () => makeCredential({ ekPublic: ek, akName, credential, seed: Buffer.alloc(16) }),
      /seed .* 32 bytes, not 16/,
    );
    assert.throws(
      () => makeCredential({ ekPublic: ek, akName: akName.subarray(0, 20), credential }),
      /AK Name/,
    );
    const eccEk = parseTpm2bPublic(fixture('ak-ecc.pub'));
    assert.throws(
      () => makeCredential({ ekPublic: eccEk, akName, credential }),
      /ECC EK are not supported: only RSA/,
    );
    const signingKey = parseTpm2bPublic(fixture('ak.pub'));
    assert.throws(() => makeCredential({ ekPublic: signingKey, akName, credential }), /not a decryption key/);
    const { publicKey } = generateKeyPairSync('rsa', { modulusLength: 3072 });
    assert.throws(
      () => makeCredential({ ekPublic: publicKey, akName, credential }),
      /rsa-3072 key without its TPMT_PUBLIC/,
    );
  });
});

describe('the cred.blob file tpm2_activatecredential reads', () => {
  const reference = fixture('cred.blob'); // tpm2_makecredential -T none -u ek.pub -n <ak.name>

  it('has the layout of the file tpm2_makecredential -T none wrote: magic, version, the two TPM2Bs', () => {
    const ours = credentialBlobFile(
      makeCredential({ ekPublic: ek, akName, credential: fixture('cred.secret') }),
    );
    assert.equal(reference.subarray(0, 8).toString('hex'), 'badcc0de00000001');
    assert.deepEqual(ours.subarray(0, 8), reference.subarray(0, 8));
    assert.equal(ours.length, reference.length);
    assert.equal(ours.length, 336);
    for (const [file, label] of [
      [reference, 'reference'],
      [ours, 'ours'],
    ] as const) {
      assert.equal(file.readUInt16BE(8), 68, `${label}: TPM2B_ID_OBJECT size`);
      assert.equal(file.readUInt16BE(10), 32, `${label}: its integrity HMAC size`);
      assert.equal(file.readUInt16BE(8 + 2 + 68), 256, `${label}: TPM2B_ENCRYPTED_SECRET size`);
    }
  });

  it('parses back to the same TPM2Bs, and the reference file re-serialises byte for byte', () => {
    const made = makeCredential({ ekPublic: ek, akName, credential, seed });
    assert.deepEqual(parseCredentialBlobFile(credentialBlobFile(made)), made);
    assert.deepEqual(credentialBlobFile(parseCredentialBlobFile(reference)), reference);
  });

  it('refuses a file with another magic, another version or trailing bytes', () => {
    const wrongMagic = Buffer.from(reference);
    wrongMagic[0] = 0;
    assert.throws(() => parseCredentialBlobFile(wrongMagic), /magic 0xdcc0de, not 0xbadcc0de/);
    const wrongVersion = Buffer.from(reference);
    wrongVersion[7] = 2;
    assert.throws(() => parseCredentialBlobFile(wrongVersion), /version 2, not 1/);
    assert.throws(
      () => parseCredentialBlobFile(Buffer.concat([reference, Buffer.of(0)])),
      /unexpected bytes/,
    );
  });
});
