// State the issuer keeps per caller is keyed by the caller's identity (Caller.owner: Kubernetes
// username + uid, or JWT iss + sub), never by a name: a ServiceAccount deleted and re-created under
// the same name gets nothing of the first one (no replayed answer, which holds a token's secrets;
// its own rate-limit budget and watch slots), and two JWT subjects sharing a username claim are
// two callers. On fakes (fastify inject), as issuer-http.test.ts.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { SignJWT } from 'jose';
import { type IssuerConfigInput, parseIssuerConfig } from '../../src/tokenissuer/config.ts';
import { jwtOwner, kubernetesOwner } from '../../src/tokenissuer/defences/auth.ts';
import { buildIssuerApp } from '../../src/tokenissuer/server.ts';
import {
  clusterInfoKubeconfig,
  FakeFeed,
  FakeReviews,
  FakeTokenKube,
  fakeKeyRing,
} from './support/issuer-fakes.ts';

const dir = mkdtempSync(join(tmpdir(), 'issuer-identity-'));
after(() => rmSync(dir, { recursive: true, force: true }));
const SHARED = 'a-shared-secret-of-at-least-32-bytes!!';
writeFileSync(join(dir, 'hs256'), SHARED);
const JWT_ISSUER = 'https://portal.example';

/** One ServiceAccount name, two lives: the first deleted, the second created with a new uid. */
const SA = 'system:serviceaccount:edge:portal';

async function setup(overrides: Partial<IssuerConfigInput> = {}) {
  const kube = new FakeTokenKube(await clusterInfoKubeconfig());
  kube.addFlavor('sweet');
  const reviews = new FakeReviews();
  reviews.addUser('first-life', SA, ['sweet'], { user: { uid: 'uid-1' } });
  reviews.addUser('second-life', SA, ['sweet'], { user: { uid: 'uid-2' } });
  // A Kubernetes user whose name is what a JWT caller's username looks like.
  reviews.addUser('lookalike', 'jwt:edge', ['sweet'], { user: { uid: 'uid-3' } });
  const feed = new FakeFeed(kube);
  const { app } = buildIssuerApp(
    parseIssuerConfig({
      tls: { certPem: 'x', keyPem: 'y' },
      logLevel: 'silent',
      auth: {
        jwt: {
          issuer: JWT_ISSUER,
          audience: 'nodeflavor',
          hs256SecretFile: join(dir, 'hs256'),
          usernameClaim: 'preferred_username',
        },
      },
      ...overrides,
    }),
    { kube, reviews, keyRing: fakeKeyRing(), tokens: feed },
  );
  const post = (bearer: string, headers: Record<string, string> = {}) =>
    app.inject({
      method: 'POST',
      url: '/v1/tokens',
      headers: { authorization: `Bearer ${bearer}`, 'content-type': 'application/json', ...headers },
      payload: JSON.stringify({ flavorClassName: 'sweet' }),
    });
  const get = (bearer: string, url = '/v1/flavors') =>
    app.inject({ method: 'GET', url, headers: { authorization: `Bearer ${bearer}` } });
  return { app, kube, reviews, feed, post, get };
}

/** A JWT of the portal's issuer for subject `sub` (none when undefined) with username claim `edge`. */
function jwt(sub: string | undefined): Promise<string> {
  const token = new SignJWT({ preferred_username: 'edge', 'nodeflavor.io/flavors': ['sweet'] })
    .setProtectedHeader({ alg: 'HS256' })
    .setIssuer(JWT_ISSUER)
    .setAudience('nodeflavor')
    .setExpirationTime('5m');
  return (sub === undefined ? token : token.setSubject(sub)).sign(new TextEncoder().encode(SHARED));
}

type Issued = { id: string; tokenID: string; bootstrapToken: string };

