// GET /v1/tokens and GET /v1/tokens/{id}?watch=true on fakes (fastify inject): whose tokens a
// caller sees, paging and the phase filter, query validation, and the event stream. The same
// routes run against a real API server and controller in test/e2e/issuer-lifecycle.test.ts.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { FlavoredToken, Join, NodeNameClaim } from '../../src/flavor/resources.ts';
import { parseIssuerConfig } from '../../src/tokenissuer/config.ts';
import { kubernetesOwner } from '../../src/tokenissuer/defences/auth.ts';
import { buildIssuerApp } from '../../src/tokenissuer/server.ts';
import { parseTokenListQuery, tokenPage } from '../../src/tokenissuer/tokens/token-list.ts';
import { sseEvent } from '../../src/tokenissuer/tokens/token-watch.ts';
import {
  clusterInfoKubeconfig,
  FakeFeed,
  FakeReviews,
  FakeTokenKube,
  fakeKeyRing,
} from './support/issuer-fakes.ts';

function stored(
  name: string,
  owner: string,
  flavor: string,
  created: string,
  status?: FlavoredToken['status'],
) {
  return {
    apiVersion: 'nodeflavor.io/v1alpha1' as const,
    kind: 'FlavoredToken' as const,
    metadata: {
      name,
      uid: `uid-${name}`,
      resourceVersion: '1',
      creationTimestamp: created,
      labels: { 'nodeflavor.io/token-id': name.slice(3) },
      annotations: { 'nodeflavor.io/owner': owner },
    },
    spec: {
      flavorClassName: flavor,
      maxUses: 1,
      revocationPolicy: 'Keep' as const,
      revoked: false,
      ttl: '24h',
    },
    ...(status ? { status } : {}),
  };
}

/** The join record a token's join under `nodeName` leaves (ADR 0016). */
function joinRecord(
  tokenName: string,
  nodeName: string,
  csrName: string,
  claimedAt: string,
  join: Partial<Join> = {},
): NodeNameClaim {
  const tokenID = tokenName.slice(3);
  return {
    apiVersion: 'nodeflavor.io/v1alpha1',
    kind: 'NodeNameClaim',
    metadata: { name: nodeName, labels: { 'nodeflavor.io/token-id': tokenID } },
    spec: { holder: { tokenName, tokenUID: `uid-${tokenName}`, tokenID, csrName, claimedAt } },
    status: { join: { tokenName, tokenID, csrName, ...join } },
  };
}

const PORTAL = kubernetesOwner({ username: 'portal', uid: 'p-uid' });
const OTHER = kubernetesOwner({ username: 'other', uid: 'o-uid' });

async function setup(withFeed = true) {
  const kube = new FakeTokenKube(await clusterInfoKubeconfig());
  kube.addFlavor('sweet');
  kube.addFlavor('sour');
  const reviews = new FakeReviews();
  reviews.addUser('portal-token', 'portal', ['sweet'], { user: { uid: 'p-uid' } });
  reviews.addUser('auditor-token', 'auditor', [], { user: { uid: 'a-uid' } });
  reviews.rbac.set('auditor', new Set(['list flavoredtokens/']));
  const feed = new FakeFeed(kube);
  // Three of the portal's own (one sour, which it may no longer use), and one of another caller.
  for (const t of [
    stored('ft-aaaaa1', PORTAL, 'sweet', '2030-01-01T00:00:01Z'),
    stored('ft-aaaaa2', PORTAL, 'sweet', '2030-01-01T00:00:02Z', {
      bindings: [{ nodeName: 'edge-2', csrName: 'csr-2', boundAt: '2030-01-01T00:01:00Z' }],
    }),
    stored('ft-aaaaa3', PORTAL, 'sweet', '2030-01-01T00:00:03Z'),
    stored('ft-aaaaa4', PORTAL, 'sour', '2030-01-01T00:00:04Z'),
    stored('ft-bbbbb1', OTHER, 'sweet', '2030-01-01T00:00:05Z'),
  ])
    kube.tokens.set(t.metadata.name, t);
  const edge2 = joinRecord('ft-aaaaa2', 'edge-2', 'csr-2', '2030-01-01T00:01:00Z');
  kube.records.set('edge-2', edge2);
  const { app } = buildIssuerApp(
    parseIssuerConfig({ tls: { certPem: 'x', keyPem: 'y' }, logLevel: 'silent', watches: { perCaller: 1 } }),
    {
      kube,
      reviews,
      keyRing: fakeKeyRing(),
      now: () => new Date('2030-01-01T01:00:00Z'),
      ...(withFeed ? { tokens: feed } : {}),
    },
  );
  const get = (url: string, token = 'portal-token') =>
    app.inject({ method: 'GET', url, headers: { authorization: `Bearer ${token}` } });
  return { app, kube, feed, get };
}

