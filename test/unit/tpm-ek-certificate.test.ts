// verifyEkCertificate on EK certificates swtpm_localca issued (test/unit/fixtures/tpm): two
// "manufacturers" (CA directories), each a root and an intermediate, both called the same
// ("CN=swtpm-localca-rootca" / "CN=swtpm-localca") as every swtpm_localca CA is.
import assert from 'node:assert/strict';
import { X509Certificate } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { verifyEkCertificate } from '../../src/flavor/tpm/ek-certificate.ts';
import { ekSpkiDer } from '../../src/flavor/tpm/ek-identity.ts';

const fixture = (name: string) => readFileSync(join(import.meta.dirname, 'fixtures', 'tpm', name));
const pem = (name: string) => fixture(name).toString('utf8');

const ekCert = fixture('ek-cert.der');
const manufacturerA = [pem('manufacturer-a-root.pem'), pem('manufacturer-a-intermediate.pem')];
const manufacturerB = [pem('manufacturer-b-root.pem'), pem('manufacturer-b-intermediate.pem')];
/** A day into the certificates' validity: the fixtures were made on some day, the test runs on any. */
const now = new Date(new X509Certificate(ekCert).validFromDate.getTime() + 86_400_000);

describe('verifyEkCertificate', () => {
  it('the fixture is a real EK certificate: a critical subjectAltName (directoryName) extension', () => {
    // OID 2.5.29.17 followed by critical = TRUE: what Go's x509 leaves unhandled.
    assert.ok(ekCert.includes(Buffer.from('0603551d110101ff', 'hex')));
    assert.match(new X509Certificate(ekCert).subjectAltName ?? '', /^DirName:/);
  });

  it("accepts an EK certificate its manufacturer's CAs issued, and returns the EK's SPKI", () => {
    const verdict = verifyEkCertificate(ekCert, manufacturerA, now);
    assert.deepEqual(verdict, {
      ok: true,
      ekSpkiDer: ekSpkiDer({ tpm2bPublic: fixture('ek.pub') }),
      issuer: 'CN=swtpm-localca',
    });
  });

  it('takes PEM as well as DER, and configured entries holding several certificates', () => {
    const ekPem = new X509Certificate(ekCert).toString();
    const bundle = [manufacturerB.join('\n'), manufacturerA.join('\n')];
    assert.equal(verifyEkCertificate(ekPem, bundle, now).ok, true);
    assert.equal(verifyEkCertificate(fixture('tpm-b-ek-cert.der'), bundle, now).ok, true);
  });

  it('an intermediate alone is a trust anchor; a root alone is not enough (the intermediate is not sent)', () => {
    assert.equal(verifyEkCertificate(ekCert, [pem('manufacturer-a-intermediate.pem')], now).ok, true);
    const rootOnly = verifyEkCertificate(ekCert, [pem('manufacturer-a-root.pem')], now);
    assert.equal(rootOnly.ok, false);
    assert.match(rootOnly.ok ? '' : rootOnly.reason, /^issuer not among the configured TPM manufacturer CAs/);
  });

  it("refuses another manufacturer's EK certificate, though its issuer has the same name", () => {
    for (const [cert, cas] of [
      [ekCert, manufacturerB],
      [fixture('tpm-b-ek-cert.der'), manufacturerA],
    ] as const) {
      const verdict = verifyEkCertificate(cert, cas, now);
      assert.equal(verdict.ok, false);
      assert.match(verdict.ok ? '' : verdict.reason, /^issuer not among the configured TPM manufacturer CAs/);
    }
  });

  it('refuses a tampered certificate: another key put in it, or its signature changed', () => {
    const spki = ekSpkiDer({ certificate: ekCert });
    const keyAt = ekCert.indexOf(spki);
    assert.ok(keyAt > 0);
    const otherKey = Buffer.from(ekCert);
    otherKey[keyAt + spki.length - 10]! ^= 0x01; // a bit of the modulus
    const otherSignature = Buffer.from(ekCert);
    otherSignature[otherSignature.length - 1]! ^= 0x01;
    for (const tampered of [otherKey, otherSignature]) {
      const verdict = verifyEkCertificate(tampered, manufacturerA, now);
      assert.equal(verdict.ok, false);
      assert.match(verdict.ok ? '' : verdict.reason, /^signature invalid/);
    }
  });

  it('refuses outside the validity period', () => {
    const cert = new X509Certificate(ekCert);
    const after = verifyEkCertificate(ekCert, manufacturerA, new Date(cert.validToDate.getTime() + 1000));
    assert.match(after.ok ? '' : after.reason, /^expired: the EK certificate was valid until 9999-12-31/);
    const before = verifyEkCertificate(ekCert, manufacturerA, new Date(cert.validFromDate.getTime() - 1000));
    assert.match(before.ok ? '' : before.reason, /^not yet valid: the EK certificate/);
  });

  it('refuses bytes that are no certificate; throws on a configured entry that is none', () => {
    const verdict = verifyEkCertificate(Buffer.from('not a certificate'), manufacturerA, now);
    assert.match(verdict.ok ? '' : verdict.reason, /^not a usable EK certificate/);
    assert.throws(
      () => verifyEkCertificate(ekCert, ['nothing here'], now),
      /certificate 0: no PEM certificate/,
    );
  });
});