describe('a ServiceAccount re-created under the same name (new uid) gets nothing of the first', () => {
  it('no replayed idempotent answer: the same Idempotency-Key issues a token of its own', async () => {
    const { post, reviews, kube } = await setup();
    const first = await post('first-life', { 'idempotency-key': 'order-1' });
    assert.equal(first.statusCode, 201, first.body);
    reviews.users.delete('first-life'); // the ServiceAccount is deleted, then re-created
    const second = await post('second-life', { 'idempotency-key': 'order-1' });
    assert.equal(second.statusCode, 201, second.body);
    const [a, b] = [first.json() as Issued, second.json() as Issued];
    assert.notEqual(b.bootstrapToken, a.bootstrapToken, "the first life's secret was replayed to the second");
    assert.notEqual(b.tokenID, a.tokenID);
    assert.equal(kube.tokens.size, 2);
    assert.equal(
      kube.tokens.get(b.id)?.metadata.annotations?.['nodeflavor.io/owner'],
      kubernetesOwner({ username: SA, uid: 'uid-2' }),
    );
  });

  it('a fresh rate-limit budget', async () => {
    const { get } = await setup({ rateLimit: { perCaller: { capacity: 2, refillPerSecond: 0.001 } } });
    assert.equal((await get('first-life')).statusCode, 200);
    assert.equal((await get('first-life')).statusCode, 200);
    assert.equal((await get('first-life')).statusCode, 429, 'the first life used its budget up');
    const second = await get('second-life');
    assert.equal(second.statusCode, 200, `the second life inherited the first's budget: ${second.body}`);
  });

  it('its own watch slots', async () => {
    const { post, get, feed, app } = await setup({ watches: { perCaller: 1 } });
    const mine = (await post('first-life')).json() as Issued;
    const theirs = (await post('second-life')).json() as Issued;
    const watching = get('first-life', `/v1/tokens/${mine.id}?watch=true&timeoutSeconds=2`);
    while (!feed.listeners.get(mine.id)?.size) await new Promise((r) => setImmediate(r));
    const second = await get('second-life', `/v1/tokens/${theirs.id}?watch=true&timeoutSeconds=1`);
    assert.equal(second.statusCode, 200, `the second life shares the first's slots: ${second.body}`);
    assert.equal((await watching).statusCode, 200);
    // And it does not see the first life's token at all.
    assert.equal((await get('second-life', `/v1/tokens/${mine.id}`)).statusCode, 404);
    await app.close();
  });
});

describe('JWT callers are their issuer and subject, not their username claim', () => {
  it('two subjects with the same username claim are two callers: own answers, own budgets, own tokens', async () => {
    const { post, get, kube } = await setup({
      rateLimit: { perCaller: { capacity: 2, refillPerSecond: 0.001 } },
    });
    const [alice, bob] = [await jwt('alice'), await jwt('bob')];
    const a = await post(alice, { 'idempotency-key': 'order-7' });
    const b = await post(bob, { 'idempotency-key': 'order-7' });
    assert.equal(a.statusCode, 201, a.body);
    assert.equal(b.statusCode, 201, b.body);
    assert.notEqual((b.json() as Issued).bootstrapToken, (a.json() as Issued).bootstrapToken);
    const owners = [...kube.tokens.values()].map((t) => t.metadata.annotations?.['nodeflavor.io/owner']);
    assert.deepEqual(owners.sort(), [jwtOwner(JWT_ISSUER, 'alice'), jwtOwner(JWT_ISSUER, 'bob')].sort());
    // Each has made one request (the POST) of the two the budget allows.
    assert.equal((await get(alice)).statusCode, 200);
    assert.equal((await get(alice)).statusCode, 429, 'alice used her budget up');
    assert.equal((await get(bob)).statusCode, 200, "bob's budget is his own");
  });

  it('a Kubernetes user named like a JWT caller ("jwt:edge") shares nothing with it', async () => {
    const { post } = await setup();
    const a = await post(await jwt('alice'), { 'idempotency-key': 'order-8' });
    const k = await post('lookalike', { 'idempotency-key': 'order-8' });
    assert.equal(k.statusCode, 201, k.body);
    assert.notEqual((k.json() as Issued).bootstrapToken, (a.json() as Issued).bootstrapToken);
  });

  it('a JWT without `sub` is refused (401): the username claim never stands in for the identity', async () => {
    const { post, kube } = await setup();
    const response = await post(await jwt(undefined));
    assert.equal(response.statusCode, 401);
    assert.equal(kube.tokens.size, 0);
  });
});
