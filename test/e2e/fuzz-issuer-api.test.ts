// Fuzzing the token issuer's HTTP API on the real control plane (fast-check, fixed seeds, ~300
// requests): random JSON bodies, records with the right field names and wrong types or values,
// malformed bodies, random and malformed headers (Content-Type, Authorization, Idempotency-Key)
// and methods, against every route (POST /v1/tokens, GET /v1/tokens?{random query}, GET (also
// ?watch=...) and DELETE /v1/tokens/{id}, GET
// /v1/flavors, /healthz, /readyz, /openapi.json, unknown paths), as a caller allowed to use every
// flavor, as one allowed none, and as no or an invalid caller. Every answer is a 2xx or a 4xx,
// never a 5xx; a 4xx is the issuer's JSON error with a message and no stack trace; and nothing is
// written: no FlavoredToken and no bootstrap Secret appears. (A request that would rightly mint a
// token — a valid body naming a real flavor, from the allowed caller — is left out of the
// generators; one such request is made beforehand to show the caller and flavor are real.)
import assert from 'node:assert/strict';
import { request as httpsRequest } from 'node:https';
import { after, before, describe, it } from 'node:test';
import { connect as tlsConnect } from 'node:tls';
import fc from 'fast-check';
import type { CertificateAuthority } from '../../src/pki/certs.ts';
import { validateIssueRequest } from '../../src/tokenissuer/request.ts';
import type { RunningIssuer } from '../../src/tokenissuer/server.ts';
import { applyObjects } from './cluster/apply.ts';
import { type E2EEnvironment, e2eEnvironment } from './support/environment.ts';
import {
  bootstrapSecretNames as bootstrapSecretNamesOf,
  clusterRoleBindingObject,
  clusterRoleObject,
  flavoredTokenNames as flavoredTokenNamesOf,
  serviceAccountObject,
  serviceAccountToken as serviceAccountTokenOf,
  startTestIssuer,
} from './support/issuer.ts';
import { ensureNamespace, installCrds, OPERATOR_NAMESPACE } from './support/nodeflavor.ts';
import { uniqueName, waitFor } from './support/wait.ts';

const NAMESPACE = 'nodeflavor-e2e-fuzz';
const MAX_TTL = '168h';

interface Sent {
  method: string;
  path: string;
  headers: Record<string, string>;
  body?: Buffer;
}

interface Reply {
  status: number;
  contentType: string;
  text: string;
}

type CallerKind = 'allowed' | 'forbidden' | 'none' | 'invalid';

