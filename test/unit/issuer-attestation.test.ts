// The attested join's exchange through the issuer (src/tokenissuer/attestation/attestation.ts, ADR 0014), on
// FakeTokenKube with an injected clock and real swtpm keys (test/unit/fixtures/tpm). No TPM runs
// here: the node's side is played either by re-deriving the credential's secret S the way only the
// issuer can (credentialSecret under the ring key the ticket names), or, with an EK whose private
// key the test holds, by doing what TPM2_ActivateCredential does (decrypt the seed, open the
// credential for the AK's Name). That a real TPM activates the credential is test/e2e.
import assert from 'node:assert/strict';
import {
  constants,
  createHash,
  createPublicKey,
  generateKeyPairSync,
  type KeyObject,
  privateDecrypt,
} from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import {
  ATTESTATION_REFUSED_ANNOTATION,
  ATTESTED_ANNOTATION,
} from '../../src/flavor/attestation-decision.ts';
import {
  answerProof,
  credentialSecret,
  decodeTicket,
  encodeTicket,
  openJoinSecrets,
  ticketKey,
} from '../../src/flavor/attestation-exchange.ts';
import {
  ATTESTATION_SEAL_ANNOTATION,
  sealAttestation,
  sealedFactsOf,
} from '../../src/flavor/attestation-seal.ts';
import { deriveFlavorToken, verifyFlavorToken } from '../../src/flavor/flavor-token.ts';
import { type KeyRing, newKeyRing, rotateKeyRing } from '../../src/flavor/keyring.ts';
import type { FlavoredToken } from '../../src/flavor/resources.ts';
import type { Secret } from '../../src/flavor/secret.ts';
import { parseCredentialBlobFile } from '../../src/flavor/tpm/credential-blob-file.ts';
import { IDENTITY_LABEL } from '../../src/flavor/tpm/credential-protection.ts';
import { ekSpkiDer } from '../../src/flavor/tpm/ek-identity.ts';
import { openCredentialWithSeed } from '../../src/flavor/tpm/open-credential.ts';
import { parseTpm2bPublic } from '../../src/flavor/tpm/tpm-public.ts';
import {
  type AnswerResponse,
  type AttestationDeps,
  answer,
  type ChallengeResponse,
  challenge,
} from '../../src/tokenissuer/attestation/attestation.ts';
import { attestationFiles } from '../../src/tokenissuer/attestation/attestation-files.ts';
import { IssuanceSettingsSchema, parseIssuerConfig } from '../../src/tokenissuer/config.ts';
import { IssuerError } from '../../src/tokenissuer/errors.ts';
import {
  type IssuanceDeps,
  type IssuedToken,
  issueToken,
  revokeToken,
  tokenRecord,
  tokenStatusView,
} from '../../src/tokenissuer/issuance/issue.ts';
import { buildIssuerApp } from '../../src/tokenissuer/server.ts';
import {
  pemOf as certificatesPem,
  makeCa,
  makeCrl,
  makeEkCertificate,
  subjectAltNameOf,
} from '../support/ek-chain.ts';
import { everyInterleaving, gated } from './support/interleavings.ts';
import {
  clusterInfoKubeconfig,
  FakeReviews,
  FakeTokenKube,
  issuerErrorFrom,
} from './support/issuer-fakes.ts';
import { seededRandomBytes } from './support/random.ts';

const fixture = (name: string) => readFileSync(join(import.meta.dirname, 'fixtures', 'tpm', name));
const EK_PUB = fixture('ek.pub');
const AK_PUB = fixture('ak.pub');
const AK_NAME = fixture('ak.name');
const OTHER_TPM_EK_PUB = fixture('tpm-b-ek.pub');
/** A real TPM signing key that is not restricted: it would sign anything, so it is no AK. */
const SIGNER_PUB = fixture('signer.pub');

const pemOf = (spkiDer: Buffer) =>
  createPublicKey({ key: spkiDer, format: 'der', type: 'spki' })
    .export({ type: 'spki', format: 'pem' })
    .toString();
const EK_PEM = pemOf(ekSpkiDer({ tpm2bPublic: EK_PUB }));
const digestOf = (tpm2bPublic: Buffer) =>
  createHash('sha256').update(ekSpkiDer({ tpm2bPublic })).digest('hex');
const EK_DIGEST = digestOf(EK_PUB);

const ISSUER_URL = 'https://issuer.example.com';
const T0 = Date.parse('2030-01-01T00:00:00Z');
const iso = (ms: number) => new Date(ms).toISOString().replace('.000Z', 'Z');

interface RecordedEvent {
  name: string;
  type: string;
  reason: string;
  message: string;
}

async function setup(settings: Record<string, unknown> = {}) {
  const kube = new FakeTokenKube(await clusterInfoKubeconfig());
  kube.addFlavor('sweet');
  kube.addFlavor('sour');
  let ring: KeyRing = newKeyRing(seededRandomBytes('ring'));
  let nowMs = T0;
  const now = () => new Date(nowMs);
  const parsed = IssuanceSettingsSchema.parse({ attestation: { url: ISSUER_URL }, ...settings });
  const issuance: IssuanceDeps = {
    kube,
    keyRing: async () => ring,
    settings: parsed,
    now,
    randomBytes: seededRandomBytes('issue'),
  };
  const events: RecordedEvent[] = [];
  const outcomes: string[] = [];
  const deps: AttestationDeps = {
    kube,
    keyRing: async () => ring,
    settings: parsed,
    now,
    randomBytes: seededRandomBytes('attest'),
    events: {
      emit: (object, type, reason, message) => events.push({ name: object.name, type, reason, message }),
    },
    count: (outcome) => outcomes.push(outcome),
  };
  return {
    kube,
    issuance,
    deps,
    events,
    outcomes,
    now,
    advance: (ms: number) => {
      nowMs += ms;
    },
    ring: () => ring,
    setRing: (next: KeyRing) => {
      ring = next;
    },
  };
}
type Setup = Awaited<ReturnType<typeof setup>>;

function issueAttested(
  t: Setup,
  extra: {
    ttl?: string;
    nodeName?: string;
    flavorClassName?: string;
    ekPublicKey?: string;
    allowRejoin?: boolean;
  } = {},
): Promise<IssuedToken> {
  const { ekPublicKey = EK_PEM, allowRejoin, ...rest } = extra;
  return issueToken(t.issuance, {
    flavorClassName: 'sweet',
    ttl: '1h',
    ...rest,
    attestation: { ekPublicKey, ...(allowRejoin !== undefined ? { allowRejoin } : {}) },
  });
}

