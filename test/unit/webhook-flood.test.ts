// The webhook's port is reachable from the pod network, so from any node, and the same process
// renews the controller's Lease (issue 25, item 8). A flood of large reviews must not hold the
// event loop: bodies are parsed one per event-loop turn (a renewal's timer and I/O get a turn
// between any two), requests in flight are capped (beyond: 503, unread), and connections are capped.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { connect, type TLSSocket } from 'node:tls';
import { pino } from 'pino';
import { Registry } from 'prom-client';
import { protectedKeysFromFlavorClasses } from '../../src/flavor/admission.ts';
import { createBundle, servingNames, type TlsBundle } from '../../src/pki/serving-bundle.ts';
import { AdmissionMetrics } from '../../src/webhook/metrics.ts';
import { startWebhookServer, VALIDATE_NODES_PATH, type WebhookServer } from '../../src/webhook/server.ts';

const policy = {
  controllerUsernames: ['system:serviceaccount:nodeflavor:nodeflavor'],
  adminGroups: [],
  protectedKeys: protectedKeysFromFlavorClasses([]),
};

/** A review of about `bytes` bytes (a Node with a big annotation, as a real one can be). */
function largeReview(uid: string, bytes: number): string {
  return JSON.stringify({
    apiVersion: 'admission.k8s.io/v1',
    kind: 'AdmissionReview',
    request: {
      uid,
      kind: { group: '', version: 'v1', kind: 'Node' },
      resource: { group: '', version: 'v1', resource: 'nodes' },
      name: 'n1',
      operation: 'CREATE',
      userInfo: { username: 'system:node:n1', groups: ['system:nodes'] },
      object: { metadata: { name: 'n1', annotations: { 'example.com/blob': 'x'.repeat(bytes) } } },
    },
  });
}

function openTls(port: number, ca: string): Promise<TLSSocket> {
  return new Promise((resolve, reject) => {
    const socket = connect({ host: '127.0.0.1', port, ca, checkServerIdentity: () => undefined }, () =>
      resolve(socket),
    );
    socket.once('error', reject);
  });
}

/** Collects a socket's whole reply (until the server has answered one request). */
function replyOf(socket: TLSSocket): Promise<string> {
  return new Promise((resolve) => {
    let text = '';
    socket.on('data', (chunk: Buffer) => {
      text += chunk.toString('utf8');
      if (/\r\n\r\n/.test(text) && /Content-Length: (\d+)/i.test(text)) {
        const length = Number(/Content-Length: (\d+)/i.exec(text)?.[1]);
        if (text.length >= text.indexOf('\r\n\r\n') + 4 + length) resolve(text);
      }
    });
    socket.on('close', () => resolve(text));
    socket.on('error', () => resolve(text));
  });
}

describe('webhook under a flood', () => {
  let bundle: TlsBundle;
  let server: WebhookServer;

  before(async () => {
    bundle = await createBundle(
      {
        names: servingNames({ service: 'w', namespace: 'n', url: 'https://127.0.0.1/' }),
        servingLifetimeMs: 3_600_000,
      },
      new Date(),
    );
  });
  after(() => server?.close());

  const start = async (limits: { maxConnections?: number; maxRequestsInFlight?: number }) => {
    await server?.close();
    server = await startWebhookServer({
      host: '127.0.0.1',
      port: 0,
      certificate: { certPem: bundle.tlsCert, keyPem: bundle.tlsKey },
      policy: () => policy,
      metrics: new AdmissionMetrics(new Registry()),
      logger: pino({ level: 'silent' }),
      ...limits,
    });
  };

  test('large reviews that complete at the same instant are parsed one per event-loop turn', async () => {
    await start({});
    const count = 12;
    const bodies = Array.from({ length: count }, (_, i) => largeReview(`u-${i}`, 1_500_000));
    const sockets = await Promise.all(bodies.map(() => openTls(server.port, bundle.caCert)));
    const replies = sockets.map(replyOf);
    // Every request but its last byte, then every last byte in one go: the server sees them all
    // complete together, as when a flood's bodies arrive in the same turn.
    await Promise.all(
      sockets.map(
        (socket, i) =>
          new Promise<void>((resolve) => {
            const body = bodies[i] as string;
            const head = `POST ${VALIDATE_NODES_PATH} HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n`;
            socket.write(head + body.slice(0, -1), () => resolve());
          }),
      ),
    );
    let turn = 0;
    let ticking = true;
    const tick = () => {
      turn += 1;
      if (ticking) setImmediate(tick);
    };
    setImmediate(tick);
    const parsedInTurn: number[] = [];
    const parse = JSON.parse;
    JSON.parse = ((text: string, reviver?: (key: string, value: unknown) => unknown) => {
      if (text.length > 1_000_000) parsedInTurn.push(turn);
      return parse(text, reviver);
    }) as typeof JSON.parse;
    try {
      for (const [i, socket] of sockets.entries()) socket.write((bodies[i] as string).slice(-1));
      const answers = await Promise.all(replies);
      for (const answer of answers) assert.match(answer, /^HTTP\/1\.1 200/);
    } finally {
      JSON.parse = parse;
      ticking = false;
      for (const socket of sockets) socket.destroy();
    }
    assert.equal(parsedInTurn.length, count);
    const perTurn = new Map<number, number>();
    for (const t of parsedInTurn) perTurn.set(t, (perTurn.get(t) ?? 0) + 1);
    assert.equal(
      Math.max(...perTurn.values()),
      1,
      `parses per event-loop turn: ${JSON.stringify([...perTurn.values()])} (a timer waits behind all of a turn's)`,
    );
  });

  test('beyond the requests in flight, a request is answered 503 at once, its body unread', async () => {
    await start({ maxRequestsInFlight: 2 });
    const held = await Promise.all([0, 1].map(() => openTls(server.port, bundle.caCert)));
    const body = largeReview('u', 1000);
    const head = `POST ${VALIDATE_NODES_PATH} HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n`;
    // Two requests whose bodies never finish hold both slots.
    for (const socket of held) socket.write(head + body.slice(0, 10));
    await new Promise((resolve) => setTimeout(resolve, 50));
    const third = await openTls(server.port, bundle.caCert);
    const reply = replyOf(third);
    third.write(head);
    assert.match(await reply, /^HTTP\/1\.1 503/);
    for (const socket of [...held, third]) socket.destroy();
  });

  test('beyond the connection cap, a new connection is closed; the open ones keep working', async () => {
    await start({ maxConnections: 3 });
    const open = await Promise.all([0, 1, 2].map(() => openTls(server.port, bundle.caCert)));
    const closed = await new Promise<boolean>((resolve) => {
      const extra = connect({
        host: '127.0.0.1',
        port: server.port,
        ca: bundle.caCert,
        checkServerIdentity: () => undefined,
      });
      extra.once('secureConnect', () => {
        extra.destroy();
        resolve(false);
      });
      extra.once('error', () => resolve(true));
      extra.once('close', () => resolve(true));
    });
    assert.ok(closed, 'a fourth connection was served');
    const body = largeReview('u-ok', 100);
    const reply = replyOf(open[0] as TLSSocket);
    (open[0] as TLSSocket).write(
      `POST ${VALIDATE_NODES_PATH} HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`,
    );
    assert.match(await reply, /^HTTP\/1\.1 200/);
    for (const socket of open) socket.destroy();
  });
});
