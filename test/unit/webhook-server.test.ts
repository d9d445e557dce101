// The webhook's HTTPS endpoint on a real socket: routing, refusals, decisions, metrics, logs that
// never carry a label value, and a certificate swap that keeps open connections working.
import assert from 'node:assert/strict';
import { Agent, request } from 'node:https';
import { after, before, describe, test } from 'node:test';
import type { TLSSocket } from 'node:tls';
import { pino } from 'pino';
import { Registry } from 'prom-client';
import { protectedKeysFromFlavorClasses, TOKEN_LABEL_KEY } from '../../src/flavor/admission.ts';
import { createBundle, renewServing, servingNames, type TlsBundle } from '../../src/pki/serving-bundle.ts';
import { AdmissionMetrics } from '../../src/webhook/metrics.ts';
import { startWebhookServer, VALIDATE_NODES_PATH, type WebhookServer } from '../../src/webhook/server.ts';

const SECRET_TOKEN = 'abcdefghijklmnopqrstuvwxyz234567abcdefghijklmnopqrst';
const policy = {
  controllerUsernames: ['system:serviceaccount:nodeflavor:nodeflavor'],
  adminGroups: [],
  protectedKeys: protectedKeysFromFlavorClasses([{ labels: { 'example.com/tier': 'gold' } }]),
};

interface Reply {
  status: number;
  body: string;
  serial: string;
}

function review(uid: string, labels: Record<string, string>, operation = 'CREATE') {
  return {
    apiVersion: 'admission.k8s.io/v1',
    kind: 'AdmissionReview',
    request: {
      uid,
      kind: { group: '', version: 'v1', kind: 'Node' },
      resource: { group: '', version: 'v1', resource: 'nodes' },
      name: 'node-1',
      operation,
      userInfo: { username: 'system:node:node-1', groups: ['system:nodes', 'system:authenticated'] },
      object: { metadata: { name: 'node-1', labels } },
    },
  };
}

