// The issuer's seal over a record's attestation facts (src/flavor/attestation-seal.ts), and the
// once-per-proof rule (src/flavor/attestation-proofs.ts): pure tables.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
  type TokenProofs,
  tokenProofs,
  unusedProof,
  withProofBound,
} from '../../src/flavor/attestation-proofs.ts';
import {
  ATTESTATION_SEAL_ANNOTATION,
  attestationSealHolds,
  type SealedFacts,
  sealAttestation,
  sealedFactsOf,
} from '../../src/flavor/attestation-seal.ts';
import { newKeyRing, rotateKeyRing } from '../../src/flavor/keyring.ts';
import { seededRandomBytes } from './support/random.ts';

const ring = newKeyRing(seededRandomBytes('seal-ring'));
const FACTS: SealedFacts = {
  uid: 'uid-1',
  flavorClassName: 'sweet',
  nodeName: 'n1',
  maxUses: 1,
  attestation: {
    ekPublicKey: '-----BEGIN PUBLIC KEY-----\nA\n-----END PUBLIC KEY-----\n',
    ekCertificateIssuer: 'CN=Example TPM EK CA',
    ekCertificate: '-----BEGIN CERTIFICATE-----\nB\n-----END CERTIFICATE-----\n',
    allowRejoin: true,
  },
};

describe('attestation seal', () => {
  const seal = sealAttestation(ring.active, FACTS);

  it('holds for the facts it was made for, under the ring that made it (a retired key too)', () => {
    assert.match(seal, /^[0-9a-f]{8}\.[A-Za-z0-9_-]{43}$/);
    assert.equal(attestationSealHolds(ring, FACTS, seal), true);
    assert.equal(attestationSealHolds(rotateKeyRing(ring, 1, seededRandomBytes('next')), FACTS, seal), true);
    assert.equal(attestationSealHolds(rotateKeyRing(ring, 0, seededRandomBytes('next')), FACTS, seal), false);
    assert.equal(attestationSealHolds(newKeyRing(seededRandomBytes('other')), FACTS, seal), false);
  });

  it('covers every fact a decision rests on: another value of any of them is unsealed', () => {
    const a = FACTS.attestation;
    const variants: [string, SealedFacts][] = [
      ['uid (another record of the same name)', { ...FACTS, uid: 'uid-2' }],
      ['flavor', { ...FACTS, flavorClassName: 'sour' }],
      ['nodeName', { ...FACTS, nodeName: 'n2' }],
      ['no nodeName', { ...FACTS, nodeName: undefined }],
      ['maxUses', { ...FACTS, maxUses: 2 }],
      ['EK', { ...FACTS, attestation: { ...a, ekPublicKey: `${a.ekPublicKey} ` } }],
      ['certificate issuer', { ...FACTS, attestation: { ...a, ekCertificateIssuer: 'CN=Forged' } }],
      ['no certificate issuer', { ...FACTS, attestation: { ...a, ekCertificateIssuer: undefined } }],
      ['certificate', { ...FACTS, attestation: { ...a, ekCertificate: undefined } }],
      ['allowRejoin', { ...FACTS, attestation: { ...a, allowRejoin: false } }],
    ];
    for (const [what, facts] of variants) assert.equal(attestationSealHolds(ring, facts, seal), false, what);
  });

  it('anything that is not a seal is none', () => {
    for (const text of [undefined, '', 'x', `${seal}x`, seal.replace('.', ':'), seal.toUpperCase()])
      assert.equal(attestationSealHolds(ring, FACTS, text), false, String(text));
  });

  it("a record's facts: none for a token not bound to a TPM; maxUses as the API server defaults it", () => {
    assert.equal(sealedFactsOf({ metadata: { uid: 'u' }, spec: { flavorClassName: 'sweet' } }), undefined);
    assert.deepEqual(
      sealedFactsOf({
        metadata: { uid: 'uid-1', annotations: { [ATTESTATION_SEAL_ANNOTATION]: seal } } as never,
        spec: { flavorClassName: 'sweet', nodeName: 'n1', attestation: FACTS.attestation },
      }),
      FACTS,
    );
  });
});

describe('one join per proof', () => {
  const at = (iso: string) => new Date(iso);
  const proofs = (
    latest: number | undefined,
    bound: number,
    when = '2030-01-01T00:00:10.400Z',
  ): TokenProofs => (latest === undefined ? { bound } : { latest: { number: latest, at: at(when) }, bound });
  const cases: Record<string, { proofs: TokenProofs | undefined; csr: string; want: number | undefined }> = {
    'no proof yet: no join': { proofs: proofs(undefined, 0), csr: '2030-01-01T00:00:20Z', want: undefined },
    'the first proof, a CSR after it: that proof': {
      proofs: proofs(1, 0),
      csr: '2030-01-01T00:00:11Z',
      want: 1,
    },
    'the latest proof used by a binding already: no join': {
      proofs: proofs(1, 1),
      csr: '2030-01-01T00:05:00Z',
      want: undefined,
    },
    'a later proof: that proof': { proofs: proofs(3, 2), csr: '2030-01-01T00:00:11Z', want: 3 },
    'a CSR made before the proof: not its': {
      proofs: proofs(2, 1),
      csr: '2030-01-01T00:00:09Z',
      want: undefined,
    },
    "a CSR stamped in the proof's second (made before it, perhaps): not its": {
      proofs: proofs(2, 1),
      csr: '2030-01-01T00:00:10Z',
      want: undefined,
    },
    'a proof at a whole second, a CSR stamped in that second: its': {
      proofs: proofs(2, 1, '2030-01-01T00:00:10.000Z'),
      csr: '2030-01-01T00:00:10Z',
      want: 2,
    },
    'no proofs known (a token not bound to a TPM): none': {
      proofs: undefined,
      csr: '2030-01-01T00:00:11Z',
      want: undefined,
    },
  };
  for (const [name, c] of Object.entries(cases))
    it(name, () => assert.equal(unusedProof(c.proofs, at(c.csr)), c.want));

  it('the proof bound is kept in the status, and never goes back', () => {
    assert.deepEqual(withProofBound({ uses: 1 }, 2), { uses: 1, attestation: { bound: 2 } });
    const later = { attestation: { bound: 3, deleted: 3 } };
    assert.equal(withProofBound(later, 2), later);
    assert.equal(withProofBound(later, undefined), later);
  });

  it("a token's proofs: the issuer's record and the status's; a record not the issuer's counts no proof", () => {
    const annotations = {
      'nodeflavor.io/attested': JSON.stringify({ count: 2, at: '2030-01-01T00:00:10.400Z' }),
    };
    assert.deepEqual(tokenProofs({ metadata: { annotations }, status: { attestation: { bound: 1 } } }), {
      latest: { number: 2, at: at('2030-01-01T00:00:10.400Z') },
      bound: 1,
    });
    // A binding that used a proof counts even where the status field lags (written by an older release).
    assert.equal(
      tokenProofs({
        metadata: { annotations },
        status: {
          bindings: [{ nodeName: 'n1', csrName: 'c', boundAt: '2030-01-01T00:00:11Z', attestation: 2 }],
        },
      }).bound,
      2,
    );
    for (const value of ['{"count":"2","at":"x"}', 'not json', '{"count":0,"at":"2030-01-01T00:00:00Z"}'])
      assert.deepEqual(tokenProofs({ metadata: { annotations: { 'nodeflavor.io/attested': value } } }), {
        bound: 0,
      });
  });
});
