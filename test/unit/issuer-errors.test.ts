import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ApiException } from '@kubernetes/client-node';
import { KubeError, toKubeError } from '../../src/runtime/kube-error.ts';
import { errorBody, fromKubeError, IssuerError, toIssuerError } from '../../src/tokenissuer/errors.ts';

const status = (code: number, reason: string, message: string) => ({ kind: 'Status', code, reason, message });

describe('toKubeError', () => {
  it('reads the Status from an object body', () => {
    const error = toKubeError(
      new ApiException(
        404,
        'Unknown API Status Code!',
        status(404, 'NotFound', 'flavorclasses "x" not found'),
        {},
      ),
      "get FlavorClass 'x'",
    );
    assert.equal(error.status, 404);
    assert.equal(error.reason, 'NotFound');
    assert.equal(error.message, `get FlavorClass 'x': HTTP 404 NotFound: flavorclasses "x" not found`);
  });

  it('reads the Status from a JSON string body', () => {
    const body = JSON.stringify(status(403, 'Forbidden', 'secrets is forbidden: User "u" cannot create'));
    const error = toKubeError(new ApiException(403, 'Unknown API Status Code!', body, {}), 'create Secret');
    assert.equal(error.status, 403);
    assert.equal(error.reason, 'Forbidden');
    assert.match(error.message, /^create Secret: HTTP 403 Forbidden: secrets is forbidden/);
  });

  it('falls back to a reason from the status code when there is no body', () => {
    const error = toKubeError(new ApiException(401, 'Unauthorized', undefined, {}), 'list FlavoredTokens');
    assert.equal(error.reason, 'Unauthorized');
    assert.equal(error.message, 'list FlavoredTokens: HTTP 401 Unauthorized');
  });

  it('never copies the response headers or a non-Status body into the message', () => {
    const error = toKubeError(
      new ApiException(500, 'Unknown API Status Code!', 'not json <html>', {
        'set-cookie': 'session=s3cr3t',
      }),
      'x',
    );
    assert.doesNotMatch(error.message, /s3cr3t|html/);
  });

  it('reports a request that got no answer as status 0, Unreachable, with the cause', () => {
    const error = toKubeError(
      Object.assign(new TypeError('fetch failed'), {
        cause: new Error('connect ECONNREFUSED 127.0.0.1:6443'),
      }),
      'list Nodes',
    );
    assert.equal(error.status, 0);
    assert.equal(error.reason, 'Unreachable');
    assert.match(error.message, /unreachable \(connect ECONNREFUSED/);
  });

  it('passes a KubeError through', () => {
    const original = new KubeError(409, 'AlreadyExists', 'x');
    assert.equal(toKubeError(original, 'y'), original);
  });
});

describe('issuer errors', () => {
  it('maps Kubernetes failures the caller could not avoid to 503 or 500', () => {
    assert.equal(fromKubeError(new KubeError(0, 'Unreachable', 'down')).status, 503);
    assert.equal(fromKubeError(new KubeError(503, 'ServiceUnavailable', 'busy')).status, 503);
    const forbidden = fromKubeError(new KubeError(403, 'Forbidden', 'create Secret: forbidden'));
    assert.equal(forbidden.status, 500);
    assert.match(forbidden.message, /check the token issuer's RBAC/);
    assert.equal(fromKubeError(new KubeError(422, 'Invalid', 'bad')).status, 500);
  });

  it('hides the message of an unexpected error', () => {
    const error = toIssuerError(new Error('at Object.<anonymous> (/srv/x.ts:1:1) secret=abc'));
    assert.equal(error.status, 500);
    assert.equal(error.message, 'internal error: see the token issuer log');
  });

  it('renders {error: {code, message, fields?}}', () => {
    assert.deepEqual(errorBody(new IssuerError('NotFound', 'gone')), {
      error: { code: 'NotFound', message: 'gone' },
    });
    assert.deepEqual(errorBody(new IssuerError('InvalidRequest', 'bad', [{ field: 'ttl', message: 'no' }])), {
      error: { code: 'InvalidRequest', message: 'bad', fields: [{ field: 'ttl', message: 'no' }] },
    });
  });
});
