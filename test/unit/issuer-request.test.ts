import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { IssuerError } from '../../src/tokenissuer/errors.ts';
import { validateIssueRequest } from '../../src/tokenissuer/request.ts';

const NOW = new Date('2030-01-01T00:00:00Z');
const LIMITS = { maxTtl: '168h' };

function fieldsOf(input: unknown): Record<string, string> {
  try {
    validateIssueRequest(input, LIMITS, NOW);
  } catch (error) {
    assert.ok(error instanceof IssuerError);
    assert.equal(error.code, 'InvalidRequest');
    assert.equal(error.status, 400);
    return Object.fromEntries((error.fields ?? []).map((f) => [f.field, f.message]));
  }
  assert.fail('expected the request to be refused');
}

describe('validateIssueRequest', () => {
  it('accepts a minimal request and defaults maxUses to 1', () => {
    assert.deepEqual(validateIssueRequest({ flavorClassName: 'sweet' }, LIMITS, NOW), {
      flavorClassName: 'sweet',
      maxUses: 1,
    });
  });

  it('accepts every field', () => {
    const request = {
      flavorClassName: 'sweet',
      ttl: '1h30m',
      maxUses: 0,
      nodeNamePattern: 'pool-a-*',
      description: 'for the pool',
    };
    assert.deepEqual(validateIssueRequest(request, LIMITS, NOW), request);
  });

  const refused: [string, unknown, Record<string, RegExp>][] = [
    ['a missing flavor', {}, { flavorClassName: /is required/ }],
    ['a flavor that is not a name', { flavorClassName: 'Sweet!' }, { flavorClassName: /DNS subdomain/ }],
    ['an unknown field', { flavorClassName: 'sweet', flavour: 'x' }, { flavour: /not a known field/ }],
    ['a bad ttl', { flavorClassName: 'sweet', ttl: '1d' }, { ttl: /h, m and s/ }],
    ['a ttl over maxTtl', { flavorClassName: 'sweet', ttl: '200h' }, { ttl: /at most 168h/ }],
    ['a ttl too short to use', { flavorClassName: 'sweet', ttl: '1s' }, { ttl: /at least 5s/ }],
    [
      'ttl and expiresAt',
      { flavorClassName: 'sweet', ttl: '1h', expiresAt: '2030-01-01T01:00:00Z' },
      { expiresAt: /at most one/ },
    ],
    [
      'an expiry in the past',
      { flavorClassName: 'sweet', expiresAt: '2029-12-31T00:00:00Z' },
      { expiresAt: /future/ },
    ],
    [
      'an expiry too far ahead',
      { flavorClassName: 'sweet', expiresAt: '2030-02-01T00:00:00Z' },
      { expiresAt: /at most 168h/ },
    ],
    ['a negative maxUses', { flavorClassName: 'sweet', maxUses: -1 }, { maxUses: /./ }],
    ['a fractional maxUses', { flavorClassName: 'sweet', maxUses: 1.5 }, { maxUses: /./ }],
    [
      'nodeName and nodeNamePattern',
      { flavorClassName: 'sweet', nodeName: 'a', nodeNamePattern: 'a*' },
      { nodeNamePattern: /at most one/ },
    ],
    [
      'a bad pattern',
      { flavorClassName: 'sweet', nodeNamePattern: 'Pool_?' },
      { nodeNamePattern: /lowercase/ },
    ],
    ['a long description', { flavorClassName: 'sweet', description: 'x'.repeat(513) }, { description: /./ }],
    ['a body that is not an object', ['sweet'], { '(body)': /./ }],
  ];
  for (const [what, input, expected] of refused) {
    it(`refuses ${what}, naming the field`, () => {
      const fields = fieldsOf(input);
      for (const [field, message] of Object.entries(expected)) {
        assert.match(fields[field] ?? '', message, `field ${field} in ${JSON.stringify(fields)}`);
      }
    });
  }

  it('lists every failing field at once', () => {
    const fields = fieldsOf({ flavorClassName: 'sweet', ttl: 'x', maxUses: 'two', extra: true });
    assert.deepEqual(Object.keys(fields).sort(), ['extra', 'maxUses', 'ttl']);
  });
});
