// How a portal learns which CA to trust for the issuer: `nodeflavor run` (as the chart's
// ServiceAccount, so the chart's RBAC must allow it) publishes the CA certificate of its
// self-managed issuer TLS in a ConfigMap (ca.crt only, never the CA key, which stays in the
// Secret), and keeps it current when the CA is replaced.
import assert from 'node:assert/strict';
import { request as httpsRequest } from 'node:https';
import { after, before, describe, it } from 'node:test';
import { freePort } from './cluster/ports.ts';
import type { ManagedProcess } from './cluster/process.ts';
import type { E2EEnvironment } from './support/environment.ts';
import { OPERATOR_NAMESPACE } from './support/nodeflavor.ts';
import { operatorFixture } from './support/operator-fixture.ts';
import { waitFor } from './support/wait.ts';

const SECRET = 'nodeflavor-issuer-tls';
const CONFIG_MAP = 'nodeflavor-issuer-ca';

describe('the issuer CA for portals (ConfigMap, certificate only)', () => {
  const fx = operatorFixture({ logPrefix: 'nodeflavor-issuer-ca-' });
  let env: E2EEnvironment;
  let operator: ManagedProcess | undefined;
  let port: number;

  const secretCa = async (): Promise<string | undefined> => {
    const secret = await env.core
      .readNamespacedSecret({ namespace: OPERATOR_NAMESPACE, name: SECRET })
      .catch(() => undefined);
    const data = secret?.data?.['ca.crt'];
    return data === undefined ? undefined : Buffer.from(data, 'base64').toString('utf8');
  };
  const configMap = () =>
    env.core
      .readNamespacedConfigMap({ namespace: OPERATOR_NAMESPACE, name: CONFIG_MAP })
      .catch(() => undefined);

  /** Whether the issuer's TLS handshake verifies against `ca` (and /healthz answers). */
  const verifiesWith = (ca: string) =>
    new Promise<boolean>((resolve) => {
      const req = httpsRequest(
        {
          host: '127.0.0.1',
          port,
          path: '/healthz',
          ca,
          servername: 'nodeflavor-issuer',
          checkServerIdentity: () => undefined,
        },
        (res) => {
          res.resume();
          resolve(res.statusCode === 200);
        },
      );
      req.on('error', () => resolve(false));
      req.end();
    });

  before(async () => {
    env = fx.env;
    for (const remove of [
      () => env.core.deleteNamespacedSecret({ namespace: OPERATOR_NAMESPACE, name: SECRET }),
      () => env.core.deleteNamespacedConfigMap({ namespace: OPERATOR_NAMESPACE, name: CONFIG_MAP }),
    ]) {
      await remove().catch(() => undefined);
    }
    port = await freePort();
    operator = fx.start(['--no-controller', '--issuer', `--issuer-address=127.0.0.1:${port}`]);
  });

  // After the fixture has stopped the operator, so it does not recreate them.
  after(async () => {
    await env.core
      .deleteNamespacedSecret({ namespace: OPERATOR_NAMESPACE, name: SECRET })
      .catch(() => undefined);
    await env.core
      .deleteNamespacedConfigMap({ namespace: OPERATOR_NAMESPACE, name: CONFIG_MAP })
      .catch(() => undefined);
  });

  it('publishes ca.crt only, the CA the issuer serves under, and follows a new CA', async () => {
    const published = await waitFor(
      async () => {
        const ca = (await configMap())?.data?.['ca.crt'];
        return ca !== undefined && ca === (await secretCa()) ? ca : undefined;
      },
      { what: `ConfigMap ${CONFIG_MAP} to hold the CA of Secret ${SECRET}`, timeoutMs: 60_000 },
    ).catch((error: Error) => {
      throw new Error(`${error.message}\n${operator?.lastLines() ?? ''}`);
    });
    const first = await configMap();
    assert.deepEqual(Object.keys(first?.data ?? {}), ['ca.crt'], 'the certificate and nothing else');
    assert.deepEqual(first?.binaryData ?? {}, {});
    assert.match(published, /^-----BEGIN CERTIFICATE-----/);
    assert.doesNotMatch(JSON.stringify(first), /PRIVATE KEY/);
    await waitFor(() => verifiesWith(published), {
      what: 'the issuer to verify against the published CA',
      timeoutMs: 30_000,
    });

    // The CA is replaced (the Secret deleted: the operator makes a new CA): the ConfigMap follows.
    await env.core.deleteNamespacedSecret({ namespace: OPERATOR_NAMESPACE, name: SECRET });
    const next = await waitFor(
      async () => {
        const ca = (await configMap())?.data?.['ca.crt'];
        return ca !== undefined && ca !== published && ca === (await secretCa()) ? ca : undefined;
      },
      { what: `ConfigMap ${CONFIG_MAP} to hold the new CA`, timeoutMs: 60_000 },
    );
    await waitFor(() => verifiesWith(next), {
      what: 'the issuer to verify against the new CA',
      timeoutMs: 30_000,
    });
    assert.equal(await verifiesWith(published), false, 'the old CA no longer verifies the issuer');
  });
});
