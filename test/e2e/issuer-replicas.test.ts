// The token issuer as two replicas behind a Service without affinity (two `nodeflavor run`
// processes): a portal's retry with the same Idempotency-Key must get the same token whichever
// replica answers, exactly once, also when the first replica's API server hangs. Replica A talks
// to the API server through a proxy that stalls on command. It must hold that:
//   - a retry on the other replica answers the same token (before the fix the idempotency cache
//     was per replica: the retry minted a second token);
//   - two replicas answering the same request at once answer one token;
//   - a replica whose API server hangs answers an error within its request deadline (it never
//     holds the portal), and the retry on the other replica issues the token; once the hung
//     replica's API server answers again, its late attempt adds nothing;
//   - every key made exactly one FlavoredToken, and the answered bootstrap token is the one in its
//     Secret (the join would work); a key reused with another body is refused on either replica.
import assert from 'node:assert/strict';
import { request as httpsRequest } from 'node:https';
import { after, before, describe, it } from 'node:test';
import { CustomObjectsApi } from '@kubernetes/client-node';
import { bootstrapSecretName } from '../../src/flavor/bootstrap-token.ts';
import type { PlainIssueResponse } from '../../src/tokenissuer/response.ts';
import { applyObjects } from './cluster/apply.ts';
import { freePort } from './cluster/ports.ts';
import type { ManagedProcess } from './cluster/process.ts';
import { TcpProxy } from './cluster/tcp-proxy.ts';
import { operatorKubeconfigVia } from './support/chart.ts';
import type { E2EEnvironment } from './support/environment.ts';
import {
  clusterRoleBindingObject,
  serviceAccountObject,
  serviceAccountToken,
  useFlavorClassesRole,
} from './support/issuer.ts';
import { ensureNamespace, metricValue, OPERATOR_NAMESPACE, opsGet } from './support/nodeflavor.ts';
import { labelOnly, operatorFixture } from './support/operator-fixture.ts';
import { uniqueName, waitFor } from './support/wait.ts';

const PORTAL_NAMESPACE = 'nodeflavor-e2e-replicas';
const REQUEST_TIMEOUT_MS = 5_000;
const SLACK_MS = 2_000;

interface Answer {
  status: number;
  text: string;
}

