import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { exportJWK, generateKeyPair, SignJWT } from 'jose';
import { bearerToken, createCallerAuth } from '../../src/tokenissuer/auth.ts';
import { parseIssuerConfig } from '../../src/tokenissuer/config.ts';
import { IssuerError } from '../../src/tokenissuer/errors.ts';
import { FakeReviews } from './support/issuer-fakes.ts';

const dir = mkdtempSync(join(tmpdir(), 'issuer-auth-'));
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

  it('refuses a configuration without any way to authenticate', () => {
    assert.throws(
      () =>
        parseIssuerConfig({ tls: { certPem: 'x', keyPem: 'y' }, auth: { tokenReview: { enabled: false } } }),
      /enable auth.tokenReview or configure auth.jwt/,
    );
  });
});
