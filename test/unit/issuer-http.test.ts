// The HTTP layer on fakes (fastify inject, no TLS): status codes, error shape, rate limits,
// idempotency and log hygiene. The same paths run against a real API server in test/e2e/issuer.test.ts.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { type IssuerConfigInput, parseIssuerConfig } from '../../src/tokenissuer/config.ts';
import { buildIssuerApp } from '../../src/tokenissuer/server.ts';
import { clusterInfoKubeconfig, FakeReviews, FakeTokenKube, fakeKeyRing } from './support/issuer-fakes.ts';

async function setup(overrides: Partial<IssuerConfigInput> = {}) {
  const kube = new FakeTokenKube(await clusterInfoKubeconfig());
  kube.addFlavor('sweet');
  kube.addFlavor('sour');
  const reviews = new FakeReviews();
  reviews.addUser('portal-token', 'portal', ['sweet']);
  reviews.addUser('admin-token', 'admin', ['sweet', 'sour', 'bitter']);
  const logs: string[] = [];
  const { app, registry } = buildIssuerApp(
    parseIssuerConfig({ tls: { certPem: 'x', keyPem: 'y' }, ...overrides }),
    {
      kube,
      reviews,
      keyRing: fakeKeyRing(),
      logStream: { write: (line: string) => logs.push(line) },
    },
  );
  const post = (body: unknown, headers: Record<string, string> = {}, token = 'portal-token') =>
    app.inject({
      method: 'POST',
      url: '/v1/tokens',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json', ...headers },
      payload: typeof body === 'string' ? body : JSON.stringify(body),
    });
  return { app, kube, reviews, logs, post, registry };
}

interface InjectedResponse {
  statusCode: number;
  json: () => unknown;
  body: string;
}