const challengeBody = (ek: Buffer = EK_PUB, ak: Buffer = AK_PUB) => ({
  ekPublic: ek.toString('base64'),
  akPublic: ak.toString('base64'),
});

/** What the node computes once its TPM gave it S: here S is re-derived as the issuer derives it. */
async function nodeAnswer(t: Setup, challenged: ChallengeResponse, ekDigest = EK_DIGEST) {
  const ticket = decodeTicket(challenged.ticket);
  assert.ok(ticket, 'the challenge answers a ticket this issuer decodes');
  const key = ticketKey(t.ring(), ticket);
  assert.ok(key, 'the ring holds the ticket key');
  const secret = credentialSecret(key, ticket, ekDigest);
  return { secret, body: { ticket: challenged.ticket, proof: answerProof(secret, challenged.ticket) } };
}

const refusedWith = issuerErrorFrom;

const record = (t: Setup, issued: IssuedToken): FlavoredToken => {
  const token = t.kube.tokens.get(issued.name);
  assert.ok(token);
  return token;
};
const annotation = (token: FlavoredToken, key: string): Record<string, unknown> | undefined => {
  const text = token.metadata.annotations?.[key];
  return text === undefined ? undefined : (JSON.parse(text) as Record<string, unknown>);
};
const refusalWrites = (t: Setup) =>
  t.kube.annotateCalls.filter((call) => call.annotations[ATTESTATION_REFUSED_ANNOTATION] !== undefined);
const attestedWrites = (t: Setup) =>
  t.kube.annotateCalls.filter((call) => call.annotations[ATTESTED_ANNOTATION] !== undefined);
/** What an attestation wrote on records (not the issuance's own seal). */
const attestationWrites = (t: Setup) =>
  t.kube.annotateCalls.filter((call) => call.annotations[ATTESTATION_SEAL_ANNOTATION] === undefined);

/** The record sealed again, under the ring's active key, as the issuer seals a record it made. */
function reseal(t: Setup, issued: IssuedToken): void {
  const token = record(t, issued);
  const facts = sealedFactsOf(token);
  assert.ok(facts);
  token.metadata.annotations = {
    ...token.metadata.annotations,
    [ATTESTATION_SEAL_ANNOTATION]: sealAttestation(t.ring().active, facts),
  };
}

/** An EK the test holds the private key of, in the shape tpm2_createek writes (the fixture's template). */
function ekWithPrivateKey(): { tpm2bPublic: Buffer; privateKey: KeyObject; pem: string } {
  const { publicKey, privateKey } = generateKeyPairSync('rsa', {
    modulusLength: 2048,
    publicExponent: 65537,
  });
  const modulus = Buffer.from(publicKey.export({ format: 'jwk' }).n ?? '', 'base64url');
  assert.equal(modulus.length, 256);
  const tpm2bPublic = Buffer.from(EK_PUB);
  // The RSA template ends with the TPM2B modulus (unique.rsa): put ours there.
  modulus.copy(tpm2bPublic, tpm2bPublic.length - 256);
  assert.ok(parseTpm2bPublic(tpm2bPublic).publicKey.equals(publicKey));
  return { tpm2bPublic, privateKey, pem: publicKey.export({ type: 'spki', format: 'pem' }).toString() };
}

/** TPM2_ActivateCredential as the TPM does it: the seed under the EK's private key, then the AK's Name. */
function activateCredential(
  ek: { tpm2bPublic: Buffer; privateKey: KeyObject },
  credential: string,
  akName: Buffer,
): Buffer | undefined {
  const blob = parseCredentialBlobFile(Buffer.from(credential, 'base64'));
  const seed = privateDecrypt(
    {
      key: ek.privateKey,
      padding: constants.RSA_PKCS1_OAEP_PADDING,
      oaepHash: 'sha256',
      oaepLabel: IDENTITY_LABEL,
    },
    blob.encryptedSecret.subarray(2),
  );
  const opened = openCredentialWithSeed({
    ekPublic: parseTpm2bPublic(ek.tpm2bPublic),
    akName,
    idObject: blob.idObject,
    seed,
  });
  return opened.ok ? opened.credential : undefined;
}

describe('attested issuance', () => {
  it('binds the token to the EK, makes no bootstrap Secret, and answers material without any secret', async () => {
    const t = await setup();
    const issued = await issueAttested(t);
    assert.equal(issued.attested, true);
    assert.equal(t.kube.secrets.size, 0, 'no bootstrap Secret until the machine attests');
    const token = record(t, issued);
    assert.deepEqual(token.spec.attestation, { ekPublicKey: EK_PEM, allowRejoin: false });
    assert.equal(token.metadata.annotations?.['nodeflavor.io/issued'], undefined, 'one write: no mark');
    const script = issued.material.attestScript;
    assert.ok(script);
    assert.ok(script.includes(`ISSUER='${ISSUER_URL}'`));
    assert.ok(script.includes(`TOKEN_ID='${issued.tokenId}'`));
    // No secret anywhere: neither a bootstrap token nor the flavor token the ring would derive.
    const flavorToken = deriveFlavorToken(t.ring().active, issued.tokenId, 'sweet').reveal();
    const everything = JSON.stringify({ issued, token });
    assert.ok(!everything.includes(flavorToken), 'the flavor token is nowhere');
    assert.doesNotMatch(everything, /[a-z0-9]{6}\.[a-z0-9]{16}(?![a-z0-9])/, 'no bootstrap token');
    assert.equal(tokenStatusView(token, t.now()).attestation?.attestations, 0);
  });
});

