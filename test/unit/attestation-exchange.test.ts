// The attested join's exchange (src/flavor/attestation-exchange.ts, ADR 0014), pure: tickets are
// canonical or nothing, the credential's secret S is bound to every ticket field and to the EK, a
// proof holds only for S and its ticket, and the sealed join secrets open only under S, unmodified,
// with the same lengths whatever the tokens.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
  answerProof,
  type ChallengeTicket,
  CREDENTIAL_BYTES,
  credentialSecret,
  decodeTicket,
  encodeTicket,
  newTicket,
  openJoinSecrets,
  proofHolds,
  type SealedJoinSecrets,
  sealJoinSecrets,
  ticketKey,
} from '../../src/flavor/attestation-exchange.ts';
import { formatBootstrapToken, generateBootstrapToken } from '../../src/flavor/bootstrap-token.ts';
import { deriveFlavorToken } from '../../src/flavor/flavor-token.ts';
import { generateHmacKey, newKeyRing, rotateKeyRing } from '../../src/flavor/keyring.ts';
import { Secret } from '../../src/flavor/secret.ts';
import { seededRandomBytes } from './support/random.ts';

const key = generateHmacKey(seededRandomBytes('exchange-key'));
const otherKey = generateHmacKey(seededRandomBytes('exchange-other-key'));
const EK_DIGEST = 'a'.repeat(64);
const AK_NAME = `000b${'8453837bb4537856b787200cd4727a7560970da329236e778bc009f9998957c3'}`;

function ticket(seed = 'ticket'): ChallengeTicket {
  return newTicket(
    {
      record: 'uid-1',
      key: key.id,
      issuedAt: 1_893_456_000_000,
      deadline: 1_893_456_060_000,
      akName: AK_NAME,
      proofs: 0,
    },
    seededRandomBytes(seed),
  );
}

/** base64url of arbitrary JSON text: what a node that edits the ticket could send. */
const asTicketText = (json: string) => Buffer.from(json, 'utf8').toString('base64url');

describe('challenge tickets', () => {
  it('round trip: a ticket decodes to itself, with a 22-character nonce from 16 random bytes', () => {
    const made = ticket();
    assert.equal(made.v, 1);
    assert.match(made.nonce, /^[A-Za-z0-9_-]{22}$/);
    const text = encodeTicket(made);
    assert.match(text, /^[A-Za-z0-9_-]+$/);
    assert.deepEqual(decodeTicket(text), made);
    assert.equal(encodeTicket(decodeTicket(text) as ChallengeTicket), text);
  });

  it('every ticket is different: the nonce makes it so', () => {
    assert.notEqual(encodeTicket(ticket('one')), encodeTicket(ticket('two')));
  });

  it('the encoding has a fixed field order whatever order the object was built in', () => {
    const made = ticket();
    const { proofs, akName, nonce, deadline, issuedAt, key: keyId, record, v } = made;
    assert.equal(
      encodeTicket({ proofs, akName, nonce, deadline, issuedAt, key: keyId, record, v }),
      encodeTicket(made),
    );
  });

  it('a non-canonical encoding of the same fields is no ticket', () => {
    const made = ticket();
    const json = JSON.parse(Buffer.from(encodeTicket(made), 'base64url').toString('utf8')) as Record<
      string,
      unknown
    >;
    const reordered = JSON.stringify(Object.fromEntries(Object.entries(json).reverse()));
    assert.equal(decodeTicket(asTicketText(reordered)), undefined, 'another field order');
    assert.equal(decodeTicket(asTicketText(JSON.stringify(json, null, 1))), undefined, 'whitespace');
    const exponent = JSON.stringify(json).replace(`"issuedAt":${made.issuedAt}`, '"issuedAt":1.893456e12');
    assert.notEqual(exponent, JSON.stringify(json));
    assert.equal(decodeTicket(asTicketText(exponent)), undefined, 'a number written otherwise');
    assert.equal(decodeTicket(`${encodeTicket(made)}A`), undefined, 'a trailing character');
    const padded = Buffer.from(JSON.stringify(json)).toString('base64');
    assert.equal(decodeTicket(padded.includes('=') ? padded : `${padded}=`), undefined, 'base64 padding');
  });

  it('a tampered or malformed ticket is no ticket', () => {
    const made = ticket();
    // The canonical JSON's fields, in its order: an edit keeps every other field where it was.
    const canonical = JSON.parse(Buffer.from(encodeTicket(made), 'base64url').toString('utf8')) as object;
    const edited = (change: Record<string, unknown>) =>
      asTicketText(JSON.stringify({ ...canonical, ...change }));
    // Sanity: the unedited re-encoding is accepted, so each refusal below is the edit's doing.
    assert.deepEqual(decodeTicket(edited({})), made);
    for (const [what, change] of [
      ['another version', { v: 2 }],
      ['an extra field', { flavor: 'sweet' }],
      ['a key that is not 8 hex digits', { key: 'ZZZZZZZZ' }],
      ['a short nonce', { nonce: 'abc' }],
      ['a negative issuedAt', { issuedAt: -1 }],
      ['a fractional deadline', { deadline: 1.5 }],
      ['a deadline as text', { deadline: String(made.deadline) }],
      ['an AK name that is not hex', { akName: 'not-hex' }],
      ['an empty record', { record: '' }],
    ] as const) {
      assert.equal(decodeTicket(edited(change)), undefined, what);
    }
    const { nonce: _dropped, ...withoutNonce } = canonical as ChallengeTicket;
    assert.equal(decodeTicket(asTicketText(JSON.stringify(withoutNonce))), undefined, 'a missing field');
    const text = encodeTicket(made);
    const flipped = `${text.slice(0, 10)}${text[10] === 'A' ? 'B' : 'A'}${text.slice(11)}`;
    const decoded = decodeTicket(flipped);
    // A flipped character either breaks the ticket or makes another one: never the same ticket.
    assert.ok(decoded === undefined || JSON.stringify(decoded) !== JSON.stringify(made));
    for (const notText of [undefined, null, 42, {}, ['x'], '', 'not base64url!', 'A'.repeat(1025)])
      assert.equal(decodeTicket(notText), undefined, JSON.stringify(notText));
  });
});

