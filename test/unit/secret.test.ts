import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { inspect } from 'node:util';
import { Secret } from '../../src/flavor/secret.ts';

describe('Secret', () => {
  const secret = new Secret('hunter2-very-secret');

  it('reveals the value only when asked', () => {
    assert.equal(secret.reveal(), 'hunter2-very-secret');
  });

  const renderings: Record<string, () => string> = {
    'String()': () => String(secret),
    'template literal': () => `${secret}`,
    'string concatenation': () => 'x' + secret,
    'JSON.stringify of a holder': () => JSON.stringify({ s: secret }),
    'util.inspect': () => inspect(secret),
    'util.inspect of a holder, deep': () =>
      inspect({ nested: { s: secret } }, { depth: 10, showHidden: true }),
    'Object.keys / spread': () => JSON.stringify({ ...secret, keys: Object.keys(secret) }),
  };
  for (const [name, render] of Object.entries(renderings)) {
    it(`never leaks through ${name}`, () => {
      const text = render();
      assert.ok(!text.includes('hunter2'), text);
    });
  }

  it('renders as [redacted]', () => {
    assert.equal(String(secret), '[redacted]');
    assert.equal(`${secret}`, '[redacted]');
    assert.equal(JSON.stringify({ s: secret }), '{"s":"[redacted]"}');
    assert.equal(inspect(secret), '[redacted]');
  });
});