describe('challenge and answer', () => {
  it('a machine with the TPM gets a credential, proves it, and earns its join secrets sealed', async () => {
    const t = await setup();
    const issued = await issueAttested(t);
    const before = structuredClone(record(t, issued));

    const challenged = await challenge(t.deps, issued.tokenId, challengeBody());
    assert.deepEqual(Object.keys(challenged), ['ticket', 'credential', 'deadline', 'quote']);
    assert.equal(challenged.quote, null, 'no measured boot state required');
    assert.equal(challenged.deadline, new Date(T0 + 60_000).toISOString().replace('.000Z', 'Z'));
    const ticket = decodeTicket(challenged.ticket);
    assert.ok(ticket);
    assert.deepEqual(
      { record: ticket.record, key: ticket.key, issuedAt: ticket.issuedAt, deadline: ticket.deadline },
      { record: before.metadata.uid, key: t.ring().active.id, issuedAt: T0, deadline: T0 + 60_000 },
    );
    assert.equal(ticket.akName, AK_NAME.toString('hex'), "the AK's Name, computed from its public area");
    // tpm2-tools' cred.blob: a 32-byte credential (TPM2B_ID_OBJECT of 68) under a 2048-bit EK.
    const blob = parseCredentialBlobFile(Buffer.from(challenged.credential, 'base64'));
    assert.equal(blob.idObject.length, 70);
    assert.equal(blob.encryptedSecret.length, 258);
    // A challenge writes nothing.
    assert.deepEqual(record(t, issued), before);
    assert.equal(attestationWrites(t).length + t.kube.secrets.size, 0);
    assert.deepEqual(t.outcomes, ['challenged']);

    t.advance(5_000);
    const { secret, body } = await nodeAnswer(t, challenged);
    const answered = await answer(t.deps, issued.tokenId, body);
    assert.deepEqual(Object.keys(answered).sort(), ['ciphertext', 'joinBy', 'mac', 'salt']);
    assert.equal(answered.joinBy, iso(T0 + 5_000 + 900_000), 'the join window (900 s) from now');
    const stored = t.kube.secrets.get(issued.tokenId);
    assert.ok(stored, 'the bootstrap Secret exists now');
    assert.equal(stored.expiration, answered.joinBy);
    assert.deepEqual(stored.owner, { name: issued.name, uid: before.metadata.uid });

    const opened = openJoinSecrets(secret, answered);
    assert.ok(opened, 'the answer opens under S');
    assert.match(opened.bootstrapToken.reveal(), new RegExp(`^${issued.tokenId}\\.[a-z0-9]{16}$`));
    assert.equal(opened.bootstrapToken.reveal(), `${issued.tokenId}.${stored.secret}`);
    assert.equal(
      verifyFlavorToken(t.ring(), issued.tokenId, 'sweet', opened.flavorToken.reveal()).valid,
      true,
    );
    assert.equal(
      verifyFlavorToken(t.ring(), issued.tokenId, 'sour', opened.flavorToken.reveal()).valid,
      false,
    );

    const after = record(t, issued);
    // The proof's number and its time to the millisecond (not whole seconds: issue 32).
    assert.deepEqual(annotation(after, ATTESTED_ANNOTATION), {
      count: 1,
      at: new Date(T0 + 5_000).toISOString(),
    });
    const serialised = JSON.stringify(after);
    assert.ok(!serialised.includes(stored.secret) && !serialised.includes(opened.flavorToken.reveal()));
    assert.deepEqual(
      t.events.map(({ type, reason }) => [type, reason]),
      [['Normal', 'Attested']],
    );
    assert.ok(t.events[0]?.message.includes(answered.joinBy));
    assert.deepEqual(t.outcomes, ['challenged', 'attested']);
    assert.deepEqual(tokenStatusView(after, t.now()).attestation, {
      ekCertificateIssuer: null,
      allowRejoin: false,
      attestations: 1,
      attestedAt: new Date(T0 + 5_000).toISOString(),
      lastRefusal: null,
    });
  });

  it('the credential carries S for that AK only: what a TPM holding the EK recovers proves the answer', async () => {
    const t = await setup();
    const ek = ekWithPrivateKey();
    const issued = await issueAttested(t, { ekPublicKey: ek.pem });
    const challenged = await challenge(t.deps, issued.tokenId, challengeBody(ek.tpm2bPublic));
    const recovered = activateCredential(ek, challenged.credential, AK_NAME);
    assert.ok(recovered, 'the TPM opens the credential for the AK it was made for');
    assert.equal(recovered.length, 32);
    assert.equal(
      activateCredential(ek, challenged.credential, fixture('ak-ecc.name')),
      undefined,
      'not another AK',
    );
    // The secret the TPM recovered is the one the issuer derives for this ticket and EK.
    const { secret } = await nodeAnswer(t, challenged, digestOf(ek.tpm2bPublic));
    assert.equal(recovered.toString('hex'), secret.reveal());
    const proof = answerProof({ reveal: () => recovered.toString('hex') } as Secret, challenged.ticket);
    const answered = await answer(t.deps, issued.tokenId, { ticket: challenged.ticket, proof });
    assert.ok(openJoinSecrets(secret, answered));
  });

  it('an answer exactly at the deadline counts', async () => {
    const t = await setup();
    const issued = await issueAttested(t);
    const challenged = await challenge(t.deps, issued.tokenId, challengeBody());
    t.advance(60_000);
    const { body } = await nodeAnswer(t, challenged);
    await answer(t.deps, issued.tokenId, body);
    assert.ok(t.kube.secrets.has(issued.tokenId));
  });

  it('the bootstrap token never outlives the token: joinBy is the token’s expiry when that is sooner', async () => {
    const t = await setup();
    const issued = await issueAttested(t, { ttl: '10m' });
    const challenged = await challenge(t.deps, issued.tokenId, challengeBody());
    t.advance(5_000);
    const answered = await answer(t.deps, issued.tokenId, (await nodeAnswer(t, challenged)).body);
    assert.equal(answered.joinBy, iso(T0 + 600_000));
    assert.equal(t.kube.secrets.get(issued.tokenId)?.expiration, iso(T0 + 600_000));
  });

  it('a replayed answer earns nothing (409) and changes no Secret; nor does an earlier ticket after a later one', async () => {
    const t = await setup();
    const issued = await issueAttested(t);
    const first = await challenge(t.deps, issued.tokenId, challengeBody());
    t.advance(1_000);
    const second = await challenge(t.deps, issued.tokenId, challengeBody());
    t.advance(1_000);
    const { body } = await nodeAnswer(t, second);
    await answer(t.deps, issued.tokenId, body);
    const secretAfter = structuredClone(t.kube.secrets.get(issued.tokenId));

    await refusedWith(answer(t.deps, issued.tokenId, body), 409, /answered already/);
    assert.deepEqual(t.kube.secrets.get(issued.tokenId), secretAfter);
    assert.equal(t.outcomes.at(-1), 'Replayed');
    assert.deepEqual(t.events.at(-1)?.type, 'Warning');
    assert.equal(t.events.at(-1)?.reason, 'AttestationRefused');
    assert.match(t.events.at(-1)?.message ?? '', /^Replayed: /);
    assert.equal(annotation(record(t, issued), ATTESTATION_REFUSED_ANNOTATION)?.reason, 'Replayed');

    // The first ticket is older than the one used: it is used too.
    await refusedWith(
      answer(t.deps, issued.tokenId, (await nodeAnswer(t, first)).body),
      409,
      /answered already/,
    );
    assert.deepEqual(t.kube.secrets.get(issued.tokenId), secretAfter);
    assert.equal(annotation(record(t, issued), ATTESTED_ANNOTATION)?.count, 1);
  });

  it('an answer after the deadline is 410 and recorded, and makes no Secret', async () => {
    const t = await setup();
    const issued = await issueAttested(t);
    const challenged = await challenge(t.deps, issued.tokenId, challengeBody());
    t.advance(60_001);
    await refusedWith(
      answer(t.deps, issued.tokenId, (await nodeAnswer(t, challenged)).body),
      410,
      /deadline/,
    );
    assert.equal(t.kube.secrets.size, 0);
    assert.equal(t.outcomes.at(-1), 'LateAnswer');
    assert.equal(annotation(record(t, issued), ATTESTATION_REFUSED_ANNOTATION)?.reason, 'LateAnswer');
    assert.equal(annotation(record(t, issued), ATTESTED_ANNOTATION), undefined, 'the ticket is not used');
  });

  it('a wrong proof is 403 BadProof: counted, a Warning Event, the annotation at most once a minute', async () => {
    const t = await setup();
    const issued = await issueAttested(t);
    const challenged = await challenge(t.deps, issued.tokenId, challengeBody());
    const ticket = decodeTicket(challenged.ticket);
    assert.ok(ticket);
    // What a machine with another TPM would compute: S for another EK.
    const wrong = answerProof(
      credentialSecret(t.ring().active, ticket, digestOf(OTHER_TPM_EK_PUB)),
      challenged.ticket,
    );
    const badBody = { ticket: challenged.ticket, proof: wrong };

    await refusedWith(answer(t.deps, issued.tokenId, badBody), 403, /does not prove/);
    assert.equal(t.kube.secrets.size, 0);
    assert.equal(annotation(record(t, issued), ATTESTED_ANNOTATION), undefined);
    assert.deepEqual(annotation(record(t, issued), ATTESTATION_REFUSED_ANNOTATION), {
      reason: 'BadProof',
      message: `the answer for token ${issued.tokenId} does not prove the challenge's secret: only the TPM the token is bound to can recover it`,
      at: iso(T0),
    });
    assert.deepEqual(t.events.at(-1), {
      name: issued.name,
      type: 'Warning',
      reason: 'AttestationRefused',
      message: `BadProof: the answer for token ${issued.tokenId} does not prove the challenge's secret: only the TPM the token is bound to can recover it`,
    });
    assert.deepEqual(t.outcomes, ['challenged', 'BadProof']);
    assert.equal(refusalWrites(t).length, 1);

    t.advance(30_000);
    await refusedWith(answer(t.deps, issued.tokenId, badBody), 403);
    assert.equal(refusalWrites(t).length, 1, 'the same reason within 60 s: counted, not written again');
    assert.deepEqual(t.outcomes, ['challenged', 'BadProof', 'BadProof']);
    assert.equal(annotation(record(t, issued), ATTESTATION_REFUSED_ANNOTATION)?.at, iso(T0));

    // Past the deadline, a wrong proof is still a BadProof: the ticket's timeliness is judged only
    // once the proof holds, so whoever lacks the TPM never gets LateAnswer or Replayed recorded.
    t.advance(30_001);
    await refusedWith(answer(t.deps, issued.tokenId, badBody), 403, /does not prove/);
    assert.equal(refusalWrites(t).length, 2, 'a minute after the last record: written again');

    // Once a minute per token, whatever the reason: a fresh challenge answered wrongly is counted only.
    const fresh = await challenge(t.deps, issued.tokenId, challengeBody());
    const freshBad = { ticket: fresh.ticket, proof: badBody.proof };
    await refusedWith(answer(t.deps, issued.tokenId, freshBad), 403);
    assert.equal(refusalWrites(t).length, 2);
    t.advance(60_000);
    const later = await challenge(t.deps, issued.tokenId, challengeBody());
    await refusedWith(answer(t.deps, issued.tokenId, { ticket: later.ticket, proof: badBody.proof }), 403);
    assert.equal(refusalWrites(t).length, 3, 'a minute later it is written again');
    assert.equal(
      annotation(record(t, issued), ATTESTATION_REFUSED_ANNOTATION)?.at,
      iso(T0 + 120_000),
      'whole seconds',
    );
    assert.equal(tokenStatusView(record(t, issued), t.now()).attestation?.lastRefusal?.reason, 'BadProof');
  });

  it('a ticket the node edited (a later deadline) derives another S: BadProof, even with the real S', async () => {
    const t = await setup();
    const issued = await issueAttested(t);
    const challenged = await challenge(t.deps, issued.tokenId, challengeBody());
    const { secret } = await nodeAnswer(t, challenged);
    const ticket = decodeTicket(challenged.ticket);
    assert.ok(ticket);
    const edited = encodeTicket({ ...ticket, deadline: ticket.deadline + 3_600_000 });
    assert.ok(decodeTicket(edited), 'the edited ticket is well-formed');
    t.advance(120_000);
    await refusedWith(
      answer(t.deps, issued.tokenId, { ticket: edited, proof: answerProof(secret, edited) }),
      403,
      /does not prove/,
    );
    assert.equal(t.kube.secrets.size, 0);
  });

  it("another TPM's EK is 403 EKMismatch, recorded like a bad proof", async () => {
    const t = await setup();
    const issued = await issueAttested(t);
    await refusedWith(
      challenge(t.deps, issued.tokenId, challengeBody(OTHER_TPM_EK_PUB)),
      403,
      /not the one token .* is bound to/,
    );
    assert.equal(annotation(record(t, issued), ATTESTATION_REFUSED_ANNOTATION)?.reason, 'EKMismatch');
    assert.equal(t.events.at(-1)?.type, 'Warning');
    assert.match(t.events.at(-1)?.message ?? '', /^EKMismatch: /);
    assert.deepEqual(t.outcomes, ['EKMismatch']);
    assert.equal(t.kube.secrets.size, 0);
  });

  it('a key that is no attestation key is 400: a non-restricted signing key, the EK itself, not a key', async () => {
    const t = await setup();
    const issued = await issueAttested(t);
    await refusedWith(
      challenge(t.deps, issued.tokenId, challengeBody(EK_PUB, SIGNER_PUB)),
      400,
      /akPublic is not an attestation key: restricted is clear/,
    );
    await refusedWith(
      challenge(t.deps, issued.tokenId, challengeBody(EK_PUB, EK_PUB)),
      400,
      /decrypt is set/,
    );
    await refusedWith(
      challenge(t.deps, issued.tokenId, { ekPublic: EK_PUB.toString('base64'), akPublic: 'AAAA' }),
      400,
      /akPublic is not a TPM2B_PUBLIC/,
    );
    await refusedWith(
      challenge(t.deps, issued.tokenId, { ekPublic: EK_PUB.toString('base64') }),
      400,
      /akPublic/,
    );
    await refusedWith(challenge(t.deps, issued.tokenId, { ...challengeBody(), extra: 1 }), 400);
    assert.equal(attestationWrites(t).length, 0, 'a malformed request is not recorded on the token');
    assert.deepEqual(t.outcomes, []);
  });

  it('malformed answers are 400 before anything is read', async () => {
    const t = await setup();
    const issued = await issueAttested(t);
    const challenged = await challenge(t.deps, issued.tokenId, challengeBody());
    const { body } = await nodeAnswer(t, challenged);
    for (const bad of [
      { ticket: body.ticket },
      { ...body, proof: body.proof.toUpperCase() },
      { ...body, proof: body.proof.slice(1) },
      { ...body, ticket: `${body.ticket}A` },
      { ...body, ticket: 'not a ticket' },
      { ...body, extra: true },
      'text',
    ])
      await refusedWith(answer(t.deps, issued.tokenId, bad), 400);
    assert.equal(t.kube.secrets.size + attestationWrites(t).length, 0);
  });

  it('a revoked or deleting token is 409, an unknown or unbound one 404, an expired one 410: none recorded', async () => {
    const t = await setup();
    const revoked = await issueAttested(t);
    const challenged = await challenge(t.deps, revoked.tokenId, challengeBody());
    await revokeToken(t.issuance, revoked.tokenId);
    await refusedWith(challenge(t.deps, revoked.tokenId, challengeBody()), 409, /was revoked/);
    await refusedWith(
      answer(t.deps, revoked.tokenId, (await nodeAnswer(t, challenged)).body),
      409,
      /was revoked/,
    );

    const deleting = await issueAttested(t);
    await t.kube.beginDeletion(deleting.name);
    await refusedWith(challenge(t.deps, deleting.tokenId, challengeBody()), 409, /was deleted/);

    await refusedWith(
      challenge(t.deps, 'zzzzzz', challengeBody()),
      404,
      /no token bound to a TPM has ID zzzzzz/,
    );
    await refusedWith(challenge(t.deps, '../etc', challengeBody()), 404);
    await refusedWith(answer(t.deps, 'zzzzzz', (await nodeAnswer(t, challenged)).body), 404);
    const plain = await issueToken(t.issuance, { flavorClassName: 'sweet' });
    const plainSecret = structuredClone(t.kube.secrets.get(plain.tokenId));
    await refusedWith(challenge(t.deps, plain.tokenId, challengeBody()), 404);
    assert.deepEqual(t.kube.secrets.get(plain.tokenId), plainSecret);

    const expiring = await issueAttested(t, { ttl: '1h' });
    t.advance(3_600_000);
    await refusedWith(challenge(t.deps, expiring.tokenId, challengeBody()), 410, /has expired/);

    assert.equal(attestationWrites(t).length, 0, 'none of these is recorded on a token');
    assert.equal(t.events.length, 0);
    assert.deepEqual(t.outcomes, [
      'challenged',
      'Revoked',
      'Revoked',
      'Revoked',
      'NotAttested',
      'NotAttested',
      'NotAttested',
      'NotAttested',
      'Expired',
    ]);
  });

  it('a used token is 409 Consumed; with allowRejoin its machine attests again and gets a new bootstrap token', async () => {
    const t = await setup();
    const used = await issueAttested(t);
    record(t, used).status = { tokenID: used.tokenId, uses: 1 };
    await refusedWith(challenge(t.deps, used.tokenId, challengeBody()), 409, /used by its machine already/);
    const bound = await issueAttested(t);
    record(t, bound).status = {
      tokenID: bound.tokenId,
      bindings: [{ nodeName: 'node-1', csrName: 'csr-1', boundAt: iso(T0) }],
    };
    await refusedWith(challenge(t.deps, bound.tokenId, challengeBody()), 409, /used by its machine already/);
    assert.deepEqual(t.outcomes, ['Consumed', 'Consumed']);

    // nodeName: a re-joining machine comes back under its one name.
    const rejoinable = await issueAttested(t, { allowRejoin: true, nodeName: 'node-1' });
    assert.equal(record(t, rejoinable).spec.attestation?.allowRejoin, true);
    const first = await challenge(t.deps, rejoinable.tokenId, challengeBody());
    t.advance(1_000);
    await answer(t.deps, rejoinable.tokenId, (await nodeAnswer(t, first)).body);
    const firstSecret = t.kube.secrets.get(rejoinable.tokenId)?.secret;
    record(t, rejoinable).status = { tokenID: rejoinable.tokenId, uses: 1 };

    t.advance(1_000);
    const again = await challenge(t.deps, rejoinable.tokenId, challengeBody());
    t.advance(1_000);
    const { secret, body } = await nodeAnswer(t, again);
    const answered = await answer(t.deps, rejoinable.tokenId, body);
    const secondSecret = t.kube.secrets.get(rejoinable.tokenId)?.secret;
    assert.ok(secondSecret && secondSecret !== firstSecret, 'the earlier bootstrap Secret was replaced');
    assert.equal(
      openJoinSecrets(secret, answered)?.bootstrapToken.reveal(),
      `${rejoinable.tokenId}.${secondSecret}`,
    );
    assert.equal(annotation(record(t, rejoinable), ATTESTED_ANNOTATION)?.count, 2);
    assert.equal(tokenStatusView(record(t, rejoinable), t.now()).attestation?.attestations, 2);
  });

  it('a concurrent write before the ticket is marked used: judged again, attested once; a replay after fails', async () => {
    const t = await setup();
    const issued = await issueAttested(t);
    const challenged = await challenge(t.deps, issued.tokenId, challengeBody());
    const { body } = await nodeAnswer(t, challenged);
    // The controller writes the status between the answer's read and its annotate: a 409.
    t.kube.beforeNext.annotateFlavoredToken = () => t.kube.writeStatus(issued.name);
    await answer(t.deps, issued.tokenId, body);
    const writes = attestedWrites(t);
    assert.equal(writes.length, 2, 'the first annotate met a conflict, the second landed');
    assert.notEqual(writes[0]?.resourceVersion, writes[1]?.resourceVersion);
    assert.equal(t.kube.secrets.size, 1);
    assert.equal(annotation(record(t, issued), ATTESTED_ANNOTATION)?.count, 1);
    assert.equal(record(t, issued).status?.tokenID, issued.tokenId, "the controller's write is kept");

    await refusedWith(answer(t.deps, issued.tokenId, body), 409, /answered already/);
    assert.equal(attestedWrites(t).length, 2);
  });

  it('the same answer racing on another replica: one wins, the other is 409 Replayed and mints nothing', async () => {
    const t = await setup();
    const issued = await issueAttested(t);
    const challenged = await challenge(t.deps, issued.tokenId, challengeBody());
    const { body } = await nodeAnswer(t, challenged);
    // The other replica marks this very ticket used between this answer's read and its annotate.
    t.kube.beforeNext.annotateFlavoredToken = () =>
      t.kube.annotateFlavoredToken(issued.name, {
        [ATTESTED_ANNOTATION]: JSON.stringify({ count: 1, at: new Date(T0).toISOString() }),
      });
    await refusedWith(answer(t.deps, issued.tokenId, body), 409, /answered already/);
    assert.equal(t.kube.secrets.size, 0, 'the loser made no Secret');
    assert.equal(t.outcomes.at(-1), 'Replayed');
  });

  it('a token revoked after the ticket was marked used: the Secret just made is deleted again, 409', async () => {
    const t = await setup();
    const issued = await issueAttested(t);
    const challenged = await challenge(t.deps, issued.tokenId, challengeBody());
    const { body } = await nodeAnswer(t, challenged);
    let secretBeforeDeletion: unknown;
    t.kube.beforeNext.createBootstrapSecret = async () => {
      await t.kube.markFlavoredTokenRevoked(issued.name);
      t.kube.beforeNext.deleteBootstrapSecret = () => {
        secretBeforeDeletion = t.kube.secrets.get(issued.tokenId);
      };
    };
    await refusedWith(answer(t.deps, issued.tokenId, body), 409, /revoked while it was being attested/);
    assert.ok(secretBeforeDeletion, 'the Secret was made (after the revocation) and then deleted');
    assert.equal(t.kube.secrets.size, 0, 'no bootstrap Secret is left');
    assert.equal(annotation(record(t, issued), ATTESTED_ANNOTATION)?.count, 1, 'the ticket stays used');
    assert.equal(t.outcomes.at(-1), 'Revoked');
    assert.ok(!t.events.some((e) => e.reason === 'Attested'));
  });

  it('a token re-created under the same name: the old ticket is stale (409)', async () => {
    const t = await setup();
    const issued = await issueAttested(t);
    const challenged = await challenge(t.deps, issued.tokenId, challengeBody());
    record(t, issued).metadata.uid = 'uid-recreated';
    reseal(t, issued); // re-created by the issuer: sealed for its own uid
    await refusedWith(
      answer(t.deps, issued.tokenId, (await nodeAnswer(t, challenged)).body),
      409,
      /earlier token/,
    );
    assert.equal(t.kube.secrets.size, 0);
  });

  it('a ticket under a key the ring dropped is stale (409); under a retired key still held, it counts', async () => {
    const t = await setup();
    const issued = await issueAttested(t);
    const challenged = await challenge(t.deps, issued.tokenId, challengeBody());
    const { secret, body } = await nodeAnswer(t, challenged);
    const original = t.ring();
    t.setRing(rotateKeyRing(original, 0, seededRandomBytes('dropped')));
    // A record sealed under a dropped key is unsealed now (as a flavor token of that key stops
    // verifying); sealed again under the new key, the ticket alone is stale.
    await refusedWith(answer(t.deps, issued.tokenId, body), 403, /no valid seal/);
    reseal(t, issued);
    await refusedWith(answer(t.deps, issued.tokenId, body), 409, /no longer holds/);
    assert.equal(t.kube.secrets.size, 0);

    t.setRing(rotateKeyRing(original, 1, seededRandomBytes('retained')));
    reseal(t, issued);
    const answered = await answer(t.deps, issued.tokenId, body);
    const opened = openJoinSecrets(secret, answered);
    assert.ok(opened);
    assert.equal(
      verifyFlavorToken(t.ring(), issued.tokenId, 'sweet', opened.flavorToken.reveal()).keyId,
      t.ring().active.id,
    );
  });
});

