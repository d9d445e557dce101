// verifyEkCertificate on EK certificates swtpm_localca issued (test/unit/fixtures/tpm): two
// "manufacturers" (CA directories), each a root and an intermediate, both called the same
// ("CN=swtpm-localca-rootca" / "CN=swtpm-localca") as every swtpm_localca CA is; and on chains made
// the way TPM vendors issue them (test/support/ek-chain.ts): root → intermediate(s) → EK
// certificate, with CRLs.
import assert from 'node:assert/strict';
import { X509Certificate } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { before, describe, it } from 'node:test';
import { type EkTrust, parseEkTrust, verifyEkCertificate } from '../../src/flavor/tpm/ek-certificate.ts';
import { ekSpkiDer } from '../../src/flavor/tpm/ek-identity.ts';
import {
  type ChainCa,
  makeCa,
  makeCrl,
  makeEkCertificate,
  pemOf,
  subjectAltNameOf,
} from '../support/ek-chain.ts';

const fixture = (name: string) => readFileSync(join(import.meta.dirname, 'fixtures', 'tpm', name));
const pem = (name: string) => fixture(name).toString('utf8');

const ekCert = fixture('ek-cert.der');
const EK_SPKI = ekSpkiDer({ tpm2bPublic: fixture('ek.pub') });
const trustOf = (certificatesPem: string, crls?: string) =>
  parseEkTrust({ certificatesPem, ...(crls ? { crls: Buffer.from(crls) } : {}) });
const reasonOf = (verdict: Awaited<ReturnType<typeof verifyEkCertificate>>) =>
  verdict.ok ? '' : verdict.reason;
/** A day into the certificates' validity: the fixtures were made on some day, the test runs on any. */
const now = new Date(new X509Certificate(ekCert).validFromDate.getTime() + 86_400_000);

describe('verifyEkCertificate: swtpm_localca certificates', () => {
  let manufacturerA: EkTrust;
  let manufacturerB: EkTrust;
  before(async () => {
    manufacturerA = await trustOf(pem('manufacturer-a-root.pem') + pem('manufacturer-a-intermediate.pem'));
    manufacturerB = await trustOf(pem('manufacturer-b-root.pem') + pem('manufacturer-b-intermediate.pem'));
  });

  it('the fixture is a real EK certificate: a critical subjectAltName (directoryName) extension', () => {
    // OID 2.5.29.17 followed by critical = TRUE: what Go's x509 leaves unhandled.
    assert.ok(ekCert.includes(Buffer.from('0603551d110101ff', 'hex')));
    assert.match(new X509Certificate(ekCert).subjectAltName ?? '', /^DirName:/);
  });

  it("accepts an EK certificate its manufacturer's root issued through an intermediate, and returns the EK's SPKI", async () => {
    const verdict = await verifyEkCertificate(ekCert, manufacturerA, now);
    assert.equal(verdict.ok, true, reasonOf(verdict));
    assert.ok(verdict.ok);
    assert.deepEqual(verdict.ekSpkiDer, EK_SPKI);
    assert.equal(verdict.issuer, 'CN=swtpm-localca');
    assert.match(verdict.presented, /^-----BEGIN CERTIFICATE-----/);
  });

  it('takes PEM as well as DER', async () => {
    const ekPem = new X509Certificate(ekCert).toString();
    const both = await trustOf(
      [
        pem('manufacturer-b-root.pem'),
        pem('manufacturer-b-intermediate.pem'),
        pem('manufacturer-a-root.pem'),
        pem('manufacturer-a-intermediate.pem'),
      ].join('\n'),
    );
    assert.equal((await verifyEkCertificate(ekPem, both, now)).ok, true);
    assert.equal((await verifyEkCertificate(fixture('tpm-b-ek-cert.der'), both, now)).ok, true);
  });

  it('an intermediate is no trust anchor: configured alone, nothing verifies (the file is refused)', async () => {
    await assert.rejects(
      trustOf(pem('manufacturer-a-intermediate.pem')),
      /holds no root \(self-signed\) certificate/,
    );
  });

  it('the root alone is enough when the intermediate is presented beside the EK certificate', async () => {
    const rootOnly = await trustOf(pem('manufacturer-a-root.pem'));
    const bare = await verifyEkCertificate(ekCert, rootOnly, now);
    assert.match(reasonOf(bare), /^issuer not among the configured TPM manufacturer CAs/);
    const presented = `${new X509Certificate(ekCert).toString()}${pem('manufacturer-a-intermediate.pem')}`;
    const verdict = await verifyEkCertificate(presented, rootOnly, now);
    assert.equal(verdict.ok, true, reasonOf(verdict));
    assert.ok(verdict.ok && verdict.presented.match(/BEGIN CERTIFICATE/g)?.length === 2, 'both are kept');
  });

  it("refuses another manufacturer's EK certificate, though its CAs have the same names", async () => {
    assert.match(reasonOf(await verifyEkCertificate(ekCert, manufacturerB, now)), /^signature invalid/);
    const bWithA = await verifyEkCertificate(fixture('tpm-b-ek-cert.der'), manufacturerA, now);
    assert.match(reasonOf(bWithA), /^signature invalid/);
    // B's intermediate presented beside A's trust: its path ends at B's root, which is not configured.
    const presented = `${new X509Certificate(fixture('tpm-b-ek-cert.der')).toString()}${pem('manufacturer-b-intermediate.pem')}${pem('manufacturer-b-root.pem')}`;
    assert.match(
      reasonOf(await verifyEkCertificate(presented, manufacturerA, now)),
      /^issuer not among the configured TPM manufacturer CAs: its path ends at "CN=swtpm-localca-rootca", which is not a configured root/,
    );
  });

  it('refuses a tampered certificate: another key put in it, or its signature changed', async () => {
    const keyAt = ekCert.indexOf(EK_SPKI);
    assert.ok(keyAt > 0);
    const otherKey = Buffer.from(ekCert);
    otherKey[keyAt + EK_SPKI.length - 10]! ^= 0x01; // a bit of the modulus
    const otherSignature = Buffer.from(ekCert);
    otherSignature[otherSignature.length - 1]! ^= 0x01;
    for (const tampered of [otherKey, otherSignature])
      assert.match(reasonOf(await verifyEkCertificate(tampered, manufacturerA, now)), /^signature invalid/);
  });

  it('refuses outside the validity period', async () => {
    const cert = new X509Certificate(ekCert);
    const after = await verifyEkCertificate(
      ekCert,
      manufacturerA,
      new Date(cert.validToDate.getTime() + 1000),
    );
    assert.match(reasonOf(after), /^expired: the EK certificate was valid until 9999-12-31/);
    const before = await verifyEkCertificate(
      ekCert,
      manufacturerA,
      new Date(cert.validFromDate.getTime() - 1000),
    );
    assert.match(reasonOf(before), /^not yet valid: the EK certificate/);
  });

  it('refuses bytes that are no certificate; throws on a configured file that holds none', async () => {
    const verdict = await verifyEkCertificate(Buffer.from('not a certificate'), manufacturerA, now);
    assert.match(reasonOf(verdict), /^not a usable EK certificate/);
    await assert.rejects(trustOf('nothing here'), /no PEM certificate/);
  });
});

