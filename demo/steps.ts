// Steps of the demo that talk to the cluster or the issuer API like a real portal would.
import { request } from 'node:https';
import { DEFAULT_ISSUER_AUDIENCE } from '../src/tokenissuer/config.ts';
import { applyObjects } from '../test/e2e/cluster/apply.ts';
import type { E2EEnvironment } from '../test/e2e/support/environment.ts';
import { flavorUseRbac, serviceAccountToken } from '../test/e2e/support/nodeflavor.ts';
import { waitFor } from '../test/e2e/support/wait.ts';

export { freePort } from '../test/e2e/cluster/ports.ts';

/** A portal identity: a ServiceAccount allowed to `use` the given flavors, and a token for it. */
export async function portalToken(
  env: E2EEnvironment,
  namespace: string,
  flavors: string[],
): Promise<string> {
  await applyObjects(env.kubeconfigPath, [
    { apiVersion: 'v1', kind: 'ServiceAccount', metadata: { name: 'node-admin-portal', namespace } },
    ...flavorUseRbac('nodeflavor-portal', { name: 'node-admin-portal', namespace }, flavors),
  ]);
  // The issuer's audience (`kubectl create token --audience nodeflavor-issuer`): a token the
  // issuer accepts is useless against the API server, and the other way round.
  return serviceAccountToken(env, namespace, 'node-admin-portal', {
    audiences: [DEFAULT_ISSUER_AUDIENCE],
    expirationSeconds: 3600,
  });
}

/**
 * The CA the issuer's serving certificate chains to, as a portal learns it: from the ConfigMap
 * the operator publishes (certificate only), never from the TLS Secret, which holds the CA key.
 */
export async function readIssuerCa(
  env: E2EEnvironment,
  namespace: string,
  name = 'nodeflavor-issuer-ca',
): Promise<string> {
  let ca = '';
  await waitFor(
    async () => {
      const configMap = await env.core.readNamespacedConfigMap({ namespace, name }).catch(() => undefined);
      ca = configMap?.data?.['ca.crt'] ?? '';
      return ca !== '';
    },
    { what: `ConfigMap ${namespace}/${name} to hold the issuer CA`, timeoutMs: 30_000 },
  );
  return ca;
}

export interface Issued {
  id: string;
  joinConfiguration: string;
  /** The cluster CA and API server the JoinConfiguration reads (file discovery). */
  discoveryKubeconfig: string;
  discoveryKubeconfigPath: string;
  /** Attested tokens: the node-side script (ADR 0014); else null. */
  attestScript: string | null;
  tokenID: string;
  body: string;
}

export function issueThroughApi(
  url: string,
  ca: string,
  bearer: string,
  flavor: string,
  extra: Record<string, unknown> = {},
): Promise<Issued> {
  const payload = JSON.stringify({ flavorClassName: flavor, ttl: '1h', ...extra });
  return new Promise((resolve, reject) => {
    const req = request(
      `${url}/v1/tokens`,
      {
        method: 'POST',
        ca,
        headers: {
          Authorization: `Bearer ${bearer}`,
          'Content-Type': 'application/json',
          'Content-Length': Buffer.byteLength(payload),
        },
      },
      (res) => {
        let body = '';
        res.setEncoding('utf8');
        res.on('data', (chunk) => {
          body += chunk;
        });
        res.on('end', () => {
          if (res.statusCode !== 201 && res.statusCode !== 200) {
            reject(new Error(`POST /v1/tokens (${flavor}): HTTP ${res.statusCode}: ${body.slice(0, 300)}`));
            return;
          }
          const parsed = JSON.parse(body) as Omit<Issued, 'body'>;
          resolve({
            id: parsed.id,
            joinConfiguration: parsed.joinConfiguration,
            discoveryKubeconfig: parsed.discoveryKubeconfig,
            discoveryKubeconfigPath: parsed.discoveryKubeconfigPath,
            attestScript: parsed.attestScript,
            tokenID: parsed.tokenID,
            body,
          });
        });
      },
    );
    req.on('error', reject);
    req.end(payload);
  });
}

/** The demo's node table: flavor label, taints, verification record and whether the token label is gone. */
export async function nodeTable(env: E2EEnvironment): Promise<string> {
  const nodes = (await env.core.listNode()).items;
  const rows = nodes.map((node) => {
    const labels = node.metadata?.labels ?? {};
    const record = node.metadata?.annotations?.['nodeflavor.io/verified'];
    const verified = record ? (JSON.parse(record) as { tokenID: string; verifiedAt: string }) : undefined;
    return [
      node.metadata?.name ?? '',
      labels['nodeflavor.io/flavor'] ?? '<none>',
      (node.spec?.taints ?? []).map((t) => `${t.key}${t.value ? `=${t.value}` : ''}:${t.effect}`).join(',') ||
        '<none>',
      verified ? `token ${verified.tokenID} at ${verified.verifiedAt}` : 'no',
      labels['nodeflavor.io/token'] ? 'present' : 'removed',
    ];
  });
  const header = ['NODE', 'FLAVOR', 'TAINTS', 'VERIFIED', 'TOKEN LABEL'];
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? '').length)));
  return [header, ...rows]
    .map((row) =>
      row
        .map((cell, i) => cell.padEnd(widths[i] ?? 0))
        .join('   ')
        .trimEnd(),
    )
    .join('\n');
}