describe('the attestation routes over HTTP', () => {
  async function httpSetup(attestation: Record<string, unknown> = {}) {
    const kube = new FakeTokenKube(await clusterInfoKubeconfig());
    kube.addFlavor('sweet');
    const reviews = new FakeReviews();
    reviews.addUser('portal-token', 'portal', ['sweet']);
    const ring = newKeyRing(seededRandomBytes('http-ring'));
    const { app, registry } = buildIssuerApp(
      parseIssuerConfig({
        tls: { certPem: 'x', keyPem: 'y' },
        logLevel: 'silent',
        issuance: {
          attestation: {
            url: ISSUER_URL,
            perAddress: { capacity: 4, refillPerSecond: 0.001 },
            ...attestation,
          },
        },
      }),
      { kube, reviews, keyRing: { loaded: true, get: async () => ring }, now: () => new Date(T0) },
    );
    const post = (url: string, body: unknown, headers: Record<string, string> = {}, remoteAddress?: string) =>
      app.inject({
        method: 'POST',
        url,
        headers: { 'content-type': 'application/json', ...headers },
        payload: JSON.stringify(body),
        ...(remoteAddress ? { remoteAddress } : {}),
      });
    return { app, registry, kube, ring, post };
  }

  it('unauthenticated, no-store, the documented keys; the issue answer holds no secret', async () => {
    const { app, registry, post, ring } = await httpSetup();
    const issuedResponse = await post(
      '/v1/tokens',
      { flavorClassName: 'sweet', attestation: { ekPublicKey: EK_PEM } },
      { authorization: 'Bearer portal-token' },
    );
    assert.equal(issuedResponse.statusCode, 201, issuedResponse.body);
    const issued = issuedResponse.json() as Record<string, unknown>;
    assert.equal(issued.attested, true);
    assert.equal(issued.bootstrapToken, null);
    assert.equal(issued.flavorToken, null);
    assert.equal(typeof issued.attestScript, 'string');
    const tokenId = String(issued.tokenID);

    const challenged = await post(`/v1/attestations/${tokenId}/challenge`, challengeBody());
    assert.equal(challenged.statusCode, 200, challenged.body);
    assert.equal(challenged.headers['cache-control'], 'no-store');
    const challengeJson = challenged.json() as ChallengeResponse;
    assert.deepEqual(Object.keys(challengeJson), ['ticket', 'credential', 'deadline', 'quote']);

    const ticket = decodeTicket(challengeJson.ticket);
    assert.ok(ticket);
    const secret = credentialSecret(ring.active, ticket, EK_DIGEST);
    const answered = await post(`/v1/attestations/${tokenId}/answer`, {
      ticket: challengeJson.ticket,
      proof: answerProof(secret, challengeJson.ticket),
    });
    assert.equal(answered.statusCode, 200, answered.body);
    assert.equal(answered.headers['cache-control'], 'no-store');
    const answerJson = answered.json() as AnswerResponse;
    assert.deepEqual(Object.keys(answerJson).sort(), ['ciphertext', 'joinBy', 'mac', 'salt']);
    assert.ok(openJoinSecrets(secret, answerJson));

    const refused = await post(`/v1/attestations/${tokenId}/answer`, {
      ticket: challengeJson.ticket,
      proof: answerProof(secret, challengeJson.ticket),
    });
    assert.equal(refused.statusCode, 409);
    assert.equal((refused.json() as { error: { code: string } }).error.code, 'Conflict');

    const status = await app.inject({
      url: `/v1/tokens/${tokenId}`,
      headers: { authorization: 'Bearer portal-token' },
    });
    assert.equal((status.json() as { attestation: { attestations: number } }).attestation.attestations, 1);
    const metrics = await registry.metrics();
    assert.match(metrics, /nodeflavor_issuer_attestations_total\{outcome="challenged"\} 1/);
    assert.match(metrics, /nodeflavor_issuer_attestations_total\{outcome="attested"\} 1/);
    assert.match(metrics, /nodeflavor_issuer_attestations_total\{outcome="Replayed"\} 1/);
    await app.close();
  });

  it('a small budget per client address: then 429 with Retry-After, whatever the token', async () => {
    const { app, post } = await httpSetup();
    const statuses: number[] = [];
    for (let i = 0; i < 5; i++)
      statuses.push((await post('/v1/attestations/zzzzzz/challenge', challengeBody())).statusCode);
    assert.deepEqual(statuses, [404, 404, 404, 404, 429]);
    const limited = await post('/v1/attestations/yyyyyy/answer', { ticket: 'x', proof: 'y' });
    assert.equal(limited.statusCode, 429);
    assert.ok(Number(limited.headers['retry-after']) > 0);
    await app.close();
  });

  it('a budget for every address together: a flood from many addresses is bounded too (issue 32)', async () => {
    const { app, post, registry } = await httpSetup({ total: { capacity: 6, refillPerSecond: 0.001 } });
    const statuses: number[] = [];
    for (const address of ['10.0.0.1', '10.0.0.2', '10.0.0.3', '10.0.0.4'])
      for (let i = 0; i < 2; i++)
        statuses.push(
          (await post('/v1/attestations/zzzzzz/challenge', challengeBody(), {}, address)).statusCode,
        );
    // Each address is within its own budget (4); all of them together are not (6).
    assert.deepEqual(statuses, [404, 404, 404, 404, 404, 404, 429, 429]);
    const metrics = await registry.metrics();
    assert.match(metrics, /nodeflavor_issuer_rate_limited_total\{scope="attestation-total"\} 2/);
    await app.close();
  });
});

