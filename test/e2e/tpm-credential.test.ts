// TPM2 credential activation end to end with live software TPMs (swtpm; no cluster): the
// credential src/flavor/tpm's makeCredential makes for an EK and an AK Name is recovered by
// `tpm2_activatecredential` on the TPM holding that EK with that AK loaded, and by nothing else —
// not another TPM of the same manufacturer, not another AK of the same TPM. Two TPMs from one
// swtpm_localca CA, each manufactured afresh in a temp dir removed afterwards.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { attestationKeyProblems } from '../../src/flavor/tpm/attestation-key.ts';
import { credentialBlobFile } from '../../src/flavor/tpm/credential-blob-file.ts';
import { parseEkTrust, verifyEkCertificate } from '../../src/flavor/tpm/ek-certificate.ts';
import { ekSpkiDer } from '../../src/flavor/tpm/ek-identity.ts';
import { makeCredential } from '../../src/flavor/tpm/make-credential.ts';
import { parseTpm2bPublic } from '../../src/flavor/tpm/tpm-public.ts';
import { skipUnless } from '../support/skip.ts';
import {
  activateCredential,
  createEkAndAk,
  type EkAndAk,
  type ManufacturedTpm,
  manufactureTpm,
  type RunningTpm,
  startTpm,
  swtpmMissing,
  Tpm2CommandError,
} from './support/swtpm.ts';
import { tempDirForThisProcess } from './support/temp-dir.ts';

const skip = skipUnless('the TPM credential test (test/e2e/tpm-credential.test.ts)', swtpmMissing());

