import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import type { KeyRing } from '../../src/flavor/keyring.ts';
import {
  activateKey,
  addKey,
  describeKeyRing,
  generateHmacKey,
  KEY_ID_PATTERN,
  KeyRingEditError,
  keyRingFromSecretData,
  keyRingKeys,
  keyRingToSecretData,
  newKeyRing,
  retireKey,
  rotateKeyRing,
} from '../../src/flavor/keyring.ts';
import { seededRandomBytes } from './support/random.ts';

const b64 = (text: string | Buffer): string => Buffer.from(text).toString('base64');

function ids(ring: KeyRing): string[] {
  return keyRingKeys(ring).map((key) => key.id);
}

function assertSameRing(actual: KeyRing, expected: KeyRing): void {
  assert.deepEqual(ids(actual), ids(expected));
  keyRingKeys(actual).forEach((key, i) => {
    assert.ok(key.key.equals(keyRingKeys(expected)[i]!.key), `key bytes of ${key.id}`);
  });
}

describe('generateHmacKey / newKeyRing', () => {
  it('makes 32-byte keys with 8-hex-character ids', () => {
    const key = generateHmacKey();
    assert.match(key.id, KEY_ID_PATTERN);
    assert.equal(key.key.length, 32);
    assert.notDeepEqual(generateHmacKey().key, key.key);
  });

  it('starts a ring with no verify-only keys', () => {
    const ring = newKeyRing();
    assert.equal(ring.verifyOnly.length, 0);
  });
});

describe('rotateKeyRing', () => {
  it('makes a new active key and retires the old one, newest first', () => {
    const first = newKeyRing();
    const second = rotateKeyRing(first);
    const third = rotateKeyRing(second);
    assert.notEqual(second.active.id, first.active.id);
    assert.deepEqual(ids(third), [third.active.id, second.active.id, first.active.id]);
  });

  it('keeps at most maxRetained verify-only keys, dropping the oldest', () => {
    let ring = newKeyRing();
    const actives = [ring.active.id];
    for (let i = 0; i < 6; i++) {
      ring = rotateKeyRing(ring);
      actives.unshift(ring.active.id);
    }
    assert.deepEqual(ids(ring), actives.slice(0, 4)); // active + 3 retained by default
    assert.deepEqual(ids(rotateKeyRing(ring, 1)).slice(1), [ring.active.id]);
    assert.deepEqual(rotateKeyRing(ring, 0).verifyOnly, []);
  });

  it('does not modify the ring it is given', () => {
    const ring = rotateKeyRing(newKeyRing());
    const before = ids(ring);
    rotateKeyRing(ring, 0);
    assert.deepEqual(ids(ring), before);
  });

  it('never reuses a key id that is still in the ring', () => {
    const ring = newKeyRing();
    // A random source whose first key repeats the current id; the rotation must draw again.
    const replay = [Buffer.from(ring.active.id, 'hex'), Buffer.alloc(32, 1), Buffer.from('01020304', 'hex')];
    const fresh = seededRandomBytes('fresh');
    const rotated = rotateKeyRing(ring, 3, (size) => replay.shift() ?? fresh(size));
    assert.equal(rotated.active.id, '01020304');
  });

  it('rejects a negative or fractional maxRetained', () => {
    assert.throws(() => rotateKeyRing(newKeyRing(), -1), /maxRetained/);
    assert.throws(() => rotateKeyRing(newKeyRing(), 1.5), /maxRetained/);
  });
});

