// Fuzzing the admission webhook's HTTPS endpoint (src/webhook/server.ts) over a real TLS socket:
// random JSON values, arbitrary values serialised, truncated reviews, random bytes and
// well-shaped AdmissionReviews with random contents (review.test.ts fuzzes the pure review
// function; this goes through the server: body reading, parsing, answering). Every answer is
// either HTTP 400 with a message (no uid to answer to) or HTTP 200 with a well-formed
// AdmissionReview that echoes the request's uid; the server never crashes, and answers a valid
// review correctly at the end. ~500 requests, fixed seeds.
import assert from 'node:assert/strict';
import { Agent, request } from 'node:https';
import { after, before, describe, it } from 'node:test';
import fc from 'fast-check';
import { pino } from 'pino';
import { Registry } from 'prom-client';
import { protectedKeysFromFlavorClasses, TOKEN_LABEL_KEY } from '../../src/flavor/admission.ts';
import { createCertificateAuthority, issueCertificate } from '../../src/pki/certs.ts';
import { AdmissionMetrics } from '../../src/webhook/metrics.ts';
import { startWebhookServer, VALIDATE_NODES_PATH, type WebhookServer } from '../../src/webhook/server.ts';

const policy = {
  controllerUsernames: ['system:serviceaccount:nodeflavor:nodeflavor'],
  adminGroups: ['nodeflavor-admins'],
  protectedKeys: protectedKeysFromFlavorClasses([
    {
      labels: { 'example.com/tier': 'gold' },
      taints: [{ key: 'example.com/dedicated' }],
    },
  ]),
};

interface Reply {
  status: number;
  contentType: string;
  body: string;
}

function validReview(uid: string, labels: Record<string, string> = {}) {
  return {
    apiVersion: 'admission.k8s.io/v1',
    kind: 'AdmissionReview',
    request: {
      uid,
      kind: { group: '', version: 'v1', kind: 'Node' },
      resource: { group: '', version: 'v1', resource: 'nodes' },
      name: 'node-1',
      operation: 'CREATE',
      userInfo: { username: 'system:node:node-1', groups: ['system:nodes', 'system:authenticated'] },
      object: { metadata: { name: 'node-1', labels } },
    },
  };
}

/** The uid the server can answer to, parsed from the bytes exactly as the server reads them. */
function answerableUid(bytes: Buffer): string | undefined {
  let body: unknown;
  try {
    body = JSON.parse(bytes.toString('utf8'));
  } catch {
    return undefined;
  }
  const isRecord = (v: unknown): v is Record<string, unknown> =>
    typeof v === 'object' && v !== null && !Array.isArray(v);
  const req = isRecord(body) ? body.request : undefined;
  const uid = isRecord(req) ? req.uid : undefined;
  return typeof uid === 'string' && uid.length > 0 ? uid : undefined;
}