describe('credentialSecret', () => {
  it('is 32 bytes (hex), the same for the same inputs', () => {
    const made = ticket();
    const secret = credentialSecret(key, made, EK_DIGEST).reveal();
    assert.match(secret, /^[0-9a-f]{64}$/);
    assert.equal(Buffer.from(secret, 'hex').length, CREDENTIAL_BYTES);
    assert.equal(credentialSecret(key, structuredClone(made), EK_DIGEST).reveal(), secret);
  });

  it('changes with every field of the ticket, with the EK and with the key', () => {
    const made = ticket();
    const base = credentialSecret(key, made, EK_DIGEST).reveal();
    const variants: [string, ChallengeTicket][] = [
      ['record', { ...made, record: 'uid-2' }],
      ['key', { ...made, key: otherKey.id }],
      ['issuedAt', { ...made, issuedAt: made.issuedAt + 1 }],
      ['deadline', { ...made, deadline: made.deadline + 1 }],
      ['nonce', { ...made, nonce: ticket('another').nonce }],
      ['akName', { ...made, akName: `${AK_NAME.slice(0, -1)}4` }],
      ['proofs', { ...made, proofs: made.proofs + 1 }],
    ];
    const seen = new Set([base]);
    for (const [field, variant] of variants) {
      const secret = credentialSecret(key, variant, EK_DIGEST).reveal();
      assert.ok(!seen.has(secret), `a different ${field} derives a different secret`);
      seen.add(secret);
    }
    assert.notEqual(credentialSecret(key, made, 'b'.repeat(64)).reveal(), base, 'another EK');
    assert.notEqual(credentialSecret(otherKey, made, EK_DIGEST).reveal(), base, 'another ring key');
  });

  it('ticketKey finds the ring key the ticket names, and none once the ring dropped it', () => {
    let ring = newKeyRing(seededRandomBytes('ring-1'));
    const made = newTicket(
      { record: 'uid-1', key: ring.active.id, issuedAt: 0, deadline: 60_000, akName: AK_NAME, proofs: 0 },
      seededRandomBytes('t'),
    );
    assert.equal(ticketKey(ring, made), ring.active);
    const first = ring.active;
    ring = rotateKeyRing(ring, 1, seededRandomBytes('ring-2'));
    assert.equal(ticketKey(ring, made), first, 'a retired key still counts');
    ring = rotateKeyRing(ring, 0, seededRandomBytes('ring-3'));
    assert.equal(ticketKey(ring, made), undefined, 'a dropped key does not');
  });
});

describe('answerProof and proofHolds', () => {
  const made = ticket();
  const text = encodeTicket(made);
  const secret = credentialSecret(key, made, EK_DIGEST);
  const proof = answerProof(secret, text);

  it('holds for the proof made with S over the ticket text', () => {
    assert.match(proof, /^[0-9a-f]{64}$/);
    assert.equal(proofHolds(secret, text, proof), true);
  });

  it('fails for a proof under another secret or over another ticket', () => {
    const other = credentialSecret(key, made, 'b'.repeat(64));
    assert.equal(proofHolds(secret, text, answerProof(other, text)), false);
    const otherText = encodeTicket(ticket('another'));
    assert.equal(proofHolds(secret, text, answerProof(secret, otherText)), false);
    assert.equal(proofHolds(secret, otherText, proof), false);
    // The secret itself is not a proof.
    assert.equal(proofHolds(secret, text, secret.reveal()), false);
  });

  it('fails, without throwing, for anything malformed', () => {
    const flippedLast = `${proof.slice(0, -1)}${proof.endsWith('0') ? '1' : '0'}`;
    for (const presented of [
      flippedLast,
      proof.toUpperCase(),
      proof.slice(0, 63),
      `${proof}0`,
      ` ${proof}`,
      `${proof}\n`,
      '',
      'z'.repeat(64),
      undefined,
      null,
      64,
      { proof },
      [proof],
      Buffer.from(proof, 'ascii'),
    ]) {
      assert.equal(proofHolds(secret, text, presented), false, String(presented));
    }
  });
});