describe('TPM2 credential activation on swtpm (no cluster)', { skip }, () => {
  let dir: string;
  const running: RunningTpm[] = [];
  let manufacturer: ManufacturedTpm;
  let tpmA: RunningTpm;
  let tpmB: RunningTpm;
  /** TPM A's EK with an AK, the same EK with a second AK, and TPM B's EK with its AK. */
  let a: EkAndAk;
  let a2: EkAndAk;
  let b: EkAndAk;

  before(async () => {
    dir = tempDirForThisProcess('nodeflavor-swtpm-');
    const caDir = join(dir, 'manufacturer');
    manufacturer = await manufactureTpm({ caDir, stateDir: join(dir, 'tpm-a') });
    await manufactureTpm({ caDir, stateDir: join(dir, 'tpm-b') });
    tpmA = await startTpm(join(dir, 'tpm-a'));
    running.push(tpmA);
    tpmB = await startTpm(join(dir, 'tpm-b'));
    running.push(tpmB);
    a = await createEkAndAk(tpmA.tcti, join(dir, 'a'));
    a2 = await createEkAndAk(tpmA.tcti, join(dir, 'a2'));
    b = await createEkAndAk(tpmB.tcti, join(dir, 'b'));
  });

  after(async () => {
    await Promise.all(running.map((tpm) => tpm.stop()));
    if (dir) rmSync(dir, { recursive: true, force: true, maxRetries: 3 });
  });

  /** A fresh 32-byte credential as makeCredential's blob for `ek` and `akName`, in cred.blob's format. */
  function credentialFor(ek: EkAndAk, akName: Buffer) {
    const credential = randomBytes(32);
    const blob = credentialBlobFile(
      makeCredential({ ekPublic: parseTpm2bPublic(ek.ekPub.bytes), akName, credential }),
    );
    return { credential, blob };
  }

  it('the harness made what the protocol starts from: a sound AK, its Name, an EK certificate for that EK', async () => {
    const ak = parseTpm2bPublic(a.akPub.bytes);
    assert.deepEqual(attestationKeyProblems(ak), []);
    assert.deepEqual(ak.name, a.akName.bytes);
    // The manufacturer's root → intermediate → EK certificate, as a vendor issues them.
    const trust = await parseEkTrust({ certificatesPem: manufacturer.manufacturerCertsPem.join('\n') });
    assert.equal(trust.roots.length, 1);
    assert.equal(trust.intermediates.length, 1);
    const verdict = await verifyEkCertificate(a.ekCert.bytes, trust, new Date());
    assert.equal(verdict.ok, true, verdict.ok ? '' : verdict.reason);
    assert.deepEqual(verdict.ok && verdict.ekSpkiDer, ekSpkiDer({ tpm2bPublic: a.ekPub.bytes }));
    // Two TPMs of one manufacturer: one CA, two EKs.
    assert.equal((await verifyEkCertificate(b.ekCert.bytes, trust, new Date())).ok, true);
    assert.notDeepEqual(ekSpkiDer({ tpm2bPublic: a.ekPub.bytes }), ekSpkiDer({ tpm2bPublic: b.ekPub.bytes }));
    // createEkAndAk again on TPM A: the same EK (a primary key from the endorsement seed), a new AK.
    assert.deepEqual(a2.ekPub.bytes, a.ekPub.bytes);
    assert.notDeepEqual(a2.akName.bytes, a.akName.bytes);
  });

  it("TPM A recovers the credential from makeCredential's blob for its EK and its AK", async () => {
    const { credential, blob } = credentialFor(a, a.akName.bytes);
    assert.deepEqual(await activateCredential(tpmA.tcti, join(dir, 'a'), blob), credential);
  });

  /** The TPM itself refused the activation (not the tool, a file or the connection). */
  const refusedByTpm = (code: RegExp) => (error: unknown) => {
    assert.ok(error instanceof Tpm2CommandError, String(error));
    assert.match(error.stderr, /Esys_ActivateCredential\(0x[0-9A-Fa-f]+\)/);
    assert.match(error.stderr, code);
    return true;
  };

  it("another TPM of the same manufacturer recovers nothing: the seed is encrypted to TPM A's EK", async () => {
    // swtpm (libtpms) answers a seed it cannot OAEP-decrypt with TPM_RC_FAILURE (0x101), and
    // goes on working: the control below runs on the same TPM afterwards.
    const { blob } = credentialFor(a, a.akName.bytes);
    await assert.rejects(activateCredential(tpmB.tcti, join(dir, 'b'), blob), refusedByTpm(/tpm:/));
    // Nor when the blob names TPM B's own AK (someone with TPM B claiming TPM A's EK certificate).
    const forBsAk = credentialFor(a, b.akName.bytes);
    await assert.rejects(activateCredential(tpmB.tcti, join(dir, 'b'), forBsAk.blob), refusedByTpm(/tpm:/));
    // The control: a blob for TPM B's EK and AK works there, so the refusals above are about the EK.
    const forB = credentialFor(b, b.akName.bytes);
    assert.deepEqual(await activateCredential(tpmB.tcti, join(dir, 'b'), forB.blob), forB.credential);
  });

  it("a blob made for another AK's Name fails with this AK (TPM_RC_INTEGRITY), and opens with that one", async () => {
    const { credential, blob } = credentialFor(a, a2.akName.bytes);
    await assert.rejects(
      activateCredential(tpmA.tcti, join(dir, 'a'), blob),
      refusedByTpm(/\(0x1DF\).*integrity check failed/),
    );
    assert.deepEqual(await activateCredential(tpmA.tcti, join(dir, 'a2'), blob), credential);
  });

  it("tpm2_makecredential -T none's blob and ours activate alike (the reference implementation agrees)", async () => {
    const secret = join(dir, 'reference-secret');
    const credential = randomBytes(32);
    const reference = join(dir, 'reference.blob');
    writeFileSync(secret, credential);
    execFileSync('tpm2', [
      'makecredential',
      '-Q',
      '-T',
      'none',
      '-u',
      a.ekPub.path,
      '-s',
      secret,
      '-n',
      a.akName.bytes.toString('hex'),
      '-o',
      reference,
    ]);
    const recovered = await activateCredential(tpmA.tcti, join(dir, 'a'), readFileSync(reference));
    assert.deepEqual(recovered, credential);
    const ours = credentialFor(a, a.akName.bytes).blob;
    assert.equal(ours.length, readFileSync(reference).length);
  });
});