describe('fuzz: the webhook server answers any body well-formed, and never crashes', () => {
  let server: WebhookServer;
  let agent: Agent;
  let caPem: string;
  const counts = { 200: 0, 400: 0, other: 0 };

  before(async () => {
    const ca = await createCertificateAuthority('fuzz-webhook-ca', 3_600_000);
    caPem = ca.certPem;
    const serving = await issueCertificate(ca, {
      commonName: 'fuzz-webhook',
      ipAddresses: ['127.0.0.1'],
      usage: 'server',
      validFor: 3_600_000,
    });
    server = await startWebhookServer({
      host: '127.0.0.1',
      port: 0,
      certificate: { certPem: serving.certPem, keyPem: serving.keyPem },
      policy: () => policy,
      metrics: new AdmissionMetrics(new Registry()),
      logger: pino({ level: 'silent' }),
    });
    agent = new Agent({ ca: caPem, keepAlive: true, maxSockets: 4 });
  });

  after(async () => {
    agent.destroy();
    await server.close();
  });

  function send(
    body: Buffer | undefined,
    options: { path?: string; method?: string; headers?: Record<string, string> } = {},
  ): Promise<Reply> {
    return new Promise((resolve, reject) => {
      const req = request(
        {
          host: '127.0.0.1',
          port: server.port,
          path: options.path ?? VALIDATE_NODES_PATH,
          method: options.method ?? 'POST',
          agent,
          headers: { 'Content-Type': 'application/json', ...options.headers },
        },
        (res) => {
          const chunks: Buffer[] = [];
          res.on('data', (c: Buffer) => chunks.push(c));
          res.on('end', () =>
            resolve({
              status: res.statusCode ?? 0,
              contentType: String(res.headers['content-type'] ?? ''),
              body: Buffer.concat(chunks).toString('utf8'),
            }),
          );
        },
      );
      req.on('error', reject);
      req.end(body);
    });
  }

  /** Posts `bytes` and checks the answer against what the bytes say. */
  async function postAndCheck(bytes: Buffer): Promise<void> {
    const reply = await send(bytes);
    const uid = answerableUid(bytes);
    if (reply.status === 400) {
      counts[400] += 1;
      assert.equal(
        uid,
        undefined,
        `a body with uid ${uid} deserves an AdmissionReview, got 400: ${reply.body}`,
      );
      assert.ok(reply.body.trim().length > 0, '400 carries a message');
      assert.doesNotMatch(reply.body, /\n\s+at /, 'no stack trace');
      return;
    }
    if (reply.status !== 200) counts.other += 1;
    assert.equal(reply.status, 200, `status ${reply.status}: ${reply.body.slice(0, 200)}`);
    counts[200] += 1;
    assert.notEqual(uid, undefined, 'only a body with a uid gets an AdmissionReview');
    assert.match(reply.contentType, /^application\/json/);
    const review = JSON.parse(reply.body) as {
      apiVersion: unknown;
      kind: unknown;
      response: { uid: unknown; allowed: unknown; status?: { code?: unknown; message?: unknown } };
    };
    assert.equal(review.apiVersion, 'admission.k8s.io/v1');
    assert.equal(review.kind, 'AdmissionReview');
    assert.equal(review.response.uid, uid, 'the uid is echoed');
    assert.equal(typeof review.response.allowed, 'boolean');
    if (review.response.allowed === false) {
      assert.equal(review.response.status?.code, 403);
      assert.ok(
        typeof review.response.status?.message === 'string' && review.response.status.message.length > 0,
      );
      assert.doesNotMatch(review.response.status.message as string, /\n\s+at /, 'no stack trace');
    } else {
      assert.equal(review.response.status, undefined);
    }
  }

  const json = (value: unknown): Buffer => Buffer.from(JSON.stringify(value) ?? 'null', 'utf8');

  it('random JSON values (100)', async () => {
    await fc.assert(
      fc.asyncProperty(fc.jsonValue(), (v) => postAndCheck(json(v))),
      { numRuns: 100, seed: 9101 },
    );
  });

  it('arbitrary values serialised, incl. objects with a request and uid of any type (80)', async () => {
    const value = fc.oneof(
      fc.anything({ maxDepth: 4 }),
      fc.record({ request: fc.anything({ maxDepth: 3 }) }),
      fc.record({ request: fc.record({ uid: fc.anything({ maxDepth: 2 }) }) }),
    );
    await fc.assert(
      fc.asyncProperty(value, (v) => postAndCheck(json(v))),
      { numRuns: 80, seed: 9102 },
    );
  });

  it('truncated reviews (80)', async () => {
    await fc.assert(
      fc.asyncProperty(fc.uuid(), fc.nat(), (uid, cut) => {
        const text = JSON.stringify(validReview(uid, { [TOKEN_LABEL_KEY]: 'a'.repeat(52) }));
        return postAndCheck(Buffer.from(text.slice(0, cut % text.length), 'utf8'));
      }),
      { numRuns: 80, seed: 9103 },
    );
  });

  it('random bytes, and valid JSON with invalid UTF-8 spliced in (80)', async () => {
    const bytes = fc.oneof(
      fc.uint8Array({ maxLength: 2048 }).map((b) => Buffer.from(b)),
      fc.tuple(fc.uuid(), fc.uint8Array({ minLength: 1, maxLength: 16 })).map(([uid, junk]) => {
        const text = JSON.stringify(validReview(uid)).replace('node-1"', 'node-1\u0000"');
        const at = text.indexOf('\u0000');
        return Buffer.concat([
          Buffer.from(text.slice(0, at)),
          Buffer.from(junk),
          Buffer.from(text.slice(at + 1)),
        ]);
      }),
    );
    await fc.assert(
      fc.asyncProperty(bytes, (b) => postAndCheck(b)),
      { numRuns: 80, seed: 9104 },
    );
  });

  it('well-shaped AdmissionReviews with random requests and objects (160)', async () => {
    const labels = fc.dictionary(
      fc.oneof(
        fc.constantFrom(TOKEN_LABEL_KEY, 'example.com/tier', 'nodeflavor.io/flavor', 'kubernetes.io/os'),
        fc.string(),
      ),
      fc.oneof(fc.string(), fc.jsonValue()),
      { maxKeys: 4 },
    );
    const node = fc.oneof(
      fc.record(
        {
          metadata: fc.record(
            { name: fc.oneof(fc.constant('node-1'), fc.string()), labels, annotations: labels },
            { requiredKeys: [] },
          ),
          spec: fc.record(
            {
              taints: fc.oneof(
                fc.array(
                  fc.record(
                    {
                      key: fc.oneof(fc.constant('example.com/dedicated'), fc.string()),
                      effect: fc.string(),
                      value: fc.jsonValue(),
                    },
                    { requiredKeys: [] },
                  ),
                  { maxLength: 3 },
                ),
                fc.jsonValue(),
              ),
            },
            { requiredKeys: [] },
          ),
        },
        { requiredKeys: [] },
      ),
      fc.jsonValue(),
    );
    const requestArb = fc.record(
      {
        uid: fc.oneof(
          { weight: 8, arbitrary: fc.uuid() },
          { weight: 2, arbitrary: fc.string({ minLength: 1 }) },
          fc.constant(''),
          fc.integer(),
          fc.constant(null),
        ),
        kind: fc.oneof(fc.constant({ group: '', version: 'v1', kind: 'Node' }), fc.jsonValue()),
        resource: fc.oneof(
          fc.constant({ group: '', version: 'v1', resource: 'nodes' }),
          fc.record({
            group: fc.constantFrom('', 'apps'),
            version: fc.constant('v1'),
            resource: fc.constantFrom('nodes', 'pods'),
          }),
          fc.jsonValue(),
        ),
        subResource: fc.oneof(fc.constantFrom('status', ''), fc.jsonValue()),
        name: fc.oneof(fc.constant('node-1'), fc.string(), fc.jsonValue()),
        operation: fc.oneof(fc.constantFrom('CREATE', 'UPDATE', 'DELETE', 'CONNECT'), fc.string()),
        userInfo: fc.oneof(
          fc.record({
            username: fc.constantFrom(
              'system:node:node-1',
              'system:serviceaccount:nodeflavor:nodeflavor',
              'alice',
              '',
            ),
            groups: fc.subarray(['system:nodes', 'nodeflavor-admins', 'system:authenticated']),
          }),
          fc.jsonValue(),
        ),
        object: node,
        oldObject: node,
      },
      { requiredKeys: ['uid'] },
    );
    const envelope = fc.record({
      apiVersion: fc.oneof(
        fc.constant('admission.k8s.io/v1'),
        fc.constantFrom('admission.k8s.io/v1beta1', ''),
        fc.jsonValue(),
      ),
      kind: fc.oneof(fc.constant('AdmissionReview'), fc.string()),
      request: requestArb,
    });
    await fc.assert(
      fc.asyncProperty(envelope, (r) => postAndCheck(json(r))),
      { numRuns: 160, seed: 9105 },
    );
  });

  it('wrong paths, methods and content types get a 4xx with a message, never a 5xx (40)', async () => {
    const variant = fc.record({
      path: fc.oneof(
        fc.constant(VALIDATE_NODES_PATH),
        fc.constantFrom('/', '/validate', '/validate-nodes/x', '/healthz?x=1'),
        fc.webPath(),
      ),
      method: fc.constantFrom('GET', 'PUT', 'DELETE', 'PATCH', 'POST', 'OPTIONS'),
      contentType: fc.constantFrom(
        'application/json',
        'text/plain',
        'application/yaml',
        'application/json; charset=utf-8',
        '',
      ),
    });
    await fc.assert(
      fc.asyncProperty(variant, async ({ path, method, contentType }) => {
        const body = json(validReview('uid-variant'));
        const reply = await send(method === 'GET' ? undefined : body, {
          path,
          method,
          headers: { 'Content-Type': contentType },
        });
        assert.ok(reply.status < 500, `${method} ${path} (${contentType}): ${reply.status}`);
        if (reply.status >= 400) assert.ok(reply.body.trim().length > 0, 'a refusal carries a message');
      }),
      { numRuns: 40, seed: 9106 },
    );
  });

  it('still answers a valid review correctly afterwards', async (t) => {
    t.diagnostic(`answers: ${counts[200]} × 200, ${counts[400]} × 400, ${counts.other} other`);
    const allowed = await send(json(validReview('uid-final', { [TOKEN_LABEL_KEY]: 'a'.repeat(52) })));
    assert.equal(allowed.status, 200);
    assert.deepEqual(JSON.parse(allowed.body).response, { uid: 'uid-final', allowed: true });
    const denied = await send(json(validReview('uid-final-2', { 'example.com/tier': 'gold' })));
    assert.equal(JSON.parse(denied.body).response.allowed, false);
    assert.ok(counts[200] > 50 && counts[400] > 50, 'both kinds of answer were exercised');
  });
});