describe('Secret data', () => {
  it('round-trips rings of any size (property)', () => {
    fc.assert(
      fc.property(fc.string(), fc.nat(6), fc.nat(4), (seed, rotations, maxRetained) => {
        const randomBytes = seededRandomBytes(seed);
        let ring = newKeyRing(randomBytes);
        for (let i = 0; i < rotations; i++) ring = rotateKeyRing(ring, maxRetained, randomBytes);
        const data = keyRingToSecretData(ring);
        for (const value of Object.values(data)) assert.match(value, /^[A-Za-z0-9+/]*={0,2}$/);
        assertSameRing(keyRingFromSecretData(data), ring);
      }),
      { numRuns: 200 },
    );
  });

  it('uses the documented layout', () => {
    const ring = rotateKeyRing(newKeyRing());
    const data = keyRingToSecretData(ring);
    assert.deepEqual(
      Object.keys(data).sort(),
      ['active', `key.${ring.active.id}`, `key.${ring.verifyOnly[0]!.id}`, 'verifyOnly'].sort(),
    );
    assert.equal(data['active'], b64(ring.active.id));
    assert.equal(data['verifyOnly'], b64(ring.verifyOnly[0]!.id));
    assert.equal(data[`key.${ring.active.id}`], ring.active.key.toString('base64'));
  });

  it('accepts a hand-made Secret without verifyOnly (the other keys, sorted by id)', () => {
    const key = (fill: number): string => b64(Buffer.alloc(32, fill));
    const ring = keyRingFromSecretData({
      active: b64('0000000a'),
      'key.0000000a': key(1),
      'key.0000000c': key(3),
      'key.0000000b': key(2),
    });
    assert.deepEqual(ids(ring), ['0000000a', '0000000b', '0000000c']);
    assert.deepEqual(ring.verifyOnly[0]!.key, Buffer.alloc(32, 2));
  });

  const goodKey = b64(Buffer.alloc(32, 7));
  const secretKeyBytes = Buffer.alloc(31, 0xab);
  const malformed: Record<string, { data: Record<string, string>; error: RegExp }> = {
    'missing active': { data: { 'key.0000000a': goodKey }, error: /'active' is missing/ },
    'active key absent': {
      data: { active: b64('0000000b'), 'key.0000000a': goodKey },
      error: /active key '0000000b' has no entry 'key.0000000b'/,
    },
    'key too short': {
      data: { active: b64('0000000a'), 'key.0000000a': b64(secretKeyBytes) },
      error: /'key.0000000a' holds 31 bytes, expected 32/,
    },
    'key too long': {
      data: { active: b64('0000000a'), 'key.0000000a': b64(Buffer.alloc(33)) },
      error: /holds 33 bytes, expected 32/,
    },
    'bad key id in an entry name': {
      data: { active: b64('0000000a'), 'key.0000000a': goodKey, 'key.XYZ': goodKey },
      error: /entry 'key.XYZ' is not a key id/,
    },
    'bad active id': {
      data: { active: b64('not-an-id'), 'key.0000000a': goodKey },
      error: /'active' is not a key id/,
    },
    'active not base64': {
      data: { active: '!!!', 'key.0000000a': goodKey },
      error: /'active' is not valid base64/,
    },
    'key not base64': {
      data: { active: b64('0000000a'), 'key.0000000a': `${goodKey}#` },
      error: /'key.0000000a' is not valid base64/,
    },
    'unexpected entry': {
      data: { active: b64('0000000a'), 'key.0000000a': goodKey, extra: 'eA==' },
      error: /unexpected entry 'extra'/,
    },
    'verifyOnly lists the active key': {
      data: { active: b64('0000000a'), 'key.0000000a': goodKey, verifyOnly: b64('0000000a') },
      error: /lists '0000000a', the active key/,
    },
    'verifyOnly lists an unknown key': {
      data: { active: b64('0000000a'), 'key.0000000a': goodKey, verifyOnly: b64('0000000b') },
      error: /lists '0000000b', a key without an entry 'key.0000000b'/,
    },
    'verifyOnly lists a key twice': {
      data: {
        active: b64('0000000a'),
        'key.0000000a': goodKey,
        'key.0000000b': goodKey,
        verifyOnly: b64('0000000b,0000000b'),
      },
      error: /lists '0000000b', a key listed twice/,
    },
    'a key missing from verifyOnly': {
      data: {
        active: b64('0000000a'),
        'key.0000000a': goodKey,
        'key.0000000b': goodKey,
        verifyOnly: b64(''),
      },
      error: /'key.0000000b' neither active nor listed in 'verifyOnly'/,
    },
  };
  for (const [name, { data, error }] of Object.entries(malformed)) {
    it(`rejects ${name} with a clear error that holds no key bytes`, () => {
      assert.throws(
        () => keyRingFromSecretData(data),
        (thrown: unknown) => {
          assert.ok(thrown instanceof Error);
          assert.match(thrown.message, error);
          assert.ok(thrown.message.startsWith('HMAC key Secret: '));
          for (const value of [goodKey, b64(secretKeyBytes)]) assert.ok(!thrown.message.includes(value));
          return true;
        },
      );
    });
  }
});

