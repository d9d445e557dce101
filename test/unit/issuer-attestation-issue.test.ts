// Issuing a token bound to a TPM (src/tokenissuer/attestation/attestation-binding.ts, request.ts; ADR 0014):
// what `attestation` may hold, checked once at issuance so a token is never bound to something no
// TPM could use, and nothing is written when it is refused. EK certificates are swtpm_localca's
// (test/unit/fixtures/tpm): two "manufacturers" whose CAs have the same names.
import assert from 'node:assert/strict';
import { createPublicKey, generateKeyPairSync, X509Certificate } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import {
  ATTESTATION_SEAL_ANNOTATION,
  attestationSealHolds,
  sealedFactsOf,
} from '../../src/flavor/attestation-seal.ts';
import { ekSpkiDer } from '../../src/flavor/tpm/ek-identity.ts';
import { IssuanceSettingsSchema } from '../../src/tokenissuer/config.ts';
import type { IssuerError } from '../../src/tokenissuer/errors.ts';
import { issueIdempotently } from '../../src/tokenissuer/issuance/idempotent-issue.ts';
import { type IssuanceDeps, issueToken, tokenStatusView } from '../../src/tokenissuer/issuance/issue.ts';
import { issueResponse } from '../../src/tokenissuer/response.ts';
import {
  clusterInfoKubeconfig,
  FakeTokenKube,
  fakeKeyRing,
  issuerErrorFrom,
} from './support/issuer-fakes.ts';
import { seededRandomBytes } from './support/random.ts';

const fixture = (name: string) => readFileSync(join(import.meta.dirname, 'fixtures', 'tpm', name));
const certPem = (name: string) => new X509Certificate(fixture(name)).toString();
const EK_CERT_A = certPem('ek-cert.der');
const EK_CERT_B = certPem('tpm-b-ek-cert.der');
const EK_PEM = createPublicKey({
  key: ekSpkiDer({ tpm2bPublic: fixture('ek.pub') }),
  format: 'der',
  type: 'spki',
})
  .export({ type: 'spki', format: 'pem' })
  .toString();
/** The fixtures' certificates are valid from the day they were made; 2030 is well inside. */
const NOW = new Date('2030-01-01T00:00:00Z');
const URL = 'https://issuer.example.com';

let dir = '';
let manufacturerA = '';
before(() => {
  dir = mkdtempSync(join(tmpdir(), 'nodeflavor-attestation-'));
  manufacturerA = join(dir, 'manufacturer-a.pem');
  writeFileSync(
    manufacturerA,
    `${fixture('manufacturer-a-root.pem').toString()}\n${fixture('manufacturer-a-intermediate.pem').toString()}`,
  );
});
after(() => rmSync(dir, { recursive: true, force: true }));

async function setup(attestation: Record<string, unknown> = { url: URL }) {
  const kube = new FakeTokenKube(await clusterInfoKubeconfig());
  kube.addFlavor('sweet');
  kube.addFlavor('sour');
  const ring = fakeKeyRing();
  const deps: IssuanceDeps = {
    kube,
    keyRing: () => ring.get(),
    settings: IssuanceSettingsSchema.parse({ attestation }),
    now: () => NOW,
    randomBytes: seededRandomBytes('attested-issue'),
  };
  return { kube, deps };
}

async function refused(
  promise: Promise<unknown>,
  status: number,
  message: RegExp,
  field?: string,
): Promise<IssuerError> {
  const caught = await issuerErrorFrom(promise, status, message);
  if (field !== undefined)
    assert.ok(
      caught.fields?.some((f) => f.field === field),
      `${field} in ${JSON.stringify(caught.fields)}`,
    );
  return caught;
}

const pemOf = (key: { export(options: { type: 'spki'; format: 'pem' }): string | Buffer }) =>
  key.export({ type: 'spki', format: 'pem' }).toString();

