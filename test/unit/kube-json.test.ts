// kubeJson (src/runtime/fetch.ts), every JSON request's path (undici's request, not fetch): headers,
// answers, errors and the deadline, against a local HTTP server standing in for the API server.
import assert from 'node:assert/strict';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { KubeConfig } from '@kubernetes/client-node';
import { withRequestDeadlines } from '../../src/runtime/deadlines.ts';
import { kubeJson } from '../../src/runtime/fetch.ts';
import { isAlreadyExists, KubeError } from '../../src/runtime/kube-error.ts';

interface Seen {
  method: string;
  url: string;
  headers: IncomingMessage['headers'];
  body: string;
}

const seen: Seen[] = [];
const server = createServer((req: IncomingMessage, res: ServerResponse) => {
  let body = '';
  req.on('data', (chunk: Buffer) => {
    body += chunk.toString();
  });
  req.on('end', () => {
    seen.push({ method: req.method ?? '', url: req.url ?? '', headers: req.headers, body });
    const json = (status: number, value: unknown) =>
      res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(value));
    if (req.url === '/slow') return; // never answers
    if (req.url === '/exists')
      return json(409, {
        kind: 'Status',
        reason: 'AlreadyExists',
        message: 'secrets "bootstrap-token-abcdef" already exists',
      });
    if (req.url === '/garbage') return res.writeHead(502).end('<html>bad gateway</html>');
    if (req.url === '/empty') return res.writeHead(200).end();
    return json(req.method === 'POST' ? 201 : 200, { echoed: body === '' ? null : JSON.parse(body) });
  });
});

let kubeConfig: KubeConfig;
before(async () => {
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  kubeConfig = new KubeConfig();
  kubeConfig.loadFromOptions({
    clusters: [
      {
        name: 'fake',
        server: `http://127.0.0.1:${(server.address() as AddressInfo).port}/`,
        skipTLSVerify: true,
      },
    ],
    users: [{ name: 'fake', token: 'bearer-for-test' }],
    contexts: [{ name: 'fake', cluster: 'fake', user: 'fake' }],
    currentContext: 'fake',
  });
  withRequestDeadlines(kubeConfig, 2000);
});
after(() => {
  server.closeAllConnections();
  server.close();
});

describe('kubeJson', () => {
  it('sends JSON with the credentials and content type, and answers the parsed body', async () => {
    const answer = await kubeJson<{ echoed: unknown }>(kubeConfig, 'PATCH', '/apis/x/v1/things/a', {
      body: { metadata: { annotations: { a: 'b' } } },
      contentType: 'application/merge-patch+json',
    });
    assert.deepEqual(answer, { echoed: { metadata: { annotations: { a: 'b' } } } });
    const request = seen.at(-1) as Seen;
    assert.equal(request.method, 'PATCH');
    assert.equal(request.url, '/apis/x/v1/things/a');
    assert.equal(request.headers.authorization, 'Bearer bearer-for-test');
    assert.equal(request.headers['content-type'], 'application/merge-patch+json');
    assert.equal(request.headers.accept, 'application/json');
    assert.equal(await kubeJson(kubeConfig, 'GET', '/empty'), undefined);
  });

  it('turns a Status into a KubeError (AlreadyExists stays recognisable), never the request body', async () => {
    await assert.rejects(
      kubeJson(kubeConfig, 'POST', '/exists', {
        body: { stringData: { 'token-secret': '0123456789abcdef' } },
        action: 'create Secret kube-system/bootstrap-token-abcdef',
      }),
      (error: unknown) => {
        assert.ok(error instanceof KubeError);
        assert.equal(error.status, 409);
        assert.ok(isAlreadyExists(error));
        assert.match(error.message, /^create Secret kube-system\/bootstrap-token-abcdef: secrets/);
        assert.ok(!error.message.includes('0123456789abcdef'));
        return true;
      },
    );
    await assert.rejects(kubeJson(kubeConfig, 'GET', '/garbage'), { status: 502, reason: 'HTTP502' });
  });

  it("gives up at the KubeConfig's deadline", async () => {
    const started = Date.now();
    await assert.rejects(kubeJson(kubeConfig, 'GET', '/slow'), { status: 0, reason: 'Timeout' });
    assert.ok(Date.now() - started < 10_000);
  });

  it('says Unreachable when nothing listens', async () => {
    const nowhere = new KubeConfig();
    nowhere.loadFromOptions({
      clusters: [{ name: 'n', server: 'http://127.0.0.1:1', skipTLSVerify: true }],
      users: [{ name: 'n' }],
      contexts: [{ name: 'n', cluster: 'n', user: 'n' }],
      currentContext: 'n',
    });
    await assert.rejects(kubeJson(nowhere, 'GET', '/x'), { status: 0, reason: 'Unreachable' });
  });
});