/** A V8 stack frame ("    at fn (file.ts:1:2)") or a source position. */
const STACK_TRACE = /\n\s+at \S|\bat \S+ \(|\.[cm]?[jt]s:\d+:\d+/;

/** The issuer's one error shape: {error: {code, message}}, with a non-empty message. */
function isIssuerError(text: string): boolean {
  try {
    const body = JSON.parse(text) as { error?: { code?: unknown; message?: unknown } };
    return (
      typeof body.error?.code === 'string' &&
      typeof body.error.message === 'string' &&
      body.error.message.trim() !== '' &&
      !STACK_TRACE.test(text)
    );
  } catch {
    return false;
  }
}

describe('fuzz: the token issuer API answers any request with a 2xx or a 4xx and writes nothing', () => {
  let env: E2EEnvironment;
  let issuer: RunningIssuer;
  let ca: CertificateAuthority;
  const flavor = uniqueName('fuzz');
  const tokens: Record<'allowed' | 'forbidden', string> = { allowed: '', forbidden: '' };
  /** Names and token IDs of every FlavoredToken that existed before the fuzzing. */
  const existing = new Set<string>();
  let before0: { tokens: Set<string>; secrets: Set<string> };
  const statuses = new Map<number, number>();

  const flavoredTokenNames = () => flavoredTokenNamesOf(env);
  const bootstrapSecretNames = () => bootstrapSecretNamesOf(env);

  function send(sent: Sent): Promise<Reply> {
    return new Promise((resolve, reject) => {
      const req = httpsRequest(
        new URL(issuer.url),
        { method: sent.method, path: sent.path, headers: sent.headers, ca: ca.certPem, agent: false },
        (res) => {
          const chunks: Buffer[] = [];
          res.on('data', (chunk: Buffer) => chunks.push(chunk));
          res.on('end', () =>
            resolve({
              status: res.statusCode ?? 0,
              contentType: String(res.headers['content-type'] ?? ''),
              text: Buffer.concat(chunks).toString('utf8'),
            }),
          );
        },
      );
      req.on('error', reject);
      req.end(sent.body);
    });
  }

  /** Sends one request and checks the answer's form. */
  async function check(sent: Sent): Promise<Reply> {
    const reply = await send(sent);
    statuses.set(reply.status, (statuses.get(reply.status) ?? 0) + 1);
    const what = `${sent.method} ${sent.path.slice(0, 80)} → ${reply.status}: ${reply.text.slice(0, 300)}`;
    assert.ok(reply.status < 500, `never a 5xx: ${what}`);
    assert.ok(reply.status < 300 || reply.status >= 400, `a 2xx or a 4xx: ${what}`);
    assert.notEqual(reply.status, 201, `nothing is minted: ${what}`);
    if (sent.method === 'HEAD') return reply;
    assert.match(reply.contentType, /^application\/json/, `a JSON answer: ${what}`);
    const body = JSON.parse(reply.text) as { error?: { code?: unknown; message?: unknown; stack?: unknown } };
    if (reply.status >= 400) {
      assert.doesNotMatch(reply.text, STACK_TRACE, `no stack trace: ${what}`);
      assert.equal(typeof body.error?.code, 'string', `an error code: ${what}`);
      assert.ok(
        typeof body.error?.message === 'string' && body.error.message.trim() !== '',
        `a message: ${what}`,
      );
      assert.equal(body.error?.stack, undefined, what);
    }
    return reply;
  }

  function authorization(kind: CallerKind, garbage: string): Record<string, string> {
    switch (kind) {
      case 'allowed':
      case 'forbidden':
        return { authorization: `Bearer ${tokens[kind]}` };
      case 'invalid':
        return { authorization: garbage };
      default:
        return {};
    }
  }

  /** Would this request rightly mint a token? Such requests are not fuzz: they are left out. */
  function wouldMint(caller: CallerKind, method: string, path: string, body: Buffer | undefined): boolean {
    if (caller !== 'allowed' || method !== 'POST' || !/^\/v1\/tokens\/?(\?.*)?$/i.test(path) || !body)
      return false;
    let parsed: unknown;
    try {
      parsed = JSON.parse(body.toString('utf8'));
    } catch {
      return false;
    }
    try {
      return validateIssueRequest(parsed, { maxTtl: MAX_TTL }, new Date()).flavorClassName === flavor;
    } catch {
      return false;
    }
  }

  before(async () => {
    env = await e2eEnvironment();
    await installCrds(env);
    await ensureNamespace(env, OPERATOR_NAMESPACE);
    await ensureNamespace(env, NAMESPACE);
    await applyObjects(
      env.kubeconfigPath,
      [
        { apiVersion: 'nodeflavor.io/v1alpha1', kind: 'FlavorClass', metadata: { name: flavor }, spec: {} },
        serviceAccountObject('fuzz-portal', NAMESPACE),
        serviceAccountObject('fuzz-nobody', NAMESPACE),
        clusterRoleObject('nodeflavor-e2e-fuzz-use-any', [
          { apiGroups: ['nodeflavor.io'], resources: ['flavorclasses'], verbs: ['use'] },
        ]),
        clusterRoleBindingObject(
          'nodeflavor-e2e-fuzz-portal',
          'nodeflavor-e2e-fuzz-use-any',
          'fuzz-portal',
          NAMESPACE,
        ),
      ],
      'nodeflavor-e2e-fuzz',
    );
    tokens.allowed = await serviceAccountTokenOf(env, NAMESPACE, 'fuzz-portal');
    tokens.forbidden = await serviceAccountTokenOf(env, NAMESPACE, 'fuzz-nobody');
    ({ issuer, ca } = await startTestIssuer(env, {
      issuance: { maxTtl: MAX_TTL },
      // Limits high enough that the fuzz reaches the handlers rather than the rate limiter.
      rateLimit: {
        perCaller: { capacity: 100_000, refillPerSecond: 100_000 },
        unauthenticatedPerAddress: { capacity: 100_000, refillPerSecond: 100_000 },
      },
      logLevel: 'silent',
    }));
    await waitFor(async () => (await send({ method: 'GET', path: '/readyz', headers: {} })).status === 200, {
      what: 'the issuer to be ready',
    });

    // The allowed caller and the flavor are real: a valid request mints (and is revoked at once).
    const minted = await send({
      method: 'POST',
      path: '/v1/tokens',
      headers: { authorization: `Bearer ${tokens.allowed}`, 'content-type': 'application/json' },
      body: Buffer.from(JSON.stringify({ flavorClassName: flavor, ttl: '1h' })),
    });
    assert.equal(minted.status, 201, minted.text);
    const { id } = JSON.parse(minted.text) as { id: string };
    const revoked = await send({
      method: 'DELETE',
      path: `/v1/tokens/${id}`,
      headers: { authorization: `Bearer ${tokens.allowed}` },
    });
    assert.equal(revoked.status, 200, revoked.text);

    for (const name of await flavoredTokenNames()) {
      existing.add(name);
      existing.add(name.replace(/^ft-/, ''));
    }
    before0 = { tokens: await flavoredTokenNames(), secrets: await bootstrapSecretNames() };
  });

  after(async () => {
    await issuer?.close();
  });

  // ---- generators ----------------------------------------------------------------------------
  const printable = fc.string({
    unit: fc.integer({ min: 0x20, max: 0x7e }).map((c) => String.fromCharCode(c)),
    maxLength: 60,
  });
  const caller = fc.constantFrom<CallerKind>('allowed', 'allowed', 'forbidden', 'none', 'invalid');
  const garbageAuthorization = fc.oneof(
    fc.constantFrom(
      'Bearer',
      'Bearer ',
      'bearer x',
      'Basic dXNlcjpwYXNz',
      'Bearer a b',
      'Token abc',
      'Bearer ====',
    ),
    printable,
    printable.map((s) => `Bearer ${s}`),
    fc.base64String({ minLength: 1, maxLength: 400 }).map((s) => `Bearer ${s}`),
    fc.integer({ min: 1000, max: 6000 }).map((n) => `Bearer ${'A'.repeat(n)}`),
    fc.constant(
      `Bearer eyJhbGciOiJub25lIn0.${Buffer.from('{"iss":"x","sub":"root"}').toString('base64url')}.`,
    ),
  );
  const contentType = fc.oneof(
    { weight: 4, arbitrary: fc.constant('application/json') },
    {
      weight: 3,
      arbitrary: fc.constantFrom(
        'application/json; charset=utf-8',
        'APPLICATION/JSON',
        'application/json; charset=latin1',
        'application/json;',
        'application/merge-patch+json',
        'application/x-www-form-urlencoded',
        'multipart/form-data; boundary=x',
        'text/plain',
        'text/json',
        'application/yaml',
        '*/*',
        '',
      ),
    },
    { weight: 1, arbitrary: printable },
  );
  const idempotencyKey = fc.option(
    fc.oneof(
      printable.filter((s) => s.trim() !== '' && s === s.trim()),
      fc.constantFrom('key with spaces', 'k'.repeat(255), 'k'.repeat(256)),
      fc.integer({ min: 256, max: 6000 }).map((n) => 'i'.repeat(n)),
    ),
    { nil: undefined },
  );

  const realOrNot = fc.oneof(
    fc.constant(flavor),
    fc.constantFrom('does-not-exist', 'Sweet', '', '-bad-', 'a'.repeat(300)),
    fc.string(),
  );
  /** Records with the right field names and values of the wrong type, or out of range. */
  const fieldRecord = fc.record(
    {
      flavorClassName: fc.oneof(realOrNot, fc.jsonValue()),
      ttl: fc.oneof(
        fc.constantFrom('1h', '0s', '-1h', '4s', '169h', '999999999h', '1.5h', 'soon', '', '1h30m', 'PT1H'),
        fc.jsonValue(),
      ),
      expiresAt: fc.oneof(
        fc.constantFrom(
          '2000-01-01T00:00:00Z',
          '9999-12-31T23:59:59Z',
          'yesterday',
          '2030-02-30T00:00:00Z',
          '',
        ),
        fc.date({ noInvalidDate: true }).map((d) => d.toISOString()),
        fc.jsonValue(),
      ),
      maxUses: fc.oneof(
        fc.constantFrom(-1, 0.5, 1e9, Number.MAX_SAFE_INTEGER, '1', null, true),
        fc.jsonValue(),
      ),
      nodeName: fc.oneof(fc.constantFrom('Node_1', '', 'a'.repeat(300), '../x', 'node-1'), fc.jsonValue()),
      nodeNamePattern: fc.oneof(fc.constantFrom('**', 'worker-*', '[a-z]+', '*'.repeat(300)), fc.jsonValue()),
      description: fc.oneof(fc.string({ maxLength: 40 }), fc.constant('d'.repeat(5000)), fc.jsonValue()),
      extra: fc.jsonValue(),
    },
    { requiredKeys: [] },
  );
  const jsonBody = fc.oneof(
    fc.jsonValue().map((v) => JSON.stringify(v)),
    fc.object().map((v) => JSON.stringify(v) ?? 'null'),
    fieldRecord.map((v) => JSON.stringify(v)),
    // A valid-looking body made invalid by one field (so a real flavor is exercised too).
    fc
      .record({ flavorClassName: realOrNot, ttl: fc.constantFrom('1h', '0s', 'x', '200h') })
      .map((v) => JSON.stringify(v)),
    fieldRecord.map((v) => `{"__proto__":{"admin":true},${JSON.stringify(v).slice(1)}`),
    // Valid bodies: for a flavor that does not exist (404), or from a caller who may not use the
    // flavor (403). The allowed caller's valid body for the real flavor would mint: left out.
    {
      weight: 3,
      arbitrary: fc
        .record(
          {
            flavorClassName: fc.oneof(fc.constant(flavor), fc.constantFrom('does-not-exist', 'nope.example')),
            ttl: fc.constantFrom('1h', '30m', '24h'),
            maxUses: fc.integer({ min: 0, max: 10 }),
            nodeNamePattern: fc.constantFrom('worker-*', 'edge-*'),
            description: fc.string({ maxLength: 20 }),
          },
          { requiredKeys: ['flavorClassName'] },
        )
        .map((v) => JSON.stringify(v)),
    },
  );
  const rawBody = fc.oneof(
    { weight: 6, arbitrary: jsonBody.map((s) => Buffer.from(s, 'utf8')) },
    {
      weight: 1,
      arbitrary: fc
        .tuple(jsonBody, fc.nat())
        .map(([s, cut]) => Buffer.from(s.slice(0, cut % Math.max(1, s.length)), 'utf8')),
    },
    { weight: 1, arbitrary: fc.uint8Array({ maxLength: 512 }).map((b) => Buffer.from(b)) },
    {
      weight: 1,
      arbitrary: fc.constantFrom(Buffer.alloc(0), Buffer.from('null'), Buffer.from('[]'), Buffer.from('{')),
    },
    {
      weight: 1,
      arbitrary: fc
        .integer({ min: 16_385, max: 40_000 })
        .map((n) => Buffer.from(`{"description":"${'x'.repeat(n)}"}`)),
    },
  );
  const tokenRef = fc.oneof(
    fc.string({
      unit: fc.constantFrom(...'abcdefghijklmnopqrstuvwxyz0123456789'),
      minLength: 6,
      maxLength: 6,
    }),
    fc
      .string({
        unit: fc.constantFrom(...'abcdefghijklmnopqrstuvwxyz0123456789'),
        minLength: 6,
        maxLength: 6,
      })
      .map((s) => `ft-${s}`),
    fc.string({ maxLength: 40 }).map(encodeURIComponent),
    fc.webSegment(),
    // (Malformed percent-encodings: see the test at the end.)
    fc.constantFrom(
      'ABCDEF',
      '%00',
      '..',
      '%2e%2e',
      '%2F',
      'a%2Fb',
      '-',
      '.',
      'ft-',
      `${'a'.repeat(300)}`,
      '%E2%82%AC',
    ),
  );
  const queryValue = fc.oneof(
    fc.constantFrom(
      'Issued',
      'Verified,Failed',
      'Done',
      '',
      '0',
      '1',
      '500',
      '501',
      '-1',
      'all',
      'own',
      'true',
      'false',
      '600',
      '601',
    ),
    fc.string({ maxLength: 30 }),
    fc.base64String({ maxLength: 60 }),
  );
  const queryOf = (keys: string[]) =>
    fc
      .array(fc.tuple(fc.constantFrom(...keys), queryValue), { maxLength: 4 })
      .map((pairs) => pairs.map(([k, v]) => `${encodeURIComponent(k)}=${encodeURIComponent(v)}`).join('&'));
  const listQuery = queryOf(['phase', 'limit', 'continue', 'scope', 'watch', 'bogus']);
  // Never watch=true with a valid timeout on a token that would answer: the fuzz refs do not exist.
  const watchQuery = queryOf(['watch', 'timeoutSeconds', 'x']);
  const unknownPath = fc.oneof(
    fc.constantFrom(
      '/',
      '/v1',
      '/v1/',
      '/v1/tokens/',
      '/v1/tokens/a/b',
      '/v2/tokens',
      '/V1/TOKENS',
      '/v1/flavors/x',
      '/metrics',
      '//v1//tokens',
      '/v1/tokens?x=1&x=2',
      '/..%2f..%2fetc%2fpasswd',
      '/openapi.json/',
      '/healthz/../v1/tokens',
      `/${'x'.repeat(4000)}`,
    ),
    fc.webPath().filter((p) => p.startsWith('/')),
  );
  const anyMethod = fc.constantFrom('GET', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS', 'HEAD', 'PROPFIND');

  /** Builds, filters and sends one request. */
  async function fuzzOne(
    who: CallerKind,
    garbage: string,
    method: string,
    path: string,
    body: Buffer | undefined,
    type: string | undefined,
    key: string | undefined,
  ): Promise<void> {
    fc.pre(!wouldMint(who, method, path, body));
    // Never touch a token that existed before (a DELETE would revoke it: that is a write).
    const ref = /^\/v1\/tokens\/([^/?]+)/.exec(path)?.[1];
    fc.pre(ref === undefined || !existing.has(decodeURIComponentSafe(ref)));
    const headers: Record<string, string> = { ...authorization(who, garbage) };
    if (type !== undefined) headers['content-type'] = type;
    if (key !== undefined) headers['idempotency-key'] = key;
    // Always framed: without Content-Length, node sends a DELETE's or OPTIONS's body unframed,
    // and the server rightly reads those bytes as a (garbage) second request.
    if (body) headers['content-length'] = String(body.length);
    await check({ method, path, headers, ...(body ? { body } : {}) });
  }

  function decodeURIComponentSafe(s: string): string {
    try {
      return decodeURIComponent(s);
    } catch {
      return s;
    }
  }

  it('POST /v1/tokens with random bodies and headers (150)', async () => {
    await fc.assert(
      fc.asyncProperty(
        caller,
        garbageAuthorization,
        rawBody,
        fc.option(contentType, { nil: undefined }),
        idempotencyKey,
        (who, garbage, body, type, key) =>
          fuzzOne(who, garbage, 'POST', '/v1/tokens', body, type ?? 'application/json', key),
      ),
      { numRuns: 150, seed: 4242 },
    );
  });

  it('GET and DELETE /v1/tokens/{random id} (plain and ?watch), GET /v1/tokens?{random query}, GET /v1/flavors, /healthz, /readyz, /openapi.json (120)', async () => {
    const route = fc.oneof(
      tokenRef.map((id) => ({ method: 'GET', path: `/v1/tokens/${id}` })),
      tokenRef.map((id) => ({ method: 'DELETE', path: `/v1/tokens/${id}` })),
      fc.constant({ method: 'GET', path: '/v1/flavors' }),
      // The caller's token list with random queries (phase, limit, continue, scope, unknown keys).
      listQuery.map((query) => ({ method: 'GET', path: `/v1/tokens?${query}` })),
      // Watches with random parameters, of tokens that are not the caller's or do not exist
      // (404 before any stream) or with a bad query (400).
      fc
        .tuple(tokenRef, watchQuery)
        .map(([id, query]) => ({ method: 'GET', path: `/v1/tokens/${id}?${query}` })),
      fc
        .constantFrom('/healthz', '/readyz', '/openapi.json', '/v1/flavors?limit=-1')
        .map((path) => ({ method: 'GET', path })),
    );
    await fc.assert(
      fc.asyncProperty(
        caller,
        garbageAuthorization,
        route,
        fc.option(rawBody, { nil: undefined }),
        fc.option(contentType, { nil: undefined }),
        (who, garbage, r, body, type) =>
          fuzzOne(who, garbage, r.method, r.path, r.method === 'GET' ? undefined : body, type, undefined),
      ),
      { numRuns: 120, seed: 4243 },
    );
  });

  it('wrong methods on every route, and unknown paths (60)', async () => {
    const known = fc.constantFrom(
      '/v1/tokens',
      '/v1/tokens/abcdef',
      '/v1/flavors',
      '/healthz',
      '/readyz',
      '/openapi.json',
    );
    await fc.assert(
      fc.asyncProperty(
        caller,
        garbageAuthorization,
        fc.oneof(known, unknownPath),
        anyMethod,
        fc.option(rawBody, { nil: undefined }),
        contentType,
        idempotencyKey,
        (who, garbage, path, method, body, type, key) =>
          fuzzOne(
            who,
            garbage,
            method,
            path,
            method === 'GET' || method === 'HEAD' ? undefined : body,
            type,
            key,
          ),
      ),
      { numRuns: 60, seed: 4244 },
    );
  });

  it("a path with a malformed percent-encoding gets the issuer's JSON error", {}, async () => {
    for (const path of ['/v1/tokens/%zz', '/v1/tokens/%E0%A4%A', '/%', '/v1/flavors%']) {
      for (const who of ['allowed', 'none'] as const) {
        const reply = await send({ method: 'GET', path, headers: authorization(who, '') });
        assert.ok(reply.status >= 400 && reply.status < 500, `${path}: ${reply.status}`);
        assert.ok(isIssuerError(reply.text), `${path} as ${who}: ${reply.status} ${reply.text}`);
      }
    }
  });

  it("unparseable HTTP and oversized headers get the issuer's JSON error", {}, async () => {
    const { hostname, port } = new URL(issuer.url);
    const raw = (text: string) =>
      new Promise<string>((resolve, reject) => {
        const socket = tlsConnect({ host: hostname, port: Number(port), ca: ca.certPem }, () =>
          socket.end(text),
        );
        const chunks: Buffer[] = [];
        socket.on('data', (chunk: Buffer) => chunks.push(chunk));
        socket.on('close', () => resolve(Buffer.concat(chunks).toString('utf8')));
        socket.on('error', reject);
      });
    for (const text of [
      'GARBAGE\r\n\r\n',
      'GET /healthz HTTP/1.1\r\nHost: x\r\nBad Header\r\n\r\n',
      'POST /v1/tokens HTTP/1.1\r\nHost: x\r\nContent-Length: abc\r\n\r\n',
      `GET /healthz HTTP/1.1\r\nHost: x\r\nIdempotency-Key: ${'k'.repeat(20_000)}\r\n\r\n`,
    ]) {
      const answer = await raw(text);
      const status = Number(/^HTTP\/1\.1 (\d{3})/.exec(answer)?.[1]);
      assert.ok(
        status >= 400 && status < 500,
        `${JSON.stringify(text.slice(0, 40))}: ${answer.slice(0, 100)}`,
      );
      const body = answer.slice(answer.indexOf('\r\n\r\n') + 4);
      assert.ok(isIssuerError(body), `${JSON.stringify(text.slice(0, 40))} → ${status} ${body}`);
    }
  });

  it('wrote nothing: no FlavoredToken and no bootstrap Secret appeared; the issuer still serves', async (t) => {
    t.diagnostic(
      `answers by status: ${[...statuses.entries()]
        .sort(([a], [b]) => a - b)
        .map(([s, n]) => `${s} × ${n}`)
        .join(', ')}`,
    );
    const newTokens = [...(await flavoredTokenNames())].filter((n) => !before0.tokens.has(n));
    const newSecrets = [...(await bootstrapSecretNames())].filter((n) => !before0.secrets.has(n));
    assert.deepEqual(newTokens, [], 'no FlavoredToken was created');
    assert.deepEqual(newSecrets, [], 'no bootstrap Secret was created');
    assert.equal((await send({ method: 'GET', path: '/healthz', headers: {} })).status, 200);
    const total = [...statuses.values()].reduce((a, b) => a + b, 0);
    assert.ok(total >= 250, `${total} requests answered`);
    for (const status of [200, 400, 401, 403, 404, 413, 415]) {
      assert.ok(statuses.has(status), `the fuzz reached answers with status ${status}`);
    }
  });
});
