import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import fc from 'fast-check';
import { TOKEN_ID_PATTERN, TOKEN_SECRET_PATTERN } from '../../src/flavor/bootstrap-token.ts';
import { deriveFlavorToken } from '../../src/flavor/flavor-token.ts';
import {
  type IdempotentRequest,
  idempotencyMark,
  idempotentBootstrapToken,
  idempotentTokenId,
  matchIdempotencyMark,
} from '../../src/flavor/idempotent-issuance.ts';
import { activateKey, addKey, newKeyRing, retireKey } from '../../src/flavor/keyring.ts';
import { seededRandomBytes } from './support/random.ts';

const ring = newKeyRing(seededRandomBytes('idempotent'));
const request: IdempotentRequest = {
  caller: 'sha256:portal',
  idempotencyKey: 'order-4711',
  requestFingerprint: 'f'.repeat(64),
};

describe('idempotent issuance: what any replica derives again', () => {
  test('the same request derives the same token ID and, for one record, the same secret', () => {
    const id = idempotentTokenId(ring.active, request);
    assert.match(id, TOKEN_ID_PATTERN);
    assert.equal(idempotentTokenId(ring.active, { ...request }), id);
    const a = idempotentBootstrapToken(ring.active, request, id, 'uid-1');
    const b = idempotentBootstrapToken(ring.active, { ...request }, id, 'uid-1');
    assert.match(a.secret.reveal(), TOKEN_SECRET_PATTERN);
    assert.equal(a.secret.reveal(), b.secret.reveal());
  });

  test('another caller or key derives another token ID; the body does not (a reuse is found, then refused)', () => {
    const id = idempotentTokenId(ring.active, request);
    assert.notEqual(idempotentTokenId(ring.active, { ...request, caller: 'sha256:other' }), id);
    assert.notEqual(idempotentTokenId(ring.active, { ...request, idempotencyKey: 'order-4712' }), id);
    assert.equal(idempotentTokenId(ring.active, { ...request, requestFingerprint: 'e'.repeat(64) }), id);
  });

  test('a record made again after a deletion (another UID) gets another secret: a revoked one never returns', () => {
    const id = idempotentTokenId(ring.active, request);
    const first = idempotentBootstrapToken(ring.active, request, id, 'uid-1').secret.reveal();
    const again = idempotentBootstrapToken(ring.active, request, id, 'uid-2').secret.reveal();
    assert.notEqual(first, again);
  });

  test('another ring key derives something else entirely', () => {
    const other = newKeyRing(seededRandomBytes('other ring'));
    assert.notEqual(idempotentTokenId(other.active, request), idempotentTokenId(ring.active, request));
    assert.notEqual(idempotencyMark(other.active, request), idempotencyMark(ring.active, request));
  });

  test('the mark names the key and holds no secret: neither the token secret nor the flavor token', () => {
    const id = idempotentTokenId(ring.active, request);
    const mark = idempotencyMark(ring.active, request);
    assert.match(mark, /^[0-9a-f]{8}\.[a-z2-7]{26}\.[a-z2-7]{26}$/);
    assert.ok(mark.startsWith(`${ring.active.id}.`));
    const secret = idempotentBootstrapToken(ring.active, request, id, 'uid-1').secret.reveal();
    const flavorToken = deriveFlavorToken(ring.active, id, 'sweet').reveal();
    for (const part of mark.split('.')) {
      assert.ok(!secret.includes(part) && !part.includes(secret));
      assert.ok(!flavorToken.includes(part));
    }
    assert.ok(!mark.includes(request.idempotencyKey), 'the Idempotency-Key itself is not stored');
  });

  test('token IDs spread like random ones (no collisions among 2,000 keys)', () => {
    const ids = new Set<string>();
    for (let i = 0; i < 2000; i++)
      ids.add(idempotentTokenId(ring.active, { ...request, idempotencyKey: `key-${i}` }));
    assert.equal(ids.size, 2000);
  });
});

describe('matchIdempotencyMark', () => {
  const mark = idempotencyMark(ring.active, request);

  test('a retry: the same caller, key and body, under the key that issued it', () => {
    const match = matchIdempotencyMark(mark, ring, request);
    assert.equal(match.kind, 'same-request');
    assert.equal(match.kind === 'same-request' && match.key.id, ring.active.id);
  });

  test('the same caller and key with another body', () => {
    assert.deepEqual(matchIdempotencyMark(mark, ring, { ...request, requestFingerprint: 'e'.repeat(64) }), {
      kind: 'other-request',
    });
  });

  test('another caller, another key, no mark, a malformed one, a retired key: foreign', () => {
    const foreign = { kind: 'foreign' };
    assert.deepEqual(matchIdempotencyMark(mark, ring, { ...request, caller: 'sha256:mallory' }), foreign);
    assert.deepEqual(matchIdempotencyMark(mark, ring, { ...request, idempotencyKey: 'x' }), foreign);
    assert.deepEqual(matchIdempotencyMark(undefined, ring, request), foreign);
    assert.deepEqual(matchIdempotencyMark(`${mark}x`, ring, request), foreign);
    const { ring: grown, id } = addKey(ring, seededRandomBytes('next'));
    const rotated = retireKey(activateKey(grown, id), ring.active.id);
    assert.deepEqual(matchIdempotencyMark(mark, rotated, request), foreign);
  });

  test('after a rotation the old (verify-only) key still recognises its records', () => {
    const { ring: grown, id } = addKey(ring, seededRandomBytes('next'));
    const rotated = activateKey(grown, id);
    const match = matchIdempotencyMark(mark, rotated, request);
    assert.equal(match.kind === 'same-request' && match.key.id, ring.active.id);
  });

  test('property: any change of caller or key is foreign, of the body only is other-request', () => {
    fc.assert(
      fc.property(fc.string({ minLength: 1 }), fc.string({ minLength: 1 }), (caller, key) => {
        const other = { caller, idempotencyKey: key, requestFingerprint: request.requestFingerprint };
        const kind = matchIdempotencyMark(mark, ring, other).kind;
        const same = caller === request.caller && key === request.idempotencyKey;
        return same ? kind === 'same-request' : kind === 'foreign';
      }),
    );
  });
});
