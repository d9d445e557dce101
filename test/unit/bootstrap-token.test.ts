import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import {
  bootstrapSecretName,
  formatBootstrapToken,
  generateBootstrapToken,
  parseBootstrapToken,
  randomString,
  TOKEN_ALPHABET,
  TOKEN_ID_PATTERN,
  TOKEN_SECRET_PATTERN,
} from '../../src/flavor/bootstrap-token.ts';
import { countingRandomBytes, cyclingBytes, seededRandomBytes } from './support/random.ts';

function rejectionMessage(text: string): string {
  try {
    parseBootstrapToken(text);
  } catch (error) {
    assert.ok(error instanceof Error);
    return error.message;
  }
  assert.fail('the token was accepted');
}

/**
 * A parse must refuse `text` with an error that cannot carry it: the message is one constant,
 * whatever the input (a substring check alone would trip on inputs like " " that occur in any prose).
 */
const CANONICAL_MESSAGE = rejectionMessage('');
function assertRejectedQuietly(text: string): void {
  const message = rejectionMessage(text);
  assert.equal(message, CANONICAL_MESSAGE);
  if (text.length >= 6) assert.ok(!message.includes(text), 'the error echoes the input');
}

describe('generateBootstrapToken', () => {
  it('matches the token patterns (property over seeds)', () => {
    fc.assert(
      fc.property(fc.string(), (seed) => {
        const token = generateBootstrapToken(seededRandomBytes(seed));
        assert.match(token.id, TOKEN_ID_PATTERN);
        assert.match(token.secret.reveal(), TOKEN_SECRET_PATTERN);
      }),
      { numRuns: 300 },
    );
  });

  it('uses crypto.randomBytes by default and does not repeat', () => {
    const tokens = Array.from({ length: 200 }, () => formatBootstrapToken(generateBootstrapToken()));
    assert.equal(new Set(tokens).size, tokens.length);
    for (const token of tokens) assert.match(token, /^[a-z0-9]{6}\.[a-z0-9]{16}$/);
  });

  it('keeps the secret out of logs', () => {
    const token = generateBootstrapToken();
    assert.ok(!JSON.stringify(token).includes(token.secret.reveal()));
  });
});

describe('randomString (rejection sampling)', () => {
  it('gives every character exactly equally often when every byte value is equally likely', () => {
    const cycles = 100;
    // Each cycle of 256 byte values holds 252 accepted bytes, 7 per character.
    const { randomBytes, consumed } = countingRandomBytes(cyclingBytes());
    const text = randomString(TOKEN_ALPHABET, 252 * cycles, randomBytes);
    const counts = new Map<string, number>();
    for (const char of text) counts.set(char, (counts.get(char) ?? 0) + 1);
    assert.equal(counts.size, 36);
    for (const char of TOKEN_ALPHABET) assert.equal(counts.get(char), 7 * cycles, `count of '${char}'`);
    // 256 bytes per cycle, less the 4 rejected ones after the last accepted byte (251) it never needed.
    assert.ok(consumed() >= 256 * cycles - 4);
  });

  it('consumes bytes ≥ 252 without mapping them', () => {
    const bytes = [252, 253, 254, 255, 0, 255, 35, 251, 36];
    const { randomBytes, consumed } = countingRandomBytes(() => bytes.shift() ?? 0);
    // 252..255 rejected, 0→'a', 255 rejected, 35→'9', 251 (=6·36+35)→'9', 36→'a'
    assert.equal(randomString(TOKEN_ALPHABET, 4, randomBytes), 'a99a');
    assert.equal(consumed(), 9);
  });

  it('maps byte b to alphabet[b % 36] for every accepted byte', () => {
    for (let byte = 0; byte < 252; byte++) {
      const text = randomString(TOKEN_ALPHABET, 1, () => Buffer.from([byte]));
      assert.equal(text, TOKEN_ALPHABET[byte % 36]);
    }
  });

  it('rejects an unusable alphabet or length', () => {
    const randomBytes = seededRandomBytes('x');
    assert.throws(() => randomString('a', 4, randomBytes), /alphabet/);
    assert.throws(() => randomString('aab', 4, randomBytes), /alphabet/);
    assert.throws(() => randomString('ab', -1, randomBytes), /length/);
    assert.throws(() => randomString('ab', 1.5, randomBytes), /length/);
    assert.equal(randomString('ab', 0, randomBytes), '');
  });
});

describe('formatBootstrapToken / parseBootstrapToken', () => {
  it('round-trips (property)', () => {
    fc.assert(
      fc.property(fc.string(), (seed) => {
        const token = generateBootstrapToken(seededRandomBytes(seed));
        const parsed = parseBootstrapToken(formatBootstrapToken(token));
        assert.equal(parsed.id, token.id);
        assert.equal(parsed.secret.reveal(), token.secret.reveal());
      }),
      { numRuns: 300 },
    );
  });

  it('parses the documented example', () => {
    const token = parseBootstrapToken('abcdef.0123456789abcdef');
    assert.equal(token.id, 'abcdef');
    assert.equal(token.secret.reveal(), '0123456789abcdef');
  });

  const malformed: Record<string, string> = {
    empty: '',
    'no dot': 'abcdef0123456789abcdef',
    'short id': 'abcde.0123456789abcdef',
    'long id': 'abcdefg.0123456789abcdef',
    'short secret': 'abcdef.0123456789abcde',
    'long secret': 'abcdef.0123456789abcdef0',
    uppercase: 'ABCDEF.0123456789abcdef',
    'trailing newline': 'abcdef.0123456789abcdef\n',
    'leading space': ' abcdef.0123456789abcdef',
    'colon separator': 'abcdef:0123456789abcdef',
    'two dots': 'abcdef.01234567.89abcdef',
    'non-ASCII': 'abcdéf.0123456789abcdef',
  };
  for (const [name, text] of Object.entries(malformed)) {
    it(`rejects ${name} without echoing it`, () => assertRejectedQuietly(text));
  }

  it('rejects arbitrary non-token strings without echoing them (property)', () => {
    fc.assert(
      fc.property(
        fc.string({ minLength: 1, maxLength: 40 }).filter((s) => !/^[a-z0-9]{6}\.[a-z0-9]{16}$/.test(s)),
        assertRejectedQuietly,
      ),
    );
  });

  it('rejects a non-string at run time', () => {
    assert.throws(() => parseBootstrapToken(undefined as unknown as string), /invalid bootstrap token/);
  });
});

describe('Secret names', () => {
  it('builds the Secret name', () => {
    assert.equal(bootstrapSecretName('abcdef'), 'bootstrap-token-abcdef');
  });

  it('refuses to build it from an invalid id', () => {
    assert.throws(() => bootstrapSecretName('ABCDEF'), /invalid bootstrap token id/);
    assert.throws(() => bootstrapSecretName('abc'), /invalid bootstrap token id/);
  });
});