describe('webhook server', () => {
  let bundle: TlsBundle;
  let server: WebhookServer;
  let agent: Agent;
  const registry = new Registry();
  const logs: string[] = [];

  const send = (
    path: string,
    body: string | undefined,
    headers: Record<string, string> = {},
    method = 'POST',
    chunked = false,
  ) =>
    new Promise<Reply>((resolve, reject) => {
      const req = request(
        {
          host: '127.0.0.1',
          port: server.port,
          path,
          method,
          agent,
          headers: { 'Content-Type': 'application/json', ...headers },
        },
        (res) => {
          // Read now: once the body has ended the socket goes back to the agent's pool.
          const serial = (res.socket as TLSSocket).getPeerX509Certificate()?.serialNumber ?? '';
          const chunks: Buffer[] = [];
          res.on('data', (c: Buffer) => chunks.push(c));
          res.on('end', () =>
            resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks).toString('utf8'), serial }),
          );
        },
      );
      req.on('error', reject);
      // A body in several writes goes out chunked, with no Content-Length to refuse it by up front.
      if (chunked && body !== undefined) {
        const middle = Math.floor(body.length / 2);
        req.write(body.slice(0, middle));
        req.end(body.slice(middle));
      } else req.end(body);
    });
  const post = (body: unknown) => send(VALIDATE_NODES_PATH, JSON.stringify(body));

  before(async () => {
    bundle = await createBundle(
      {
        names: servingNames({ service: 'w', namespace: 'n', url: 'https://127.0.0.1/' }),
        servingLifetimeMs: 3_600_000,
      },
      new Date(),
    );
    server = await startWebhookServer({
      host: '127.0.0.1',
      port: 0,
      certificate: { certPem: bundle.tlsCert, keyPem: bundle.tlsKey },
      policy: () => policy,
      metrics: new AdmissionMetrics(registry),
      logger: pino({ level: 'debug' }, { write: (line: string) => void logs.push(line) }),
      maxBodyBytes: 64 * 1024,
    });
    agent = new Agent({ ca: bundle.caCert, keepAlive: true, maxSockets: 1 });
  });

  after(async () => {
    agent.destroy();
    await server.close();
  });

  test('answers an AdmissionReview with the decision, echoing the uid', async () => {
    const allowed = await post(review('uid-1', { [TOKEN_LABEL_KEY]: SECRET_TOKEN }));
    assert.equal(allowed.status, 200);
    assert.deepEqual(JSON.parse(allowed.body), {
      apiVersion: 'admission.k8s.io/v1',
      kind: 'AdmissionReview',
      response: { uid: 'uid-1', allowed: true },
    });
    const denied = await post(
      review('uid-2', { 'example.com/tier': 'gold', [TOKEN_LABEL_KEY]: SECRET_TOKEN }),
    );
    const response = JSON.parse(denied.body).response;
    assert.equal(response.uid, 'uid-2');
    assert.equal(response.allowed, false);
    assert.equal(response.status.code, 403);
    assert.match(response.status.message, /label "example\.com\/tier" added/);
  });

  test('refuses what is not an answerable AdmissionReview', async () => {
    const noUid = await post({ apiVersion: 'admission.k8s.io/v1', kind: 'AdmissionReview', request: {} });
    assert.equal(noUid.status, 400);
    assert.match(noUid.body, /malformed AdmissionReview: .*uid/);
    assert.equal((await send(VALIDATE_NODES_PATH, '{not json')).status, 400);
    const yaml = await send(VALIDATE_NODES_PATH, 'a: b', { 'Content-Type': 'application/yaml' });
    assert.equal(yaml.status, 415);
    assert.match(yaml.body, /application\/json/);
    assert.equal((await send('/elsewhere', '{}')).status, 404);
    assert.equal((await send(VALIDATE_NODES_PATH, undefined, {}, 'GET')).status, 405);
  });

  test('a body over the limit gets 413 and no further reading', async () => {
    const huge = JSON.stringify(review('uid-big', { 'example.com/pad': 'x'.repeat(63) })).padEnd(
      100 * 1024,
      ' ',
    );
    assert.equal((await send(VALIDATE_NODES_PATH, huge)).status, 413, 'by Content-Length');
    assert.equal((await send(VALIDATE_NODES_PATH, huge, {}, 'POST', true)).status, 413, 'while reading');
    const small = JSON.stringify(review('uid-chunked', {}));
    assert.equal((await send(VALIDATE_NODES_PATH, small, {}, 'POST', true)).status, 200);
    // The server still answers afterwards (on a new connection).
    assert.equal((await post(review('uid-3', {}))).status, 200);
  });

  test('/healthz', async () => {
    const health = await send('/healthz', undefined, {}, 'GET');
    assert.equal(health.status, 200);
  });

  test('counts decisions by result and reason, and times them', async () => {
    const metrics = await registry.metrics();
    assert.match(
      metrics,
      /nodeflavor_admission_decisions_total\{result="allowed",reason="KubeletRegistration"\} [1-9]/,
    );
    assert.match(
      metrics,
      /nodeflavor_admission_decisions_total\{result="denied",reason="KubeletProtectedKey"\} [1-9]/,
    );
    assert.match(metrics, /nodeflavor_admission_review_duration_seconds_count [1-9]/);
    assert.match(metrics, /nodeflavor_admission_rejected_requests_total\{status="415"\} 1/);
  });

  test('logs uid, user, node and reason, never a label value', () => {
    const decisions = logs.map((l) => JSON.parse(l)).filter((l) => l.msg === 'admission decision');
    assert.ok(
      decisions.some((l) => l.uid === 'uid-2' && l.reason === 'KubeletProtectedKey' && l.node === 'node-1'),
    );
    assert.ok(decisions.every((l) => l.user === 'system:node:node-1'));
    assert.ok(!logs.some((l) => l.includes(SECRET_TOKEN)), 'a log line carries the token label value');
  });

  test('a new certificate serves new handshakes; an open connection carries on', async () => {
    const before = await post(review('uid-4', {}));
    const renewed = await renewServing(
      bundle,
      {
        names: servingNames({ service: 'w', namespace: 'n', url: 'https://127.0.0.1/' }),
        servingLifetimeMs: 3_600_000,
      },
      new Date(),
    );
    server.setCertificate({ certPem: renewed.tlsCert, keyPem: renewed.tlsKey });
    const sameConnection = await post(review('uid-5', {}));
    assert.equal(sameConnection.status, 200);
    assert.equal(sameConnection.serial, before.serial, 'the keep-alive connection was not dropped');
    const fresh = new Agent({ ca: bundle.caCert });
    try {
      const reply = await new Promise<string>((resolve, reject) => {
        const req = request(
          { host: '127.0.0.1', port: server.port, path: '/healthz', agent: fresh },
          (res) => {
            resolve((res.socket as TLSSocket).getPeerX509Certificate()?.serialNumber ?? '');
            res.resume();
          },
        );
        req.on('error', reject);
        req.end();
      });
      assert.notEqual(reply, before.serial, 'a new handshake gets the new certificate');
    } finally {
      fresh.destroy();
    }
  });

  test('a certificate that does not load is refused and the old one kept', async () => {
    server.setCertificate({ certPem: 'garbage', keyPem: 'garbage' });
    assert.equal((await post(review('uid-6', {}))).status, 200);
    assert.ok(logs.some((l) => l.includes('cannot load the new serving certificate')));
  });
});
