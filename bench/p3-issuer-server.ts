// P3's token issuer, in a process of its own: startTokenIssuer as `nodeflavor run` starts it (the
// chart ServiceAccount's kubeconfig, TokenReview authentication, the HMAC key ring Secret in the
// operator namespace), except for two settings the CLI has no flag for: the per-caller rate limit
// (30 burst / 1 per s by default, which would throttle a benchmark) is raised, and the TLS
// certificate comes from a throwaway CA instead of the nodeflavor-issuer-tls Secret. Logs (pino
// JSON, level info) go to a file. Writes {url, caPem, pid, statsUrl} to --ready-file once
// listening; statsUrl (plain HTTP on 127.0.0.1) answers how many connections the process's HTTP
// clients (undici, which @kubernetes/client-node uses) have opened so far, and how many requests
// they made, by verb and resource (`requests`). With --profile-dir,
// SIGUSR2 starts and stops a CPU profile; SIGTERM closes the server and exits. statsUrl + 'metrics'
// answers the issuer's Prometheus metrics. --settings JSON sets further issuer settings (top-level
// keys replace the ones above; the abuse benchmark uses it for trustedProxies).
// --reuse-connections is a what-if for diagnosis only: @kubernetes/client-node 2.0.1 builds a new
// undici Agent (so a new TLS connection) for every request; this wraps the KubeConfig so that every
// request shares the first Agent, to show what connection reuse would be worth.
//   node --import tsx bench/p3-issuer-server.ts --kubeconfig K --api-server-endpoint HOST:PORT
//        --namespace NS --ready-file F --log-file L [--profile-dir D] [--reuse-connections]
//        [--settings JSON]
import { subscribe } from 'node:diagnostics_channel';
import { writeFileSync } from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { KubeConfig, type RequestContext } from '@kubernetes/client-node';
import { pino } from 'pino';
import type { Registry } from 'prom-client';
import { createCertificateAuthority, issueCertificate } from '../src/pki/certs.ts';
import { parseIssuerConfig } from '../src/tokenissuer/config.ts';
import { startTokenIssuer } from '../src/tokenissuer/server.ts';
import { profileOnSignal } from './profiling.ts';

/** Far above anything the benchmark asks for: the figure is the issuer's, not the limiter's. */
export const P3_RATE_LIMIT = { capacity: 100_000, refillPerSecond: 100_000 };

function shareDispatcher(kubeConfig: KubeConfig): void {
  const apply = kubeConfig.applySecurityAuthentication.bind(kubeConfig);
  let shared: ReturnType<RequestContext['getDispatcher']>;
  kubeConfig.applySecurityAuthentication = async (context: RequestContext) => {
    await apply(context);
    const fresh = context.getDispatcher();
    if (fresh === undefined) return;
    if (shared === undefined) {
      shared = fresh;
      return;
    }
    context.setDispatcher(shared);
    void fresh.close();
  };
}

function arg(name: string, fallback?: string): string {
  const at = process.argv.indexOf(`--${name}`);
  const value = at >= 0 ? process.argv[at + 1] : fallback;
  if (value === undefined) throw new Error(`--${name} is required`);
  return value;
}

/**
 * "POST flavoredtokens", "GET configmaps", … for an API request path: what an issuance costs in
 * requests (names dropped; watches apart, since they are long-lived and not per issuance).
 */
export function requestKind(method: string, path: string): string {
  const [pathname = '', query = ''] = path.split('?');
  const segments = pathname.split('/').filter((s) => s !== '');
  // /api/v1/namespaces/NS/RESOURCE[/NAME[/SUB]] or /apis/G/V/RESOURCE[/NAME[/SUB]]
  const rest = segments.slice(segments[0] === 'api' ? 2 : 3);
  if (rest[0] === 'namespaces' && rest.length > 2) rest.splice(0, 2);
  const resource = rest[0] ?? pathname;
  const sub = rest.length > 2 ? `/${rest[2]}` : '';
  const verb = /(^|&)watch=(true|1)/.test(query) ? 'WATCH' : method;
  return `${verb} ${resource}${sub}`;
}

if (import.meta.main) {
  let connections = 0;
  subscribe('undici:client:connected', () => {
    connections += 1;
  });
  /** The issuer's own requests to the API server so far, by kind (the issuer's, not the API server's count). */
  const requests: Record<string, number> = {};
  subscribe('undici:request:create', (message) => {
    const { request } = message as { request: { method: string; path: string } };
    const kind = requestKind(request.method, request.path);
    requests[kind] = (requests[kind] ?? 0) + 1;
  });
  let registry: Registry | undefined;
  const stats = createServer((req, res) => {
    if (req.url === '/metrics' && registry) {
      void registry.metrics().then((text) => res.writeHead(200, { 'content-type': 'text/plain' }).end(text));
      return;
    }
    res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ connections, requests }));
  });
  await new Promise<void>((resolve) => stats.listen(0, '127.0.0.1', resolve));
  const statsUrl = `http://127.0.0.1:${(stats.address() as AddressInfo).port}/`;
  const profileDir = arg('profile-dir', '');
  const profiler = profileDir === '' ? undefined : profileOnSignal(profileDir, 'issuer');
  const ca = await createCertificateAuthority('p3-issuer-bench-ca', 24 * 3_600_000);
  const serving = await issueCertificate(ca, {
    commonName: 'nodeflavor-issuer',
    ipAddresses: ['127.0.0.1'],
    usage: 'server',
    validFor: 24 * 3_600_000,
  });
  const config = parseIssuerConfig({
    listen: { host: '127.0.0.1', port: 0 },
    tls: { certPem: serving.certPem, keyPem: serving.keyPem },
    keyRing: { namespace: arg('namespace') },
    issuance: { apiServerEndpoint: arg('api-server-endpoint') },
    rateLimit: { perCaller: P3_RATE_LIMIT },
    logLevel: 'info',
    ...(JSON.parse(arg('settings', '{}')) as Record<string, unknown>),
  });
  const kubeConfig = new KubeConfig();
  kubeConfig.loadFromFile(arg('kubeconfig'));
  if (process.argv.includes('--reuse-connections')) shareDispatcher(kubeConfig);
  const issuer = await startTokenIssuer(config, kubeConfig, {
    logStream: pino.destination({ dest: arg('log-file'), sync: true }),
  });
  registry = issuer.registry;
  writeFileSync(
    arg('ready-file'),
    JSON.stringify({ url: issuer.url, caPem: ca.certPem, pid: process.pid, statsUrl }),
  );
  process.once('SIGTERM', () => {
    void (async () => {
      await profiler?.flush();
      await issuer.close();
      stats.close();
      process.exit(0);
    })();
  });
}