// Issue 32: a record is worth something by itself since attested joins, so only the issuer's own
// records (sealed: src/flavor/attestation-seal.ts) are attested; of two answers at the same instant
// one wins; a flood of refusals costs no writes; an EK certificate is checked again at each step.
describe('who may create a record, one winner per proof, floods (issue 32)', () => {
  /** A FlavoredToken as someone with `create` on FlavoredTokens writes it, without the issuer. */
  async function handWritten(t: Setup, tokenId: string, attestation: Record<string, unknown>) {
    return t.kube.createFlavoredToken(
      tokenRecord(
        tokenId,
        {
          flavorClassName: 'sweet',
          maxUses: 1,
          expiresAt: iso(T0 + 3_600_000),
          attestation: { allowRejoin: false, ...attestation } as never,
        },
        {},
      ),
    );
  }

  it('a FlavoredToken written directly, bound to a software "EK" its writer holds: no credential, no Secret, no flavor token', async () => {
    const t = await setup();
    const ek = ekWithPrivateKey();
    await handWritten(t, 'abcdef', { ekPublicKey: ek.pem });
    // The writer plays the machine in software, as far as the issuer lets it.
    const outcome = await challenge(t.deps, 'abcdef', challengeBody(ek.tpm2bPublic)).then(
      async (challenged) => {
        const recovered = activateCredential(ek, challenged.credential, AK_NAME);
        assert.ok(recovered);
        const proof = answerProof({ reveal: () => recovered.toString('hex') } as Secret, challenged.ticket);
        return answer(t.deps, 'abcdef', { ticket: challenged.ticket, proof });
      },
      (error: unknown) => error,
    );
    assert.ok(
      outcome instanceof IssuerError,
      `the issuer answered the hand-made record: ${JSON.stringify(outcome)}`,
    );
    assert.equal(outcome.status, 403);
    assert.match(outcome.message, /not established by the issuer \(no valid seal\)/);
    assert.equal(t.kube.secrets.size, 0, 'no bootstrap Secret');
    assert.deepEqual(t.outcomes, ['Unsealed']);
  });

  it("a seal is worth nothing on another record: copied with the facts onto a record of the writer's own", async () => {
    const t = await setup();
    const issued = await issueAttested(t);
    const sealed = record(t, issued);
    const copy = await handWritten(t, 'zzzzzz', sealed.spec.attestation ?? {});
    copy.metadata.annotations = { ...sealed.metadata.annotations };
    t.kube.tokens.set(copy.metadata.name ?? '', copy);
    await refusedWith(challenge(t.deps, 'zzzzzz', challengeBody()), 403, /no valid seal/);
    // The issuer's own record is answered.
    assert.ok(await challenge(t.deps, issued.tokenId, challengeBody()));
  });

  const RACE_CALLS = new Set([
    'getFlavoredToken',
    'annotateFlavoredToken',
    'createBootstrapSecret',
    'deleteBootstrapSecret',
  ]);
  for (const gapMs of [0, 1]) {
    it(`a machine and a clone of its TPM state, challenged ${gapMs} ms apart, answer at once: one 200, one 409, in every order`, async () => {
      const runs = await everyInterleaving({
        setup: async (turn) => {
          const t = await setup();
          const issued = await issueAttested(t);
          const first = await challenge(t.deps, issued.tokenId, challengeBody());
          t.advance(gapMs);
          const second = await challenge(t.deps, issued.tokenId, challengeBody());
          const machine = await nodeAnswer(t, first);
          const clone = await nodeAnswer(t, second);
          const as = (actor: string) => ({ ...t.deps, kube: gated(t.kube, actor, turn, RACE_CALLS) });
          return {
            state: { t, issued, secrets: { machine: machine.secret, clone: clone.secret } },
            actors: {
              machine: () => answer(as('machine'), issued.tokenId, machine.body),
              clone: () => answer(as('clone'), issued.tokenId, clone.body),
            },
          };
        },
        check: ({ t, issued, secrets }, run) => {
          const won = Object.entries(run.results).filter(([, r]) => r.ok);
          assert.equal(won.length, 1, `exactly one answer wins: ${run.trace.join(' ')}`);
          const [winner, result] = won[0] as [keyof typeof secrets, { ok: true; value: AnswerResponse }];
          const lost = Object.values(run.results).find((r) => !r.ok);
          assert.ok(
            lost && !lost.ok && lost.error instanceof IssuerError && lost.error.status === 409,
            run.trace.join(' '),
          );
          // The winner's Secret is the one that exists: its answer opens to the stored token.
          const opened = openJoinSecrets(secrets[winner], result.value);
          assert.equal(
            opened?.bootstrapToken.reveal(),
            `${issued.tokenId}.${t.kube.secrets.get(issued.tokenId)?.secret}`,
          );
          assert.equal(annotation(record(t, issued), ATTESTED_ANNOTATION)?.count, 1, 'one proof recorded');
        },
      });
      assert.ok(runs > 10, `${runs} interleavings`);
    });
  }

  it("a proof's time is recorded to the millisecond: the controller compares a CSR's second with it exactly", async () => {
    const t = await setup();
    const issued = await issueAttested(t);
    const challenged = await challenge(t.deps, issued.tokenId, challengeBody());
    t.advance(5_250);
    await answer(t.deps, issued.tokenId, (await nodeAnswer(t, challenged)).body);
    assert.equal(annotation(record(t, issued), ATTESTED_ANNOTATION)?.at, '2030-01-01T00:00:05.250Z');
  });

  it('many rounds of the same race, unscheduled: never two winners', async () => {
    for (let round = 0; round < 50; round++) {
      const t = await setup();
      const issued = await issueAttested(t);
      const bodies = [];
      for (let i = 0; i < 2; i++) {
        bodies.push((await nodeAnswer(t, await challenge(t.deps, issued.tokenId, challengeBody()))).body);
        t.advance(round % 3);
      }
      const results = await Promise.allSettled(bodies.map((body) => answer(t.deps, issued.tokenId, body)));
      assert.equal(results.filter((r) => r.status === 'fulfilled').length, 1, `round ${round}`);
      assert.equal(t.kube.secrets.size, 1);
    }
  });

  it('a flood of refusals on two replicas writes one record: the losers of the conditional write are only counted', async () => {
    const t = await setup();
    const issued = await issueAttested(t);
    const challenged = await challenge(t.deps, issued.tokenId, challengeBody());
    const bad = { ticket: challenged.ticket, proof: '0'.repeat(64) };
    const replica = (name: string) => ({ ...t.deps, kube: gated(t.kube, name, async () => {}, new Set()) });
    const replicas = [replica('a'), replica('b')];
    const before = Number(record(t, issued).metadata.resourceVersion);
    const results = await Promise.allSettled(
      Array.from({ length: 40 }, (_, i) => answer(replicas[i % 2] as AttestationDeps, issued.tokenId, bad)),
    );
    assert.ok(results.every((r) => r.status === 'rejected'));
    assert.equal(t.outcomes.filter((o) => o === 'BadProof').length, 40, 'every refusal is counted');
    assert.equal(Number(record(t, issued).metadata.resourceVersion) - before, 1, 'one write landed');
    assert.ok(
      refusalWrites(t).length <= 2,
      `at most one attempt per replica, not ${refusalWrites(t).length}`,
    );
    assert.equal(t.events.filter((e) => e.reason === 'AttestationRefused').length, 1, 'one Warning Event');
  });

  it('an EK certificate is checked again at each challenge and answer: an intermediate revoked since refuses (403)', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'nodeflavor-attest-recheck-'));
    try {
      const root = await makeCa('Recheck Root CA');
      const intermediate = await makeCa('Recheck EK CA', { issuer: root, pathLength: 0 });
      const ekCert = await makeEkCertificate(intermediate, ekSpkiDer({ tpm2bPublic: EK_PUB }), {
        subjectAltName: subjectAltNameOf(fixture('ek-cert.der')),
      });
      const caFile = join(dir, 'cas.pem');
      const crlFile = join(dir, 'crls.pem');
      writeFileSync(caFile, certificatesPem(root.cert));
      writeFileSync(crlFile, certificatesPem(await makeCrl(root, [])));
      const files = { url: ISSUER_URL, manufacturerCaFile: caFile, manufacturerCrlFile: crlFile };
      const t = await setup({ attestation: files });
      const watched = attestationFiles(files, { recheckMs: 0 });
      t.issuance.attestationFiles = watched;
      t.deps.attestationFiles = watched;
      // The caller presents the intermediate with the EK certificate; only the root is configured.
      const issued = await issueToken(t.issuance, {
        flavorClassName: 'sweet',
        ttl: '1h',
        attestation: { ekCertificate: certificatesPem(ekCert, intermediate.cert) },
      });
      const early = await challenge(t.deps, issued.tokenId, challengeBody());
      writeFileSync(crlFile, certificatesPem(await makeCrl(root, [intermediate.cert])));
      // Re-read when it changed (in the background): the next challenges find it revoked.
      let refused: unknown;
      for (const deadline = Date.now() + 10_000; refused === undefined && Date.now() < deadline; ) {
        await challenge(t.deps, issued.tokenId, challengeBody()).catch((error: unknown) => {
          refused = error;
        });
        await new Promise((resolve) => setTimeout(resolve, 5));
      }
      assert.ok(refused instanceof IssuerError && refused.status === 403, String(refused));
      assert.match(
        refused.message,
        /EK certificate token \w+ is bound by is refused now: revoked: CA "CN=Recheck EK CA/,
      );
      // A challenge made before the revocation earns nothing either: the answer checks again.
      await refusedWith(answer(t.deps, issued.tokenId, (await nodeAnswer(t, early)).body), 403, /revoked/);
      assert.equal(t.kube.secrets.size, 0);
      assert.equal(
        annotation(record(t, issued), ATTESTATION_REFUSED_ANNOTATION)?.reason,
        'EKCertificateRefused',
      );
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