const ids = (body: unknown) => (body as { items: { id: string }[] }).items.map((i) => i.id);

describe('GET /v1/tokens', () => {
  it("lists only the caller's own tokens whose flavor it may still use, newest first, no secret", async () => {
    const { get } = await setup();
    const response = await get('/v1/tokens');
    assert.equal(response.statusCode, 200, response.body);
    assert.equal(response.headers['cache-control'], 'no-store');
    assert.deepEqual(ids(response.json()), ['ft-aaaaa3', 'ft-aaaaa2', 'ft-aaaaa1']);
    assert.doesNotMatch(response.body, /bootstrapToken|flavorToken|joinConfiguration/);
  });

  it('pages with an opaque cursor and filters by phase', async () => {
    const { get } = await setup();
    const first = (await get('/v1/tokens?limit=2')).json() as { items: { id: string }[]; continue: string };
    assert.deepEqual(ids(first), ['ft-aaaaa3', 'ft-aaaaa2']);
    assert.ok(first.continue);
    const second = (await get(`/v1/tokens?limit=2&continue=${first.continue}`)).json() as { continue: null };
    assert.deepEqual(ids(second), ['ft-aaaaa1']);
    assert.equal(second.continue, null);
    assert.deepEqual(ids((await get('/v1/tokens?phase=Bound')).json()), ['ft-aaaaa2']);
    assert.deepEqual(ids((await get('/v1/tokens?phase=Issued,Bound&limit=1')).json()), ['ft-aaaaa3']);
  });

  it('also works before the FlavoredToken watch has synced (from the API server)', async () => {
    const { get } = await setup(false);
    assert.deepEqual(ids((await get('/v1/tokens')).json()), ['ft-aaaaa3', 'ft-aaaaa2', 'ft-aaaaa1']);
  });

  it('scope=all needs RBAC list on flavoredtokens: 403 without, every token with', async () => {
    const { get } = await setup();
    const denied = await get('/v1/tokens?scope=all');
    assert.equal(denied.statusCode, 403);
    assert.match(denied.body, /list.*flavoredtokens/);
    const all = await get('/v1/tokens?scope=all', 'auditor-token');
    assert.equal(all.statusCode, 200);
    assert.equal(ids(all.json()).length, 5);
    assert.deepEqual(
      ids((await get('/v1/tokens', 'auditor-token')).json()),
      [],
      'own scope: none of its own',
    );
  });

  it('refuses a bad query with 400 naming the parameter', async () => {
    const { get } = await setup();
    for (const [query, field] of [
      ['limit=0', 'limit'],
      ['limit=501', 'limit'],
      ['limit=abc', 'limit'],
      ['phase=Done', 'phase'],
      ['continue=xyz', 'continue'],
      ['scope=everyone', 'scope'],
      ['bogus=1', 'bogus'],
      ['phase=Issued&phase=Bound', 'phase'],
    ]) {
      const response = await get(`/v1/tokens?${query}`);
      assert.equal(response.statusCode, 400, `${query}: ${response.body}`);
      const error = (response.json() as { error: { fields: { field: string }[] } }).error;
      assert.equal(error.fields[0]?.field, field, query);
    }
  });

  it('401 without a bearer, like every /v1 route', async () => {
    const { app } = await setup();
    assert.equal((await app.inject({ method: 'GET', url: '/v1/tokens' })).statusCode, 401);
  });
});

describe('tokenPage', () => {
  it('a cursor from one walk never repeats or skips a token', () => {
    const views = Array.from({ length: 23 }, (_, i) => ({
      id: `ft-${String(i).padStart(6, '0')}`,
      createdAt: `2030-01-01T00:00:${String(i % 7).padStart(2, '0')}Z`,
      phase: 'Issued',
    })) as unknown as Parameters<typeof tokenPage>[0];
    const seen: string[] = [];
    let cursor: string | null = null;
    do {
      const page = tokenPage(
        views,
        parseTokenListQuery({ limit: '5', ...(cursor ? { continue: cursor } : {}) }),
      );
      seen.push(...page.items.map((v) => v.id));
      cursor = page.continue;
    } while (cursor);
    assert.equal(seen.length, 23);
    assert.equal(new Set(seen).size, 23);
  });
});