describe('issuing a token bound to a TPM', () => {
  it('refuses both an EK public key and an EK certificate, and neither (400, nothing written)', async () => {
    const { kube, deps } = await setup({ url: URL, manufacturerCaFile: manufacturerA });
    await refused(
      issueToken(deps, {
        flavorClassName: 'sweet',
        attestation: { ekPublicKey: EK_PEM, ekCertificate: EK_CERT_A },
      }),
      400,
      /set exactly one of ekPublicKey and ekCertificate/,
      'attestation.ekPublicKey',
    );
    await refused(
      issueToken(deps, { flavorClassName: 'sweet', attestation: {} }),
      400,
      /set exactly one of ekPublicKey and ekCertificate/,
    );
    assert.equal(kube.tokens.size + kube.secrets.size, 0);
  });

  it('refuses an EK certificate from a manufacturer that is not configured, naming its issuer', async () => {
    const { kube, deps } = await setup({ url: URL, manufacturerCaFile: manufacturerA });
    const error = await refused(
      issueToken(deps, { flavorClassName: 'sweet', attestation: { ekCertificate: EK_CERT_B } }),
      400,
      // Its CAs have the names of the configured ones (every swtpm_localca CA does): the signature tells.
      /signature invalid: no configured "CN=swtpm-localca" signed this EK certificate/,
      'attestation.ekCertificate',
    );
    assert.match(error.message, /^invalid request: attestation\.ekCertificate is refused: /);
    assert.equal(kube.tokens.size + kube.secrets.size, 0);
  });

  it('refuses an EK certificate when no manufacturer CAs are configured, saying so', async () => {
    const { kube, deps } = await setup({ url: URL });
    await refused(
      issueToken(deps, { flavorClassName: 'sweet', attestation: { ekCertificate: EK_CERT_A } }),
      400,
      /no TPM manufacturer CAs are configured \(--tpm-manufacturer-ca-file\)/,
      'attestation.ekCertificate',
    );
    assert.equal(kube.tokens.size, 0);
  });

  it('an unreadable manufacturer CA file is the issuer’s fault (500), naming the file', async () => {
    const missing = join(dir, 'missing.pem');
    const { kube, deps } = await setup({ url: URL, manufacturerCaFile: missing });
    await refused(
      issueToken(deps, { flavorClassName: 'sweet', attestation: { ekCertificate: EK_CERT_A } }),
      500,
      new RegExp(`cannot read the TPM manufacturer CA file ${missing}: ENOENT`),
    );
    assert.equal(kube.tokens.size, 0);
  });

  it('refuses an EK that is not RSA-2048 (ECC, RSA-4096) or not a key at all', async () => {
    const { kube, deps } = await setup();
    const ecc = generateKeyPairSync('ec', { namedCurve: 'P-256' }).publicKey;
    await refused(
      issueToken(deps, { flavorClassName: 'sweet', attestation: { ekPublicKey: pemOf(ecc) } }),
      400,
      /attestation\.ekPublicKey must be an RSA-2048 key \(the TPM's standard EK\), not ec/,
      'attestation.ekPublicKey',
    );
    const rsa4096 = generateKeyPairSync('rsa', { modulusLength: 4096 }).publicKey;
    await refused(
      issueToken(deps, { flavorClassName: 'sweet', attestation: { ekPublicKey: pemOf(rsa4096) } }),
      400,
      /not rsa-4096/,
      'attestation.ekPublicKey',
    );
    await refused(
      issueToken(deps, {
        flavorClassName: 'sweet',
        attestation: { ekPublicKey: '-----BEGIN PUBLIC KEY-----\nnot a key\n-----END PUBLIC KEY-----\n' },
      }),
      400,
      /attestation\.ekPublicKey is not a PEM public key/,
    );
    await refused(
      issueToken(deps, { flavorClassName: 'sweet', attestation: { ekPublicKey: EK_CERT_A } }),
      400,
      /must be PEM \(-----BEGIN PUBLIC KEY-----\)/,
      'attestation.ekPublicKey',
    );
    assert.equal(kube.tokens.size + kube.secrets.size, 0);
  });

  it('refuses attestation on an issuer without --attestation-url', async () => {
    const { kube, deps } = await setup({});
    await refused(
      issueToken(deps, { flavorClassName: 'sweet', attestation: { ekPublicKey: EK_PEM } }),
      400,
      /needs an issuer set up for attested joins \(--attestation-url/,
      'attestation',
    );
    assert.equal(kube.tokens.size, 0);
    // A plain token is issued as ever.
    const plain = await issueToken(deps, { flavorClassName: 'sweet' });
    assert.equal(plain.attested, false);
  });

  it('a flavor that requires a measured boot state: only a token bound by an EK certificate (400 otherwise)', async () => {
    const { kube, deps } = await setup({ url: URL, manufacturerCaFile: manufacturerA });
    kube.flavors.set('measured', {
      apiVersion: 'nodeflavor.io/v1alpha1',
      kind: 'FlavorClass',
      metadata: { name: 'measured' },
      spec: { measuredBoot: { pcrs: [{ index: 7, sha256: 'ab'.repeat(32) }] } },
    });
    await refused(
      issueToken(deps, { flavorClassName: 'measured' }),
      400,
      /requires a measured boot state/,
      'attestation.ekCertificate',
    );
    // A bare public key may be a software key, which would quote any PCR values.
    await refused(
      issueToken(deps, { flavorClassName: 'measured', attestation: { ekPublicKey: EK_PEM } }),
      400,
      /only a TPM a manufacturer vouches for/,
      'attestation.ekCertificate',
    );
    assert.equal(kube.tokens.size + kube.secrets.size, 0);
    const issued = await issueToken(deps, {
      flavorClassName: 'measured',
      attestation: { ekCertificate: EK_CERT_A },
    });
    assert.equal(issued.attested, true);
  });

  it('refuses maxUses other than 1 for a token bound to a TPM', async () => {
    const { kube, deps } = await setup();
    await refused(
      issueToken(deps, { flavorClassName: 'sweet', maxUses: 2, attestation: { ekPublicKey: EK_PEM } }),
      400,
      /maxUses must be 1 for a token bound to a TPM/,
      'maxUses',
    );
    assert.equal(kube.tokens.size, 0);
    const one = await issueToken(deps, {
      flavorClassName: 'sweet',
      maxUses: 1,
      attestation: { ekPublicKey: EK_PEM },
    });
    assert.equal(one.attested, true);
  });

  it("a valid EK certificate binds the token to the certificate's key and records the CA that vouched for it", async () => {
    const { kube, deps } = await setup({ url: URL, manufacturerCaFile: manufacturerA });
    const issued = await issueToken(deps, {
      flavorClassName: 'sweet',
      attestation: { ekCertificate: EK_CERT_A },
    });
    assert.equal(issued.attested, true);
    const record = kube.tokens.get(issued.name);
    assert.ok(record);
    const { ekCertificate, ...facts } = record.spec.attestation ?? { ekCertificate: '' };
    assert.deepEqual(facts, {
      ekPublicKey: EK_PEM,
      ekCertificateIssuer: 'CN=swtpm-localca',
      allowRejoin: false,
    });
    // The certificate is kept too: each challenge and answer checks it again.
    assert.deepEqual(new X509Certificate(ekCertificate ?? '').raw, new X509Certificate(EK_CERT_A).raw);
    assert.equal(kube.secrets.size, 0);
    // Sealed by the issuer: the attestation routes and the controller believe only sealed facts.
    const facts2 = sealedFactsOf(record);
    assert.ok(facts2);
    assert.equal(
      attestationSealHolds(
        await deps.keyRing(),
        facts2,
        record.metadata.annotations?.[ATTESTATION_SEAL_ANNOTATION],
      ),
      true,
    );
    assert.equal(tokenStatusView(record, NOW).attestation?.ekCertificateIssuer, 'CN=swtpm-localca');
  });

  it('an EK public key is kept in one canonical PEM form, whatever whitespace it came with', async () => {
    const { kube, deps } = await setup();
    const issued = await issueToken(deps, {
      flavorClassName: 'sweet',
      attestation: { ekPublicKey: `\n${EK_PEM.replaceAll('\n', '\r\n')}\n\n` },
    });
    assert.equal(kube.tokens.get(issued.name)?.spec.attestation?.ekPublicKey, EK_PEM);
  });

  it('idempotent issuance of an attested token: no Secret, the same token on a retry, no secret in the answer', async () => {
    const { kube, deps } = await setup();
    const input = {
      flavorClassName: 'sweet',
      ttl: '1h',
      owner: 'sha256:portal',
      attestation: { ekPublicKey: EK_PEM },
    };
    const first = await issueIdempotently(deps, input, 'order-1', 600_000);
    const again = await issueIdempotently(deps, input, 'order-1', 600_000);
    assert.equal(first.replayed, false);
    assert.equal(again.replayed, true);
    assert.equal(again.issued.tokenId, first.issued.tokenId);
    assert.equal(first.issued.attested, true);
    assert.equal(again.issued.attested, true);
    assert.equal(kube.secrets.size, 0);
    assert.equal(kube.tokens.size, 1);
    const response = issueResponse(again.issued);
    assert.equal(response.bootstrapToken, null);
    assert.equal(response.flavorToken, null);
    assert.equal(response.attestScript, first.issued.material.attestScript);
    assert.equal(response.joinConfiguration, first.issued.material.joinConfiguration);

    // The same key with another TPM, or without one, is another request: refused, nothing made.
    const otherEk = pemOf(generateKeyPairSync('rsa', { modulusLength: 2048 }).publicKey);
    await refused(
      issueIdempotently(deps, { ...input, attestation: { ekPublicKey: otherEk } }, 'order-1', 600_000),
      409,
      /Idempotency-Key/,
    );
    const { attestation: _unbound, ...plain } = input;
    await refused(issueIdempotently(deps, plain, 'order-1', 600_000), 409, /Idempotency-Key/);
    assert.equal(kube.tokens.size, 1);
    assert.equal(kube.secrets.size, 0);
  });
});