describe('sealJoinSecrets and openJoinSecrets', () => {
  const secret = credentialSecret(key, ticket(), EK_DIGEST);
  const random = seededRandomBytes('tokens');
  const joinSecrets = (flavor: string) => {
    const token = generateBootstrapToken(random);
    return {
      bootstrapToken: new Secret(formatBootstrapToken(token)),
      flavorToken: deriveFlavorToken(key, token.id, flavor),
    };
  };

  it('round trip: what is sealed under S opens under S to the same two tokens', () => {
    const tokens = joinSecrets('sweet');
    const sealed = sealJoinSecrets(secret, tokens, seededRandomBytes('salt'));
    const opened = openJoinSecrets(secret, sealed);
    assert.ok(opened);
    assert.equal(opened.bootstrapToken.reveal(), tokens.bootstrapToken.reveal());
    assert.equal(opened.flavorToken.reveal(), tokens.flavorToken.reveal());
  });

  it('holds neither token in the clear', () => {
    const tokens = joinSecrets('sweet');
    const text = JSON.stringify(sealJoinSecrets(secret, tokens));
    assert.ok(!text.includes(tokens.bootstrapToken.reveal()));
    assert.ok(!text.includes(tokens.bootstrapToken.reveal().slice(7)));
    assert.ok(!text.includes(tokens.flavorToken.reveal()));
  });

  it('opens to nothing under another secret, or with any byte of iv, ciphertext or mac changed', () => {
    const sealed = sealJoinSecrets(secret, joinSecrets('sweet'));
    assert.ok(openJoinSecrets(secret, sealed), 'sanity: the unmodified answer opens');
    const other = credentialSecret(otherKey, ticket(), EK_DIGEST);
    assert.equal(openJoinSecrets(other, sealed), undefined);
    const ciphertext = Buffer.from(sealed.ciphertext, 'base64');
    for (let index = 0; index < ciphertext.length; index += 7) {
      const flipped = Buffer.from(ciphertext);
      flipped[index] = (flipped[index] ?? 0) ^ 0x01;
      const tampered = { ...sealed, ciphertext: flipped.toString('base64') };
      assert.equal(openJoinSecrets(secret, tampered), undefined, `ciphertext byte ${index}`);
    }
    const flipHex = (hex: string, index: number) =>
      `${hex.slice(0, index)}${hex[index] === '0' ? '1' : '0'}${hex.slice(index + 1)}`;
    for (const index of [0, 17, 63])
      assert.equal(openJoinSecrets(secret, { ...sealed, mac: flipHex(sealed.mac, index) }), undefined);
    assert.equal(openJoinSecrets(secret, { ...sealed, mac: sealed.mac.slice(0, 62) }), undefined);
    for (const index of [0, 15])
      assert.equal(openJoinSecrets(secret, { ...sealed, salt: flipHex(sealed.salt, index) }), undefined);
  });

  it('has the same lengths whatever the tokens and the flavor: 8-byte salt, 77 bytes sealed, 32-byte MAC', () => {
    const shapes = new Set<string>();
    for (const flavor of ['a', 'sweet', 'a-much-longer-flavor-name-than-the-others', 'sour']) {
      for (let i = 0; i < 5; i++) {
        const tokens = joinSecrets(flavor);
        assert.equal(`${tokens.bootstrapToken.reveal()}\n${tokens.flavorToken.reveal()}\n`.length, 77);
        const sealed: SealedJoinSecrets = sealJoinSecrets(secret, tokens);
        assert.match(sealed.salt, /^[0-9a-f]{16}$/);
        assert.match(sealed.mac, /^[0-9a-f]{64}$/);
        assert.equal(Buffer.from(sealed.ciphertext, 'base64').length, 77);
        shapes.add(JSON.stringify(Object.entries(sealed).map(([name, value]) => [name, value.length])));
      }
    }
    assert.equal(shapes.size, 1, [...shapes].join(' | '));
  });

  it('a fresh salt (so key and IV) each time: the same tokens seal to different ciphertexts', () => {
    const tokens = joinSecrets('sweet');
    const a = sealJoinSecrets(secret, tokens);
    const b = sealJoinSecrets(secret, tokens);
    assert.notEqual(a.salt, b.salt);
    assert.notEqual(a.ciphertext, b.ciphertext);
  });
});