describe('GET /v1/tokens/{id}?watch=true', () => {
  it('streams the status at once and after each change, then ends at timeoutSeconds', async () => {
    const { app, feed, kube } = await setup();
    const pending = app.inject({
      method: 'GET',
      url: '/v1/tokens/ft-aaaaa1?watch=true&timeoutSeconds=1',
      headers: { authorization: 'Bearer portal-token' },
    });
    // Once the stream is subscribed, the node binds and is verified.
    const subscribed = async () => {
      while (!feed.listeners.get('ft-aaaaa1')?.size) await new Promise((r) => setImmediate(r));
    };
    await subscribed();
    const base = kube.tokens.get('ft-aaaaa1') as FlavoredToken;
    const binding = { nodeName: 'edge-1', csrName: 'csr-1', boundAt: '2030-01-01T00:30:00Z' };
    // The join counts its use on the token and claims the name; its node is verified later, as
    // its record says (the token does not change then).
    kube.records.set('edge-1', joinRecord('ft-aaaaa1', 'edge-1', 'csr-1', binding.boundAt));
    feed.change('ft-aaaaa1', { ...base, status: { uses: 1, bindings: [binding] } });
    feed.change('ft-aaaaa1', { ...base, status: { uses: 1, bindings: [binding] } }); // no change: no event
    kube.records.set(
      'edge-1',
      joinRecord('ft-aaaaa1', 'edge-1', 'csr-1', binding.boundAt, {
        nodeUID: 'uid-edge-1',
        verifiedAt: '2030-01-01T00:30:02Z',
      }),
    );
    feed.change('ft-aaaaa1', kube.tokens.get('ft-aaaaa1'));
    const response = await pending;
    assert.equal(response.statusCode, 200);
    assert.match(String(response.headers['content-type']), /^text\/event-stream/);
    assert.equal(response.headers['cache-control'], 'no-store');
    const events = response.body
      .split('\n\n')
      .filter((block) => block.startsWith('event: '))
      .map((block) => {
        const [event, data] = block.split('\n');
        return { event: event?.slice(7), data: JSON.parse(data?.slice(6) ?? 'null') };
      });
    assert.deepEqual(
      events.map((e) => (e.event === 'token' ? e.data.phase : e.event)),
      ['Issued', 'Bound', 'Verified', 'timeout'],
    );
    assert.equal(feed.listeners.get('ft-aaaaa1')?.size, 0, 'unsubscribed at the end');
  });

  it('ends with `deleted` when the token goes, and frees its slot', async () => {
    const { app, feed, get } = await setup();
    const pending = get('/v1/tokens/ft-aaaaa1?watch=true&timeoutSeconds=30');
    while (!feed.listeners.get('ft-aaaaa1')?.size) await new Promise((r) => setImmediate(r));
    feed.change('ft-aaaaa1', undefined);
    const response = await pending;
    assert.ok(response.body.endsWith(sseEvent('deleted', { id: 'ft-aaaaa1' })), response.body);
    // perCaller is 1 here: a second watch after the first ended is allowed again.
    const next = get('/v1/tokens/ft-aaaaa2?watch=true&timeoutSeconds=1');
    assert.equal((await next).statusCode, 200);
    await app.close();
  });

  it('holds a caller to its watch slots (429) and answers 404 for a token not its own', async () => {
    const { feed, get } = await setup();
    const first = get('/v1/tokens/ft-aaaaa1?watch=true&timeoutSeconds=2');
    while (!feed.listeners.get('ft-aaaaa1')?.size) await new Promise((r) => setImmediate(r));
    const second = await get('/v1/tokens/ft-aaaaa2?watch=true');
    assert.equal(second.statusCode, 429, second.body);
    assert.ok(second.headers['retry-after']);
    assert.equal((await first).statusCode, 200);
    assert.equal((await get('/v1/tokens/ft-bbbbb1?watch=true&timeoutSeconds=1')).statusCode, 404);
  });

  it('refuses a bad query with 400; 503 while the token cache is not synced', async () => {
    const { get, feed } = await setup();
    for (const query of [
      'watch=yes',
      'watch=true&timeoutSeconds=0',
      'watch=true&timeoutSeconds=601',
      'timeoutSeconds=5',
      'x=1',
    ])
      assert.equal((await get(`/v1/tokens/ft-aaaaa1?${query}`)).statusCode, 400, query);
    feed.synced = false;
    assert.equal((await get('/v1/tokens/ft-aaaaa1?watch=true')).statusCode, 503);
    assert.equal((await get('/v1/tokens/ft-aaaaa1?watch=false')).statusCode, 200, 'a plain GET still works');
  });
});