function assertError(response: InjectedResponse, status: number, code: string) {
  assert.equal(response.statusCode, status, response.body);
  const body = response.json() as { error: { code: string; message: string } };
  assert.equal(body.error.code, code);
  assert.ok(body.error.message.length > 0);
  assert.doesNotMatch(response.body, /\bat [\w.<>]+ \(|node:internal|\.ts:\d+/, 'no stack trace');
}

describe('token issuer HTTP API', () => {
  it('issues: 201, no-store, Location, the documented keys, no flavor name', async () => {
    const { post, kube } = await setup();
    const response = await post({ flavorClassName: 'sweet' });
    assert.equal(response.statusCode, 201);
    assert.equal(response.headers['cache-control'], 'no-store');
    const body = response.json() as Record<string, string>;
    assert.equal(response.headers.location, `/v1/tokens/${body.id}`);
    assert.deepEqual(Object.keys(body), [
      'id',
      'tokenID',
      'expiresAt',
      'apiServerEndpoint',
      'caCertHash',
      'bootstrapToken',
      'flavorToken',
      'joinConfiguration',
      'joinCommand',
      'cloudInit',
      'discovery',
      'discoveryKubeconfig',
      'discoveryKubeconfigPath',
      'attested',
      'attestScript',
    ]);
    assert.equal(body.attested, false);
    assert.equal(body.attestScript, null);
    assert.doesNotMatch(response.body, /sweet/);
    assert.equal(kube.tokens.size, 1);
  });

  it('answers sweet and sour with the same keys and byte length', async () => {
    const { post } = await setup();
    const sweet = await post({ flavorClassName: 'sweet' }, {}, 'admin-token');
    const sour = await post({ flavorClassName: 'sour' }, {}, 'admin-token');
    assert.deepEqual(Object.keys(sweet.json() as object), Object.keys(sour.json() as object));
    assert.equal(sweet.rawPayload.length, sour.rawPayload.length);
  });

  type Setup = Awaited<ReturnType<typeof setup>>;
  const failures: [string, (s: Setup) => Promise<InjectedResponse>, number, string][] = [
    ['400 for a bad body', (s) => s.post({ flavorClassName: 'sweet', ttl: 'soon' }), 400, 'InvalidRequest'],
    ['400 for malformed JSON', (s) => s.post('{"flavorClassName":'), 400, 'InvalidRequest'],
    [
      '401 without credentials',
      (s) => s.app.inject({ method: 'POST', url: '/v1/tokens', payload: {} }),
      401,
      'Unauthenticated',
    ],
    [
      '401 for an unknown token',
      (s) => s.post({ flavorClassName: 'sweet' }, {}, 'nope'),
      401,
      'Unauthenticated',
    ],
    ['403 for a flavor the caller may not use', (s) => s.post({ flavorClassName: 'sour' }), 403, 'Forbidden'],
    [
      '404 for an unknown flavor',
      (s) => s.post({ flavorClassName: 'bitter' }, {}, 'admin-token'),
      404,
      'NotFound',
    ],
    [
      '413 for a large body',
      (s) => s.post({ flavorClassName: 'sweet', description: 'x'.repeat(20_000) }),
      413,
      'PayloadTooLarge',
    ],
    [
      '415 for a body that is not JSON',
      (s) => s.post('flavor=sweet', { 'content-type': 'application/x-www-form-urlencoded' }),
      415,
      'UnsupportedMediaType',
    ],
    [
      '404 for an unknown route',
      (s) => s.app.inject({ method: 'GET', url: '/v2/whatever' }),
      404,
      'NotFound',
    ],
  ];
  for (const [what, call, status, code] of failures) {
    it(`answers ${what}, minting nothing`, async () => {
      const s = await setup();
      assertError(await call(s), status, code);
      assert.equal(s.kube.tokens.size + s.kube.secrets.size, 0);
    });
  }

  it('names the failing fields in a 400', async () => {
    const { post } = await setup();
    const response = await post({ flavorClassName: 'sweet', maxUses: -2, colour: 'red' });
    const body = response.json() as { error: { fields: { field: string }[] } };
    assert.deepEqual(body.error.fields.map((f) => f.field).sort(), ['colour', 'maxUses']);
  });

  it('replays an Idempotency-Key retry and refuses the key with another body (409)', async () => {
    const { post, kube } = await setup();
    const first = await post({ flavorClassName: 'sweet' }, { 'idempotency-key': 'order-42' });
    const retry = await post({ flavorClassName: 'sweet' }, { 'idempotency-key': 'order-42' });
    assert.equal(retry.statusCode, 201);
    assert.equal(retry.body, first.body);
    assert.equal(kube.tokens.size, 1);
    const other = await post({ flavorClassName: 'sweet', maxUses: 2 }, { 'idempotency-key': 'order-42' });
    assertError(other, 409, 'Conflict');
    assert.equal(kube.tokens.size, 1);
  });

  it('rate limits per caller with 429 and Retry-After', async () => {
    const { app } = await setup({ rateLimit: { perCaller: { capacity: 2, refillPerSecond: 0.01 } } });
    const get = (token: string) =>
      app.inject({ method: 'GET', url: '/v1/flavors', headers: { authorization: `Bearer ${token}` } });
    assert.equal((await get('portal-token')).statusCode, 200);
    assert.equal((await get('portal-token')).statusCode, 200);
    const limited = await get('portal-token');
    assertError(limited, 429, 'RateLimited');
    assert.ok(Number(limited.headers['retry-after']) >= 1);
    assert.equal((await get('admin-token')).statusCode, 200, 'other callers are not affected');
  });

  it('stops reviewing tokens from an address after too many failed authentications', async () => {
    const { app, reviews } = await setup({
      rateLimit: { unauthenticatedPerAddress: { capacity: 2, refillPerSecond: 0.01 } },
    });
    const get = (token: string) =>
      app.inject({ method: 'GET', url: '/v1/flavors', headers: { authorization: `Bearer ${token}` } });
    assert.equal((await get('wrong-1')).statusCode, 401);
    assert.equal((await get('wrong-2')).statusCode, 401);
    const limited = await get('wrong-3');
    assertError(limited, 429, 'RateLimited');
    assert.match(limited.body, /too many failed authentications from your address: retry in \d+ s/);
    assert.ok(Number(limited.headers['retry-after']) >= 1);
    assert.equal(reviews.reviewCalls, 2);
    // The same bad token again is refused from memory: 401, no review, no budget.
    assert.equal((await get('wrong-1')).statusCode, 401);
    assert.equal(reviews.reviewCalls, 2);
  });

  it('N bad tokens at once cost at most the budget in reviews (reserved before the review)', async () => {
    const { app, reviews } = await setup({
      rateLimit: { unauthenticatedPerAddress: { capacity: 3, refillPerSecond: 0.001 } },
    });
    const answers = await Promise.all(
      Array.from({ length: 40 }, (_, i) =>
        app.inject({ method: 'GET', url: '/v1/flavors', headers: { authorization: `Bearer bad-${i}` } }),
      ),
    );
    assert.equal(reviews.reviewCalls, 3);
    assert.equal(answers.filter((a) => a.statusCode === 401).length, 3);
    assert.equal(answers.filter((a) => a.statusCode === 429).length, 37);
  });

  it('a flood of bad tokens from a shared address does not lock out a caller known there', async () => {
    const { app, reviews } = await setup({
      auth: { cacheSeconds: 0 }, // every request is reviewed: the known-bearer rule alone lets it through
      rateLimit: { unauthenticatedPerAddress: { capacity: 2, refillPerSecond: 0.001 } },
    });
    const get = (token: string) =>
      app.inject({ method: 'GET', url: '/v1/flavors', headers: { authorization: `Bearer ${token}` } });
    assert.equal((await get('portal-token')).statusCode, 200);
    for (let i = 0; i < 5; i++) await get(`bad-${i}`);
    assert.equal((await get('bad-x')).statusCode, 429, 'the address is over its budget');
    assert.equal((await get('portal-token')).statusCode, 200, 'the known caller is reviewed and served');
    assert.equal((await get('admin-token')).statusCode, 429, 'a caller not yet known there waits');
    assert.equal(reviews.reviewCalls, 4);
  });

  it('behind a trusted proxy, the budget is kept per forwarded client; elsewhere X-Forwarded-For is ignored', async () => {
    const { app } = await setup({
      trustedProxies: ['10.0.0.0/8'],
      rateLimit: { unauthenticatedPerAddress: { capacity: 1, refillPerSecond: 0.001 } },
    });
    const get = (token: string, remoteAddress: string, forwardedFor?: string) =>
      app.inject({
        method: 'GET',
        url: '/v1/flavors',
        remoteAddress,
        headers: {
          authorization: `Bearer ${token}`,
          ...(forwardedFor ? { 'x-forwarded-for': forwardedFor } : {}),
        },
      });
    assert.equal((await get('bad-1', '10.1.1.1', '198.51.100.7')).statusCode, 401);
    assert.equal((await get('bad-2', '10.1.1.1', '198.51.100.7')).statusCode, 429);
    // A spoofed entry left of the one the proxy appended changes nothing.
    assert.equal((await get('bad-3', '10.1.1.1', '198.51.100.8, 198.51.100.7')).statusCode, 429);
    // Another client behind the same proxy has a budget of its own, new valid callers included.
    assert.equal((await get('admin-token', '10.2.2.2', '198.51.100.8')).statusCode, 200);
    assert.equal((await get('bad-4', '10.1.1.1', '198.51.100.9')).statusCode, 401);
    // An untrusted peer is its own address whatever it forwards.
    assert.equal((await get('bad-5', '192.0.2.1', '198.51.100.10')).statusCode, 401);
    assert.equal((await get('bad-6', '192.0.2.1', '198.51.100.11')).statusCode, 429);
  });

  it('lists only the flavors the caller may use', async () => {
    const { app } = await setup();
    const response = await app.inject({
      method: 'GET',
      url: '/v1/flavors',
      headers: { authorization: 'Bearer portal-token' },
    });
    assert.deepEqual(response.json(), { items: [{ name: 'sweet', description: null }] });
  });

  it('serves the discovery kubeconfig to authenticated callers only, the same one issuance hands out', async () => {
    const { app, post, kube } = await setup();
    const anonymous = await app.inject({ method: 'GET', url: '/v1/discovery' });
    assertError(anonymous, 401, 'Unauthenticated');
    const response = await app.inject({
      method: 'GET',
      url: '/v1/discovery',
      headers: { authorization: 'Bearer portal-token' },
    });
    assert.equal(response.statusCode, 200);
    assert.equal(kube.tokens.size, 0, 'reading it issues nothing');
    const info = response.json() as { discovery: string; kubeconfig: string; kubeconfigPath: string };
    const issued = (await post({ flavorClassName: 'sweet' })).json() as Record<string, string>;
    assert.equal(info.discovery, 'file');
    assert.equal(info.kubeconfig, issued.discoveryKubeconfig);
    assert.equal(info.kubeconfigPath, issued.discoveryKubeconfigPath);
  });

  it('gets and revokes a token only for the caller that issued it (404 for anyone else)', async () => {
    const { app, post, kube, reviews } = await setup();
    reviews.addUser('other-token', 'other-portal', ['sweet', 'sour']);
    const issued = (await post({ flavorClassName: 'sour' }, {}, 'admin-token')).json() as {
      id: string;
      tokenID: string;
    };
    const as = (token: string, method: 'GET' | 'DELETE', id = issued.id) =>
      app.inject({ method, url: `/v1/tokens/${id}`, headers: { authorization: `Bearer ${token}` } });
    // Not theirs: the same answer as for a token that does not exist, even with `use` on sour.
    const missing = await as('other-token', 'GET', 'zzzzzz');
    for (const token of ['portal-token', 'other-token']) {
      for (const id of [issued.id, issued.tokenID]) {
        for (const method of ['GET', 'DELETE'] as const) {
          const answer = await as(token, method, id);
          assertError(answer, 404, 'NotFound');
          assert.equal(answer.body.replace(id, 'zzzzzz'), missing.body);
        }
      }
    }
    assert.equal(kube.secrets.size, 1);
    const status = await as('admin-token', 'GET', issued.tokenID);
    assert.equal(status.statusCode, 200);
    assert.equal((status.json() as { flavor: string }).flavor, 'sour');
    const revoked = await as('admin-token', 'DELETE');
    assert.equal((revoked.json() as { state: string }).state, 'Revoked');
    assert.equal(kube.secrets.size, 0);
    assertError(await as('admin-token', 'GET', 'zzzzzz'), 404, 'NotFound');
  });

  it('a caller whose RBAC covers FlavoredTokens sees and revokes any token, verb by verb', async () => {
    // No caching of answers: the test changes the grants between requests.
    const { app, post, kube, reviews } = await setup({ auth: { cacheSeconds: 0 } });
    reviews.addUser('auditor-token', 'auditor', []);
    const issued = (await post({ flavorClassName: 'sweet' })).json() as { id: string; tokenID: string };
    const as = (method: 'GET' | 'DELETE', id = issued.tokenID) =>
      app.inject({ method, url: `/v1/tokens/${id}`, headers: { authorization: 'Bearer auditor-token' } });
    reviews.rbac.set('auditor', new Set([`get flavoredtokens/${issued.id}`]));
    assert.equal((await as('GET')).statusCode, 200);
    assertError(await as('DELETE'), 404, 'NotFound');
    assert.equal(kube.secrets.size, 1);
    reviews.rbac.set('auditor', new Set([`delete flavoredtokens/${issued.id}`]));
    assert.equal(((await as('DELETE')).json() as { state: string }).state, 'Revoked');
    assert.equal(kube.secrets.size, 0);
    // A token that does not exist costs the same SubjectAccessReview as another caller's token.
    const before = reviews.accessReviews.length;
    assertError(await as('GET', 'zzzzzz'), 404, 'NotFound');
    assert.deepEqual(reviews.accessReviews.at(-1)?.check, {
      group: 'nodeflavor.io',
      resource: 'flavoredtokens',
      verb: 'get',
      name: 'ft-zzzzzz',
    });
    assert.equal(reviews.accessReviews.length, before + 1);
  });

  it('records the owner on the FlavoredToken; JWT and Kubernetes callers never share one', async () => {
    const { post, kube } = await setup();
    const issued = (await post({ flavorClassName: 'sweet' })).json() as { id: string };
    const annotations = kube.tokens.get(issued.id)?.metadata.annotations ?? {};
    assert.match(annotations['nodeflavor.io/owner'] ?? '', /^sha256:[A-Za-z0-9_-]{43}$/);
    assert.equal(annotations['nodeflavor.io/requested-by'], 'portal');
  });

  it('logs no token, flavor token or bearer credential', async () => {
    const { post, logs } = await setup();
    const body = (await post({ flavorClassName: 'sweet' })).json() as {
      bootstrapToken: string;
      flavorToken: string;
    };
    await post({ flavorClassName: 'sweet' }, {}, 'nope');
    const text = logs.join('');
    assert.ok(text.includes('token issued'));
    for (const secret of [
      body.bootstrapToken,
      body.bootstrapToken.split('.')[1] ?? '',
      body.flavorToken,
      'portal-token',
    ]) {
      assert.ok(!text.includes(secret), 'a secret reached the log');
    }
  });

  it('serves health, readiness and its OpenAPI document without credentials', async () => {
    const { app, registry } = await setup();
    assert.equal((await app.inject({ url: '/healthz' })).statusCode, 200);
    assert.equal((await app.inject({ url: '/readyz' })).statusCode, 200);
    const openapi = await app.inject({ url: '/openapi.json' });
    assert.equal((openapi.json() as { openapi: string }).openapi, '3.1.0');
    const metrics = await registry.metrics();
    assert.match(
      metrics,
      /nodeflavor_issuer_http_requests_total\{method="GET",route="\/healthz",status="200"\} 1/,
    );
    assert.doesNotMatch(metrics, /sweet|sour/);
  });
});