describe('verifyEkCertificate: a chain as a TPM vendor issues it', () => {
  const at = new Date('2030-06-01T00:00:00Z');
  let root: ChainCa;
  let intermediate: ChainCa;
  let ek: Awaited<ReturnType<typeof makeEkCertificate>>;
  let san: ArrayBuffer;
  before(async () => {
    san = subjectAltNameOf(ekCert);
    root = await makeCa('Example TPM Root CA');
    intermediate = await makeCa('Example TPM EK CA 01', { issuer: root, pathLength: 0 });
    ek = await makeEkCertificate(intermediate, EK_SPKI, { subjectAltName: san });
  });

  it('root → intermediate → EK certificate: the root configured, the intermediate configured or presented', async () => {
    for (const [trust, presented] of [
      [await trustOf(pemOf(root.cert, intermediate.cert)), pemOf(ek)],
      [await trustOf(pemOf(root.cert)), pemOf(ek, intermediate.cert)],
    ] as const) {
      const verdict = await verifyEkCertificate(presented, trust, at);
      assert.equal(verdict.ok, true, reasonOf(verdict));
      assert.ok(verdict.ok);
      assert.deepEqual(verdict.ekSpkiDer, EK_SPKI);
      assert.equal(verdict.issuer, intermediate.cert.subject);
    }
  });

  it('three CAs deep (root → policy CA → issuing CA → EK), within each path length', async () => {
    const policy = await makeCa('Example TPM Policy CA', { issuer: root, pathLength: 1 });
    const issuing = await makeCa('Example TPM Issuing CA', { issuer: policy, pathLength: 0 });
    const deep = await makeEkCertificate(issuing, EK_SPKI, { subjectAltName: san });
    const verdict = await verifyEkCertificate(
      pemOf(deep, issuing.cert, policy.cert),
      await trustOf(pemOf(root.cert)),
      at,
    );
    assert.equal(verdict.ok, true, reasonOf(verdict));
  });

  it('refuses a path longer than an intermediate allows (pathLenConstraint)', async () => {
    const issuing = await makeCa('Example TPM Sub CA', { issuer: intermediate });
    const deep = await makeEkCertificate(issuing, EK_SPKI, { subjectAltName: san });
    const verdict = await verifyEkCertificate(
      pemOf(deep, issuing.cert, intermediate.cert),
      await trustOf(pemOf(root.cert)),
      at,
    );
    assert.match(
      reasonOf(verdict),
      /CA "CN=Example TPM EK CA 01, O=Example TPM Vendor" allows 0 intermediate CA\(s\) below it, the path has 1/,
    );
  });

  it('refuses an issuer that is no CA (basicConstraints) or may not sign certificates (keyUsage)', async () => {
    const trust = await trustOf(pemOf(root.cert));
    const notCa = await makeCa('Not A CA', { issuer: root, ca: false });
    const noCertSign = await makeCa('Only CRLs', { issuer: root, keyUsage: 0x02 /* cRLSign */ });
    const noKeyUsage = await makeCa('No Key Usage', { issuer: root, keyUsage: null });
    for (const [issuer, reason] of [
      [notCa, /is not a CA \(its basicConstraints does not say cA\)/],
      [noCertSign, /may not sign certificates \(its keyUsage lacks keyCertSign\)/],
      [noKeyUsage, /may not sign certificates \(its keyUsage lacks keyCertSign\)/],
    ] as const) {
      const leaf = await makeEkCertificate(issuer, EK_SPKI, { subjectAltName: san });
      assert.match(reasonOf(await verifyEkCertificate(pemOf(leaf, issuer.cert), trust, at)), reason);
    }
  });

  it('refuses a revoked intermediate (the root’s CRL), and a revoked EK certificate (the intermediate’s CRL)', async () => {
    const chain = pemOf(root.cert, intermediate.cert);
    const revokesIntermediate = await makeCrl(root, [intermediate.cert]);
    const revokesEk = await makeCrl(intermediate, [ek]);
    const clean = await makeCrl(root, []);
    assert.equal((await verifyEkCertificate(pemOf(ek), await trustOf(chain, pemOf(clean)), at)).ok, true);
    assert.match(
      reasonOf(await verifyEkCertificate(pemOf(ek), await trustOf(chain, pemOf(revokesIntermediate)), at)),
      /^revoked: CA "CN=Example TPM EK CA 01, O=Example TPM Vendor" \(serial [0-9a-f]+\) was revoked by "CN=Example TPM Root CA, O=Example TPM Vendor" on 2024-01-01/,
    );
    // Presented by the caller rather than configured: revoked all the same.
    assert.match(
      reasonOf(
        await verifyEkCertificate(
          pemOf(ek, intermediate.cert),
          await trustOf(pemOf(root.cert), pemOf(revokesIntermediate)),
          at,
        ),
      ),
      /^revoked: CA "CN=Example TPM EK CA 01/,
    );
    assert.match(
      reasonOf(await verifyEkCertificate(pemOf(ek), await trustOf(chain, pemOf(revokesEk)), at)),
      /^revoked: the EK certificate/,
    );
  });

  it('the newest CRL of an issuer counts; an out-of-date one refuses; one the issuer did not sign is not its', async () => {
    const chain = pemOf(root.cert, intermediate.cert);
    const older = await makeCrl(root, [intermediate.cert], { thisUpdate: new Date('2024-01-01T00:00:00Z') });
    const newer = await makeCrl(root, [], { thisUpdate: new Date('2025-01-01T00:00:00Z') });
    assert.equal(
      (await verifyEkCertificate(pemOf(ek), await trustOf(chain, pemOf(older, newer)), at)).ok,
      true,
    );
    const stale = await makeCrl(root, [], { nextUpdate: new Date('2030-01-01T00:00:00Z') });
    assert.match(
      reasonOf(await verifyEkCertificate(pemOf(ek), await trustOf(chain, pemOf(stale)), at)),
      /^the CRL of "CN=Example TPM Root CA, O=Example TPM Vendor" is out of date \(its next update was due 2030-01-01T00:00:00.000Z\)/,
    );
    const forged = await makeCrl(root, [intermediate.cert], { signer: intermediate });
    assert.equal((await verifyEkCertificate(pemOf(ek), await trustOf(chain, pemOf(forged)), at)).ok, true);
  });

  it('a CRL file in DER, and one that is none (refused as configuration)', async () => {
    const revokes = await makeCrl(root, [intermediate.cert]);
    const trust = await parseEkTrust({
      certificatesPem: pemOf(root.cert, intermediate.cert),
      crls: Buffer.from(revokes.rawData),
    });
    assert.match(reasonOf(await verifyEkCertificate(pemOf(ek), trust, at)), /^revoked: CA/);
    await assert.rejects(trustOf(pemOf(root.cert), 'garbage'), /TPM manufacturer CRL 0: /);
    await assert.rejects(trustOf(pemOf(root.cert), '-----BEGIN NOTHING-----'), /no CRL/);
  });

  it('a validity period is checked on every certificate of the path', async () => {
    const lapsed = await makeCa('Lapsed EK CA', { issuer: root, notAfter: new Date('2029-01-01T00:00:00Z') });
    const leaf = await makeEkCertificate(lapsed, EK_SPKI, { subjectAltName: san });
    assert.match(
      reasonOf(await verifyEkCertificate(pemOf(leaf, lapsed.cert), await trustOf(pemOf(root.cert)), at)),
      /^expired: its manufacturer CA "CN=Lapsed EK CA, O=Example TPM Vendor" was valid until 2029-01-01/,
    );
  });

  it('an EK certificate that is itself a CA is refused', async () => {
    const trust = await trustOf(pemOf(root.cert));
    assert.match(
      reasonOf(await verifyEkCertificate(pemOf(intermediate.cert), trust, at)),
      /is a CA certificate/,
    );
  });
});
