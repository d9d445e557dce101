import assert from 'node:assert/strict';
import { mkdtempSync, renameSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { exportJWK, generateKeyPair, SignJWT } from 'jose';
import { parseIssuerConfig } from '../../src/tokenissuer/config.ts';
import { bearerToken, createCallerAuth, kubernetesOwner } from '../../src/tokenissuer/defences/auth.ts';
import { IssuerError } from '../../src/tokenissuer/errors.ts';
import { FakeReviews } from './support/issuer-fakes.ts';

const dir = mkdtempSync(join(tmpdir(), 'issuer-auth-'));
after(() => rmSync(dir, { recursive: true, force: true }));
const SHARED = 'a-shared-secret-of-at-least-32-bytes!!';
writeFileSync(join(dir, 'hs256'), `${SHARED}\n`);

function authConfig(jwt: Record<string, unknown>, tokenReview = true) {
  return parseIssuerConfig({
    tls: { certPem: 'x', keyPem: 'y' },
    auth: {
      tokenReview: { enabled: tokenReview },
      jwt: { issuer: 'https://portal.example', audience: 'nodeflavor', ...jwt },
    },
  }).auth;
}

function hs256(
  claims: Record<string, unknown>,
  options: { iss?: string; aud?: string; exp?: string | number } = {},
) {
  return new SignJWT(claims)
    .setProtectedHeader({ alg: 'HS256' })
    .setIssuer(options.iss ?? 'https://portal.example')
    .setAudience(options.aud ?? 'nodeflavor')
    .setSubject('portal-7')
    .setIssuedAt()
    .setExpirationTime(options.exp ?? '5m')
    .sign(new TextEncoder().encode(SHARED));
}

async function rejectsUnauthenticated(promise: Promise<unknown>): Promise<void> {
  await assert.rejects(promise, (error: IssuerError) => error instanceof IssuerError && error.status === 401);
}

describe('bearerToken', () => {
  it('reads Bearer tokens and refuses anything else with 401', () => {
    assert.equal(bearerToken('Bearer abc.def-ghi_'), 'abc.def-ghi_');
    assert.equal(bearerToken('bearer abc'), 'abc');
    for (const header of [
      undefined,
      '',
      'Basic YWxhZGRpbjpvcGVu',
      'Bearer',
      'Bearer a b',
      `Bearer ${'a'.repeat(20_000)}`,
    ]) {
      assert.throws(
        () => bearerToken(header),
        (error: IssuerError) => error.status === 401,
      );
    }
  });
});

describe('JWT callers', () => {
  it('accepts an HS256 token with the right issuer and audience; flavors come from the claim', async () => {
    const auth = createCallerAuth(authConfig({ hs256SecretFile: join(dir, 'hs256') }), undefined);
    const caller = await auth.authenticate(`Bearer ${await hs256({ 'nodeflavor.io/flavors': ['sweet'] })}`);
    assert.equal(caller.username, 'jwt:portal-7');
    assert.equal(caller.via, 'jwt');
    assert.equal(await auth.mayUse(caller, 'sweet'), true);
    assert.equal(await auth.mayUse(caller, 'sour'), false);
  });

  it('honours a custom flavors claim, and a missing claim grants nothing', async () => {
    const auth = createCallerAuth(
      authConfig({ hs256SecretFile: join(dir, 'hs256'), flavorsClaim: 'flv' }),
      undefined,
    );
    const caller = await auth.authenticate(`Bearer ${await hs256({ flv: ['sour'] })}`);
    assert.equal(await auth.mayUse(caller, 'sour'), true);
    const none = await auth.authenticate(`Bearer ${await hs256({ other: 1 })}`);
    assert.equal(await auth.mayUse(none, 'sour'), false);
  });

  it('refuses a wrong audience, an expired token and a wrong signature', async () => {
    const auth = createCallerAuth(authConfig({ hs256SecretFile: join(dir, 'hs256') }, false), undefined);
    await rejectsUnauthenticated(auth.authenticate(`Bearer ${await hs256({}, { aud: 'other' })}`));
    await rejectsUnauthenticated(
      auth.authenticate(`Bearer ${await hs256({}, { exp: Math.floor(Date.now() / 1000) - 120 })}`),
    );
    const forged = await new SignJWT({})
      .setProtectedHeader({ alg: 'HS256' })
      .setIssuer('https://portal.example')
      .setAudience('nodeflavor')
      .setSubject('x')
      .setExpirationTime('5m')
      .sign(new TextEncoder().encode('another-secret-that-is-32-bytes-long!'));
    await rejectsUnauthenticated(auth.authenticate(`Bearer ${forged}`));
  });

  it('verifies asymmetric tokens against a JWKS file', async () => {
    const { publicKey, privateKey } = await generateKeyPair('ES256');
    const jwk = { ...(await exportJWK(publicKey)), kid: 'k1', alg: 'ES256' };
    writeFileSync(join(dir, 'jwks.json'), JSON.stringify({ keys: [jwk] }));
    const auth = createCallerAuth(authConfig({ jwksFile: join(dir, 'jwks.json') }, false), undefined);
    const token = await new SignJWT({ 'nodeflavor.io/flavors': ['sweet'] })
      .setProtectedHeader({ alg: 'ES256', kid: 'k1' })
      .setIssuer('https://portal.example')
      .setAudience('nodeflavor')
      .setSubject('portal-9')
      .setExpirationTime('5m')
      .sign(privateKey);
    const caller = await auth.authenticate(`Bearer ${token}`);
    assert.equal(await auth.mayUse(caller, 'sweet'), true);
  });

  it('follows a rotation of the JWKS file without a restart: new key at once, removed key refused', async () => {
    const es256 = async (kid: string) => {
      const pair = await generateKeyPair('ES256');
      return { ...pair, jwk: { ...(await exportJWK(pair.publicKey)), kid, alg: 'ES256' } };
    };
    const [k1, k2] = [await es256('k1'), await es256('k2')];
    const sign = (key: Parameters<SignJWT['sign']>[0], kid: string) =>
      new SignJWT({ 'nodeflavor.io/flavors': ['sweet'] })
        .setProtectedHeader({ alg: 'ES256', kid })
        .setIssuer('https://portal.example')
        .setAudience('nodeflavor')
        .setSubject('portal-9')
        .setExpirationTime('5m')
        .sign(key);
    // As the kubelet updates a mounted ConfigMap: a new file, then a symlink swapped onto it.
    const rotating = mkdtempSync(join(tmpdir(), 'issuer-jwks-'));
    const link = join(rotating, 'jwks.json');
    let version = 0;
    const publish = (keys: unknown[]) => {
      const target = join(rotating, `jwks-${++version}.json`);
      writeFileSync(target, JSON.stringify({ keys }));
      symlinkSync(target, `${link}.tmp`);
      renameSync(`${link}.tmp`, link);
    };
    try {
      publish([k1.jwk]);
      let now = 0;
      const auth = createCallerAuth(
        authConfig({ jwksFile: link, jwksRefreshSeconds: 60 }, false),
        undefined,
        () => now,
      );
      const withK1 = await sign(k1.privateKey, 'k1');
      const withK2 = await sign(k2.privateKey, 'k2');
      assert.equal((await auth.authenticate(`Bearer ${withK1}`)).username, 'jwt:portal-9');
      publish([k1.jwk, k2.jwk]);
      now = 1_000;
      assert.equal(
        (await auth.authenticate(`Bearer ${withK2}`)).username,
        'jwt:portal-9',
        'a new kid is read at once',
      );
      // The old key goes: refused once the periodic re-read has seen it (cached identities expire too).
      publish([k2.jwk]);
      now = 61_000;
      await rejectsUnauthenticated(auth.authenticate(`Bearer ${await sign(k1.privateKey, 'k1')}`));
      // Made-up key IDs do not re-read the file more than once per throttle period.
      publish([k2.jwk, k1.jwk]);
      now = 62_000;
      await rejectsUnauthenticated(auth.authenticate(`Bearer ${await sign(k1.privateKey, 'k1')}`));
    } finally {
      rmSync(rotating, { recursive: true, force: true });
    }
  });

  it('sends tokens of other issuers (e.g. ServiceAccount JWTs) to the TokenReview', async () => {
    const reviews = new FakeReviews();
    const saToken = await hs256({}, { iss: 'https://kubernetes.default.svc' });
    reviews.addUser(saToken, 'system:serviceaccount:portal:issuer', ['sweet']);
    const auth = createCallerAuth(authConfig({ hs256SecretFile: join(dir, 'hs256') }), reviews);
    const caller = await auth.authenticate(`Bearer ${saToken}`);
    assert.equal(caller.via, 'kubernetes');
    assert.equal(await auth.mayUse(caller, 'sweet'), true);
    assert.equal(await auth.mayUse(caller, 'sour'), false);
  });
});

describe('Kubernetes callers', () => {
  it('caches a TokenReview for cacheSeconds, keyed by the token', async () => {
    const reviews = new FakeReviews();
    reviews.addUser('sa-token', 'alice', ['sweet']);
    let now = 0;
    const config = parseIssuerConfig({ tls: { certPem: 'x', keyPem: 'y' }, auth: { cacheSeconds: 10 } }).auth;
    const auth = createCallerAuth(config, reviews, () => now);
    await auth.authenticate('Bearer sa-token');
    await auth.authenticate('Bearer sa-token');
    assert.equal(reviews.reviewCalls, 1);
    now = 11_000;
    await auth.authenticate('Bearer sa-token');
    assert.equal(reviews.reviewCalls, 2);
    await rejectsUnauthenticated(auth.authenticate('Bearer other'));
  });

  it("asks the TokenReview for the issuer's audience only; a token for the API server gets 401", async () => {
    const reviews = new FakeReviews();
    reviews.addUser('issuer-token', 'alice', ['sweet']);
    reviews.addUser('apiserver-token', 'bob', ['sweet'], { audiences: ['https://kubernetes.default.svc'] });
    reviews.addUser('custom-token', 'carol', ['sweet'], { audiences: ['portal-aud'] });
    const config = parseIssuerConfig({ tls: { certPem: 'x', keyPem: 'y' } }).auth;
    assert.deepEqual(config.tokenReview.audiences, ['nodeflavor-issuer']);
    const auth = createCallerAuth(config, reviews);
    assert.equal((await auth.authenticate('Bearer issuer-token')).username, 'alice');
    await rejectsUnauthenticated(auth.authenticate('Bearer apiserver-token'));
    await rejectsUnauthenticated(auth.authenticate('Bearer custom-token'));
    const custom = parseIssuerConfig({
      tls: { certPem: 'x', keyPem: 'y' },
      auth: { tokenReview: { audiences: ['portal-aud'] } },
    }).auth;
    assert.equal(
      (await createCallerAuth(custom, reviews).authenticate('Bearer custom-token')).username,
      'carol',
    );
  });

  it('refuses an answer that holds none of the requested audiences (an authenticator ignoring them)', async () => {
    const reviews = new FakeReviews();
    reviews.addUser('any-token', 'mallory', ['sweet'], { audiences: 'ignored' });
    const auth = createCallerAuth(parseIssuerConfig({ tls: { certPem: 'x', keyPem: 'y' } }).auth, reviews);
    await rejectsUnauthenticated(auth.authenticate('Bearer any-token'));
  });

  it("refuses to run without an audience (empty would mean the API server's own)", () => {
    assert.throws(
      () =>
        parseIssuerConfig({ tls: { certPem: 'x', keyPem: 'y' }, auth: { tokenReview: { audiences: [] } } }),
      /audiences/,
    );
  });

  it('keys the SubjectAccessReview cache on everything the review depends on', async () => {
    const reviews = new FakeReviews();
    const base = { uid: 'u-1', groups: ['g1', 'g2'], extra: { scopes: ['a', 'b'] } };
    reviews.addUser('t1', 'alice', ['sweet'], { user: base });
    reviews.addUser('t1-reordered', 'alice', ['sweet'], {
      user: { uid: 'u-1', groups: ['g2', 'g1'], extra: { scopes: ['b', 'a'] } },
    });
    reviews.addUser('t2-groups', 'alice', ['sweet'], { user: { ...base, groups: ['g1'] } });
    reviews.addUser('t3-extra', 'alice', ['sweet'], { user: { ...base, extra: { scopes: ['a'] } } });
    reviews.addUser('t4-uid', 'alice', ['sweet'], { user: { ...base, uid: 'u-2' } });
    const config = parseIssuerConfig({ tls: { certPem: 'x', keyPem: 'y' }, auth: { cacheSeconds: 60 } }).auth;
    const auth = createCallerAuth(config, reviews, () => 0);
    const reviewsFor = async (token: string) => {
      const before = reviews.accessReviews.length;
      await auth.mayUse(await auth.authenticate(`Bearer ${token}`), 'sweet');
      return reviews.accessReviews.length - before;
    };
    assert.equal(await reviewsFor('t1'), 1);
    assert.equal(await reviewsFor('t1'), 0, 'the same caller is answered from the cache');
    assert.equal(await reviewsFor('t1-reordered'), 0, 'order of groups and extra values does not matter');
    assert.equal(await reviewsFor('t2-groups'), 1, 'other groups: a review of their own');
    assert.equal(await reviewsFor('t3-extra'), 1, 'other extra: a review of their own');
    assert.equal(await reviewsFor('t4-uid'), 1, 'other uid: a review of their own');
    // And the attributes: another verb or name is another review.
    const caller = await auth.authenticate('Bearer t1');
    const before = reviews.accessReviews.length;
    await auth.mayManageAny(caller, 'get', 'ft-abcdef');
    await auth.mayManageAny(caller, 'delete', 'ft-abcdef');
    await auth.mayManageAny(caller, 'get', 'ft-ghijkl');
    assert.equal(reviews.accessReviews.length - before, 3);
  });

  it('shares one SubjectAccessReview among requests arriving together, and caches its answer', async () => {
    const reviews = new FakeReviews();
    reviews.addUser('t1', 'alice', ['sweet']);
    let now = 0;
    const config = parseIssuerConfig({ tls: { certPem: 'x', keyPem: 'y' }, auth: { cacheSeconds: 10 } }).auth;
    const auth = createCallerAuth(config, reviews, () => now);
    const caller = await auth.authenticate('Bearer t1');
    const answers = await Promise.all(Array.from({ length: 32 }, () => auth.mayUse(caller, 'sweet')));
    assert.deepEqual(new Set(answers), new Set([true]));
    assert.equal(reviews.accessReviews.length, 1, '32 requests at once: one review');
    // Denials are shared the same way, and a different flavor is a review of its own.
    const denied = await Promise.all([auth.mayUse(caller, 'sour'), auth.mayUse(caller, 'sour')]);
    assert.deepEqual(denied, [false, false]);
    assert.equal(reviews.accessReviews.length, 2);
    // Once the cached answer expires, the next burst makes one review again.
    now = 11_000;
    await auth.authenticate('Bearer t1');
    await Promise.all(Array.from({ length: 8 }, () => auth.mayUse(caller, 'sweet')));
    assert.equal(reviews.accessReviews.length, 3);
  });

  it('does not keep a failed SubjectAccessReview: the next request asks again', async () => {
    const reviews = new FakeReviews();
    reviews.addUser('t1', 'alice', ['sweet']);
    const config = parseIssuerConfig({ tls: { certPem: 'x', keyPem: 'y' }, auth: { cacheSeconds: 10 } }).auth;
    const auth = createCallerAuth(config, reviews, () => 0);
    const caller = await auth.authenticate('Bearer t1');
    const userCan = reviews.userCan.bind(reviews);
    let fail = true;
    reviews.userCan = async (user, check) => {
      if (fail) throw new Error('API server unreachable');
      return userCan(user, check);
    };
    const failed = await Promise.allSettled([auth.mayUse(caller, 'sweet'), auth.mayUse(caller, 'sweet')]);
    assert.deepEqual(
      failed.map((r) => r.status),
      ['rejected', 'rejected'],
    );
    fail = false;
    assert.equal(await auth.mayUse(caller, 'sweet'), true);
  });

  it('gives each caller an owner digest from its username and uid', async () => {
    const reviews = new FakeReviews();
    reviews.addUser('a', 'alice', [], { user: { uid: 'u-1' } });
    reviews.addUser('b', 'alice', [], { user: { uid: 'u-2' } });
    const auth = createCallerAuth(parseIssuerConfig({ tls: { certPem: 'x', keyPem: 'y' } }).auth, reviews);
    const a = await auth.authenticate('Bearer a');
    assert.equal(a.owner, kubernetesOwner({ username: 'alice', uid: 'u-1' }));
    assert.notEqual(
      (await auth.authenticate('Bearer b')).owner,
      a.owner,
      'a re-created account is not the owner',
    );
  });

  it('refuses a configuration without any way to authenticate', () => {
    assert.throws(
      () =>
        parseIssuerConfig({ tls: { certPem: 'x', keyPem: 'y' }, auth: { tokenReview: { enabled: false } } }),
      /enable auth.tokenReview or configure auth.jwt/,
    );
  });
});