describe('ring edits: addKey / activateKey / retireKey', () => {
  it('add → activate → retire is a rotation: the new key signs, the old verifies until retired', () => {
    const first = newKeyRing();
    const { ring: added, id } = addKey(first);
    assert.equal(added.active.id, first.active.id, 'an added key signs nothing yet');
    assert.deepEqual(ids(added), [first.active.id, id]);
    const activated = activateKey(added, id);
    assert.equal(activated.active.id, id);
    assert.deepEqual(
      ids(activated),
      [id, first.active.id],
      'the old active key is the newest verify-only key',
    );
    const retired = retireKey(activated, first.active.id);
    assert.deepEqual(ids(retired), [id]);
    assertSameRing(keyRingFromSecretData(keyRingToSecretData(retired)), retired);
  });

  it('never reuses a key id, even when the random source repeats one', () => {
    const ring = newKeyRing(seededRandomBytes('a'));
    const { ring: added, id } = addKey(ring, seededRandomBytes('a'));
    assert.notEqual(id, ring.active.id);
    assert.equal(new Set(ids(added)).size, 2);
  });

  it('activating the active key changes nothing; activating a verify-only key keeps the order', () => {
    let ring = newKeyRing();
    for (let i = 0; i < 3; i++) ring = rotateKeyRing(ring);
    assert.equal(activateKey(ring, ring.active.id), ring);
    const oldest = ring.verifyOnly[2]!.id;
    const activated = activateKey(ring, oldest);
    assert.deepEqual(ids(activated), [
      oldest,
      ring.active.id,
      ring.verifyOnly[0]!.id,
      ring.verifyOnly[1]!.id,
    ]);
  });

  it('refuses to retire the active key or the last key, and unknown ids, naming the ids only', () => {
    const single = newKeyRing();
    assert.throws(
      () => retireKey(single, single.active.id),
      (error: Error) => {
        assert.ok(error instanceof KeyRingEditError);
        assert.match(error.message, /is the last key of the ring/);
        return true;
      },
    );
    const two = rotateKeyRing(single);
    assert.throws(() => retireKey(two, two.active.id), /is the active key: activate another key first/);
    assert.throws(() => retireKey(two, 'deadbeef'), /no key 'deadbeef' in the ring/);
    assert.throws(() => activateKey(two, 'deadbeef'), KeyRingEditError);
    for (const key of keyRingKeys(two)) {
      for (const attempt of [() => retireKey(two, two.active.id), () => activateKey(two, 'deadbeef')]) {
        assert.throws(attempt, (error: Error) => {
          assert.ok(!error.message.includes(key.key.toString('base64')), 'no key bytes in the message');
          assert.ok(!error.message.includes(key.key.toString('hex')), 'no key bytes in the message');
          return true;
        });
      }
    }
  });

  it('edits never change the ring they are given', () => {
    const ring = rotateKeyRing(newKeyRing());
    const before = JSON.stringify(describeKeyRing(ring));
    addKey(ring);
    activateKey(ring, ring.verifyOnly[0]!.id);
    retireKey(ring, ring.verifyOnly[0]!.id);
    assert.equal(JSON.stringify(describeKeyRing(ring)), before);
  });

  it('describeKeyRing shows ids and states only', () => {
    const ring = rotateKeyRing(newKeyRing());
    const summary = describeKeyRing(ring);
    assert.deepEqual(summary, [
      { id: ring.active.id, state: 'active' },
      { id: ring.verifyOnly[0]!.id, state: 'verify-only' },
    ]);
    assert.deepEqual(Object.keys(summary[0]!).sort(), ['id', 'state']);
  });
});
