// nodeflavor's own kubeconfig reading (src/runtime/kubeconfig.ts): what it reads itself, and what it
// leaves to client-node (plugins, proxies).
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { fencedKubeConfig } from '../../src/runtime/deadlines.ts';
import {
  kubeConfigFromFile,
  kubeConfigFromString,
  kubeConfigInCluster,
} from '../../src/runtime/kubeconfig.ts';

const dir = mkdtempSync(join(tmpdir(), 'nodeflavor-kubeconfig-'));
after(() => rmSync(dir, { recursive: true, force: true }));

function kubeconfig(user: Record<string, unknown>, cluster: Record<string, unknown> = {}): string {
  return JSON.stringify({
    apiVersion: 'v1',
    kind: 'Config',
    'current-context': 'c',
    contexts: [
      { name: 'other', context: { cluster: 'x', user: 'y' } },
      { name: 'c', context: { cluster: 'k', user: 'u' } },
    ],
    clusters: [{ name: 'k', cluster: { server: 'https://127.0.0.1:6443/', ...cluster } }],
    users: [{ name: 'u', user }],
  });
}

async function applied(kc: ReturnType<typeof kubeConfigFromString>) {
  const headers: Record<string, string> = {};
  let dispatcher: unknown;
  await kc.applySecurityAuthentication({
    setHeaderParam: (k, v) => {
      headers[k] = v;
    },
    setDispatcher: (d) => {
      dispatcher = d;
    },
    getSignal: () => undefined,
    setSignal: () => undefined,
  });
  return { headers, dispatcher };
}

describe('kubeconfig', () => {
  it('reads the current context: server, bearer token, CA; one dispatcher per TLS material', async () => {
    const kc = kubeConfigFromString(
      kubeconfig(
        { token: 'abc', as: 'someone' },
        { 'certificate-authority-data': Buffer.from('ca').toString('base64') },
      ),
      dir,
    );
    assert.equal(kc.getCurrentCluster()?.server, 'https://127.0.0.1:6443');
    const first = await applied(kc);
    assert.equal(first.headers.Authorization, 'Bearer abc');
    assert.equal(first.headers['Impersonate-User'], 'someone');
    assert.ok(first.dispatcher);
    assert.equal((await applied(kc)).dispatcher, first.dispatcher, 'connections are reused');
  });

  it("works through a leader term's fenced view (Object.create)", async () => {
    const kc = kubeConfigFromString(kubeconfig({ token: 'abc' }), dir);
    const fenced = fencedKubeConfig(kc, new AbortController().signal);
    assert.equal(fenced.getCurrentCluster()?.server, 'https://127.0.0.1:6443');
    assert.equal((await applied(fenced)).headers.Authorization, 'Bearer abc');
  });

  it('reads token files and relative paths against the kubeconfig directory', async () => {
    writeFileSync(join(dir, 'token'), 'from-file\n');
    writeFileSync(
      join(dir, 'config'),
      kubeconfig({ tokenFile: 'token' }, { 'insecure-skip-tls-verify': true }),
    );
    const { headers, dispatcher } = await applied(kubeConfigFromFile(join(dir, 'config')));
    assert.equal(headers.Authorization, 'Bearer from-file');
    assert.ok(dispatcher, 'insecure-skip-tls-verify needs its own dispatcher');
  });

  it('leaves exec plugins and auth providers to client-node', () => {
    writeFileSync(
      join(dir, 'exec'),
      kubeconfig({ exec: { command: 'true', apiVersion: 'client.authentication.k8s.io/v1' } }),
    );
    const kc = kubeConfigFromFile(join(dir, 'exec')) as unknown as { makeApiClient?: unknown };
    assert.equal(typeof kc.makeApiClient, 'function');
  });

  it('refuses plain HTTP unless TLS verification is explicitly off, and a missing context', () => {
    assert.throws(
      () => kubeConfigFromString(kubeconfig({}, { server: 'http://127.0.0.1:8080' }), dir),
      /HTTP/,
    );
    assert.throws(
      () => kubeConfigFromString(JSON.stringify({ 'current-context': 'nope' }), dir),
      /no context/,
    );
  });

  it('in a cluster: the service host and port, its CA and rotated token file', async () => {
    writeFileSync(join(dir, 'ca.crt'), 'ca');
    const saved = { host: process.env.KUBERNETES_SERVICE_HOST, port: process.env.KUBERNETES_SERVICE_PORT };
    process.env.KUBERNETES_SERVICE_HOST = 'fd00::1';
    process.env.KUBERNETES_SERVICE_PORT = '443';
    try {
      const kc = kubeConfigInCluster(dir);
      assert.equal(kc.getCurrentCluster()?.server, 'https://[fd00::1]:443');
      assert.equal((await applied(kc)).headers.Authorization, 'Bearer from-file');
    } finally {
      for (const [key, value] of [
        ['KUBERNETES_SERVICE_HOST', saved.host],
        ['KUBERNETES_SERVICE_PORT', saved.port],
      ] as const) {
        if (value === undefined) delete process.env[key];
        else process.env[key] = value;
      }
    }
  });
});
