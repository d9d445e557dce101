// One redaction list for every logger of the process (src/runtime/log.ts): the controller's, the
// admission guard's and the issuer's lines never carry a secret-bearing field's value.
import assert from 'node:assert/strict';
import { Writable } from 'node:stream';
import { describe, it } from 'node:test';
import { createLogger, REDACTED_PATHS } from '../../src/runtime/log.ts';

function captured(component: string) {
  const lines: Record<string, unknown>[] = [];
  const stream = new Writable({
    write(chunk, _encoding, done) {
      lines.push(JSON.parse(String(chunk)));
      done();
    },
  });
  return { log: createLogger(component, 'info', stream), lines };
}

describe('every logger redacts the same secret-bearing fields', () => {
  for (const component of ['nodeflavor', 'token-issuer']) {
    it(`${component}: top-level and nested secrets are censored, the rest kept`, async () => {
      const { log, lines } = captured(component);
      log.info(
        {
          token: 'abcdef.0123456789abcdef',
          flavorToken: 'x'.repeat(52),
          secret: 's3cret',
          key: 'k',
          request: { authorization: 'Bearer t', token: 't', joinConfiguration: 'yaml' },
          node: 'edge-1',
        },
        'joined',
      );
      await new Promise((resolve) => setImmediate(resolve));
      const line = lines[0] as Record<string, unknown>;
      assert.equal(line.component, component);
      for (const field of ['token', 'flavorToken', 'secret', 'key'])
        assert.equal(line[field], '[redacted]', field);
      assert.deepEqual(line.request, {
        authorization: '[redacted]',
        token: '[redacted]',
        joinConfiguration: '[redacted]',
      });
      assert.equal(line.node, 'edge-1');
      assert.doesNotMatch(JSON.stringify(line), /0123456789abcdef|s3cret|Bearer/);
    });
  }
  it('the list covers what the issuer and the controller pass around', () => {
    for (const path of ['req.headers.authorization', '*.token', '*.secret', '*.flavorToken', '*.cloudInit'])
      assert.ok(REDACTED_PATHS.includes(path), path);
  });
});