describe('token issuer replicas: an Idempotency-Key holds across replicas', () => {
  let env: E2EEnvironment;
  let proxy: TcpProxy | undefined;
  let portalToken = '';
  let issuerCa = '';
  const flavor = uniqueName('replicas');
  const run = uniqueName('idem');
  const fx = operatorFixture({
    logPrefix: 'nodeflavor-issuer-replicas-',
    flavorClasses: labelOnly(flavor),
    // A's proxy forwards again before the replicas are stopped (a failed test may leave it stalled).
    beforeStop: () => proxy?.setMode('forward'),
  });
  const replicas: { op: ManagedProcess; port: number; metrics: number }[] = [];

  before(async () => {
    env = fx.env;
    await ensureNamespace(env, PORTAL_NAMESPACE);
    await applyObjects(env.kubeconfigPath, [
      serviceAccountObject('portal', PORTAL_NAMESPACE),
      useFlavorClassesRole('nodeflavor-e2e-replicas-use'),
      clusterRoleBindingObject(
        'nodeflavor-e2e-replicas-use',
        'nodeflavor-e2e-replicas-use',
        'portal',
        PORTAL_NAMESPACE,
      ),
    ]);
    portalToken = await serviceAccountToken(env, PORTAL_NAMESPACE, 'portal');
    proxy = await TcpProxy.start({
      upstreams: [{ host: '127.0.0.1', port: Number(new URL(env.server).port) }],
    });
  });

  // After the fixture has stopped the replicas.
  after(async () => {
    await proxy?.close();
  });

  async function replica(server: string): Promise<number> {
    const [port, metrics] = [await freePort(), await freePort()];
    const op = fx.start(
      [
        '--no-controller',
        '--issuer',
        '--issuer-address',
        `127.0.0.1:${port}`,
        '--join-api-server-endpoint',
        env.apiServerEndpoint,
        '--kube-request-timeout',
        `${REQUEST_TIMEOUT_MS}ms`,
      ],
      { metricsPort: metrics, kubeconfigPath: operatorKubeconfigVia(server, fx.logs, env.caPem) },
    );
    replicas.push({ op, port, metrics });
    await waitFor(async () => (await opsGet(metrics, '/readyz'))[0] === 200, {
      what: `issuer replica ${replicas.length} to be ready`,
      timeoutMs: 60_000,
    });
    return replicas.length - 1;
  }

  function post(index: number, key: string, body: unknown): Promise<Answer> {
    const payload = JSON.stringify(body);
    return new Promise((resolve, reject) => {
      const req = httpsRequest(
        `https://127.0.0.1:${replicas[index]?.port}/v1/tokens`,
        {
          method: 'POST',
          ca: issuerCa,
          headers: {
            authorization: `Bearer ${portalToken}`,
            'content-type': 'application/json',
            'content-length': String(Buffer.byteLength(payload)),
            'idempotency-key': key,
          },
        },
        (res) => {
          const chunks: Buffer[] = [];
          res.on('data', (chunk: Buffer) => chunks.push(chunk));
          res.on('end', () =>
            resolve({ status: res.statusCode ?? 0, text: Buffer.concat(chunks).toString('utf8') }),
          );
        },
      );
      req.on('error', reject);
      req.end(payload);
    });
  }

  const issued = (answer: Answer): PlainIssueResponse => {
    assert.equal(answer.status, 201, answer.text);
    return JSON.parse(answer.text) as PlainIssueResponse;
  };

  /** This run's FlavoredTokens, by the description every request of the run carries. */
  async function recordsOfRun(): Promise<string[]> {
    const list = (await env.kubeConfig.makeApiClient(CustomObjectsApi).listClusterCustomObject({
      group: 'nodeflavor.io',
      version: 'v1alpha1',
      plural: 'flavoredtokens',
    })) as { items: { metadata: { name: string }; spec: { description?: string } }[] };
    return list.items.filter((t) => t.spec.description?.startsWith(run)).map((t) => t.metadata.name);
  }

  /** The bootstrap token stored in the answer's Secret: what a node would authenticate with. */
  async function storedToken(answer: PlainIssueResponse): Promise<string> {
    const secret = await env.core.readNamespacedSecret({
      name: bootstrapSecretName(answer.tokenID),
      namespace: 'kube-system',
    });
    const data = secret.data ?? {};
    const decode = (k: string) => Buffer.from(data[k] ?? '', 'base64').toString('utf8');
    return `${decode('token-id')}.${decode('token-secret')}`;
  }

  it('a retry on any replica gets the same token, exactly once, even when a replica hangs', async (t) => {
    const stall = proxy as TcpProxy;
    const a = await replica(stall.url);
    const b = await replica(env.server);
    const tls = await env.core.readNamespacedSecret({
      name: 'nodeflavor-issuer-tls',
      namespace: OPERATOR_NAMESPACE,
    });
    issuerCa = Buffer.from(tls.data?.['ca.crt'] ?? '', 'base64').toString('utf8');
    const body = (n: number) => ({ flavorClassName: flavor, ttl: '1h', description: `${run}-${n}` });

    // 1. The answer was lost; the retry reaches the other replica.
    const first = issued(await post(a, `${run}-1`, body(1)));
    const retry = issued(await post(b, `${run}-1`, body(1)));
    assert.deepEqual(retry, first, 'the retry on the other replica answers the same token');
    assert.equal(
      await metricValue(
        replicas[b]?.metrics ?? 0,
        'nodeflavor_issuer_token_requests_total{result="replayed"}',
      ),
      1,
      'the other replica counts it as a replay',
    );

    // 2. Both replicas get the same request at once.
    const [onA, onB] = await Promise.all([post(a, `${run}-2`, body(2)), post(b, `${run}-2`, body(2))]);
    const [x, y] = [issued(onA), issued(onB)];
    assert.deepEqual(x, y, 'two replicas at once answer one token');

    // 3. The same key with another body, on either replica: refused.
    const reused = await post(b, `${run}-1`, body(99));
    assert.equal(reused.status, 409, reused.text);

    // 4. Replica A's API server hangs: A answers an error within its deadline; the retry on B issues.
    stall.setMode('stall');
    const asked = Date.now();
    const hung = await post(a, `${run}-3`, body(3));
    const answeredMs = Date.now() - asked;
    t.diagnostic(
      `the hung replica answered ${hung.status} after ${answeredMs} ms: ${hung.text.slice(0, 200)}`,
    );
    assert.ok(hung.status >= 500, `the hung replica answers an error (${hung.status}), not a token`);
    assert.ok(
      answeredMs <= 3 * REQUEST_TIMEOUT_MS + SLACK_MS,
      `within its request deadlines (${answeredMs} ms)`,
    );
    const rescued = issued(await post(b, `${run}-3`, body(3)));
    // A's API server answers again; the portal's last retry lands on A: still the same token.
    stall.setMode('forward');
    const late = issued(await post(a, `${run}-3`, body(3)));
    assert.deepEqual(late, rescued, 'the recovered replica answers the token the other one issued');

    // Exactly once: one record per key, and the Secret holds the answered token.
    const records = await recordsOfRun();
    assert.deepEqual(records.sort(), [first.id, x.id, rescued.id].sort(), 'one FlavoredToken per key');
    for (const answer of [first, x, rescued])
      assert.equal(
        await storedToken(answer),
        answer.bootstrapToken,
        `${answer.id}: the answered token works`,
      );
  });
});
