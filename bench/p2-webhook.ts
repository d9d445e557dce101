// P2's webhook benchmark, the parts that run in processes of their own (so that the server and
// the load generator do not share an event loop), and what they share: the FlavorClass whose
// keys are protected and the AdmissionReview bodies the API server sends.
//   node --import tsx bench/p2-webhook.ts server --ready-file F --log-file L [--profile-dir D]
//   node --import tsx bench/p2-webhook.ts load --port P --ca-file F --out F [--connections 32]
//        [--duration-ms 10000] [--warmup-ms 1000] [--profile-pid PID]
// bench/p2-admission.ts starts both; it is what `bench/run.ts --only p2` runs.

import { randomUUID } from 'node:crypto';
import { readFileSync, writeFileSync } from 'node:fs';
import { pino } from 'pino';
import { Registry } from 'prom-client';
import { Pool } from 'undici';
import {
  protectedKeysFromFlavorClasses,
  QUARANTINE_TAINT_KEY,
  TOKEN_LABEL_KEY,
} from '../src/flavor/admission.ts';
import { rfc3339 } from '../src/flavor/rfc3339.ts';
import { createCertificateAuthority, issueCertificate } from '../src/pki/certs.ts';
import { AdmissionMetrics } from '../src/webhook/metrics.ts';
import { startWebhookServer } from '../src/webhook/server.ts';
import { realisticNode } from './fixture-nodes.ts';
import { percentile } from './lib.ts';
import { profileOnSignal, toggleProfile } from './profiling.ts';

// ---------------------------------------------------------------------------------------------
// What P2 guards and what the webhook is asked: the FlavorClass whose keys are protected, and
// AdmissionReview bodies as the API server sends them for writes that pass the webhook's
// matchConditions (only those touching protected keys reach it): ~15 KB Nodes (fixture-nodes.ts)
// as object and oldObject.

export const P2_FLAVOR = 'p2-bench';
export const P2_TIER_LABEL = 'bench.example.com/tier';
/** The admin group's namespace: its ServiceAccounts are in group system:serviceaccounts:<it>. */
export const P2_ADMIN_NAMESPACE = 'p2-admins';
export const P2_ADMIN_GROUP = `system:serviceaccounts:${P2_ADMIN_NAMESPACE}`;
/** The FlavorClass spec: one key under the nodeflavor.io/ prefix and explicit keys outside it. */
export const P2_FLAVOR_KEYS = {
  labels: { 'nodeflavor.io/flavor': 'p2', [P2_TIER_LABEL]: 'gold' },
  annotations: { 'bench.example.com/trust-note': 'vetted' },
  taints: [{ key: 'bench.example.com/dedicated', value: 'p2', effect: 'NoSchedule' }],
};

export interface ReviewBody {
  variant: 'kubelet-update-denied' | 'kubelet-create-allowed' | 'admin-update-allowed';
  allowed: boolean;
  body: Buffer;
}

type NodeObject = ReturnType<typeof realisticNode> & {
  metadata: { labels: Record<string, string>; annotations: Record<string, string> };
  spec: Record<string, unknown>;
};

function review(
  operation: 'CREATE' | 'UPDATE',
  name: string,
  userInfo: { username: string; groups: string[] },
  object: unknown,
  oldObject: unknown,
): Buffer {
  const gvk = { group: '', version: 'v1', kind: 'Node' };
  const gvr = { group: '', version: 'v1', resource: 'nodes' };
  return Buffer.from(
    JSON.stringify({
      apiVersion: 'admission.k8s.io/v1',
      kind: 'AdmissionReview',
      request: {
        uid: randomUUID(),
        kind: gvk,
        resource: gvr,
        requestKind: gvk,
        requestResource: gvr,
        name,
        operation,
        userInfo: { ...userInfo, extra: {} },
        object,
        oldObject,
        dryRun: false,
        options: {
          apiVersion: 'meta.k8s.io/v1',
          kind: operation === 'CREATE' ? 'CreateOptions' : 'UpdateOptions',
        },
      },
    }),
  );
}

/**
 * `perVariant` bodies of each kind, each with its own uid and Node: a kubelet changing a protected
 * label of its own Node (denied, logged at info), a kubelet registering with the token label and
 * the quarantine taint (allowed), an admin-group member changing a protected label (allowed).
 */
export function reviewBodies(perVariant: number): ReviewBody[] {
  const bodies: ReviewBody[] = [];
  const verifiedAt = rfc3339(new Date());
  for (let i = 0; i < perVariant; i++) {
    const name = `p2-load-${i}`;
    const kubelet = { username: `system:node:${name}`, groups: ['system:nodes', 'system:authenticated'] };
    const old = realisticNode(name, `t${String(i).padStart(5, '0')}`, verifiedAt) as NodeObject;
    old.metadata.labels[P2_TIER_LABEL] = 'gold';

    const relabelled = structuredClone(old);
    relabelled.metadata.labels[P2_TIER_LABEL] = 'platinum';
    bodies.push({
      variant: 'kubelet-update-denied',
      allowed: false,
      body: review('UPDATE', name, kubelet, relabelled, old),
    });

    const registering = structuredClone(old);
    delete registering.metadata.labels['nodeflavor.io/flavor'];
    delete registering.metadata.labels[P2_TIER_LABEL];
    delete registering.metadata.annotations['nodeflavor.io/verified'];
    registering.metadata.labels[TOKEN_LABEL_KEY] = 'a'.repeat(52);
    registering.spec.taints = [{ key: QUARANTINE_TAINT_KEY, effect: 'NoSchedule' }];
    bodies.push({
      variant: 'kubelet-create-allowed',
      allowed: true,
      body: review('CREATE', name, kubelet, registering, null),
    });

    const adminChange = structuredClone(old);
    adminChange.metadata.labels[P2_TIER_LABEL] = 'silver';
    bodies.push({
      variant: 'admin-update-allowed',
      allowed: true,
      body: review(
        'UPDATE',
        name,
        {
          username: `system:serviceaccount:${P2_ADMIN_NAMESPACE}:admin`,
          groups: [P2_ADMIN_GROUP, 'system:serviceaccounts', 'system:authenticated'],
        },
        adminChange,
        old,
      ),
    });
  }
  return bodies;
}

export interface LoadResult {
  connections: number;
  durationMs: number;
  reviews: number;
  reviewsPerSecond: number;
  failures: number;
  firstFailure?: string;
  p50Ms: number;
  p99Ms: number;
  byVariant: Record<string, number>;
  bodyBytes: { min: number; max: number };
}

function arg(name: string, fallback?: string): string {
  const at = process.argv.indexOf(`--${name}`);
  const value = at >= 0 ? process.argv[at + 1] : fallback;
  if (value === undefined) throw new Error(`--${name} is required`);
  return value;
}

// ---------------------------------------------------------------------------------------------
// `server`: P2's webhook server on its own, in its own process: startWebhookServer (the HTTPS endpoint
// `nodeflavor run` serves, minus the Kubernetes side: TLS from a throwaway CA, keys from a fixed
// FlavorClass), logging as `nodeflavor run` does (pino JSON, level info, synchronous writes) to a
// file. Writes {port, caPem, pid} to --ready-file once listening. With --profile-dir, SIGUSR2
// starts and stops a CPU profile (profiling.ts); SIGTERM closes the server and exits.
async function serve(): Promise<void> {
  const readyFile = arg('ready-file');
  const logFile = arg('log-file');
  const profileDir = arg('profile-dir', '');
  const profiler = profileDir === '' ? undefined : profileOnSignal(profileDir, 'webhook-server');

  const ca = await createCertificateAuthority('p2-webhook-bench-ca', 3_600_000);
  const serving = await issueCertificate(ca, {
    commonName: 'nodeflavor-webhook',
    ipAddresses: ['127.0.0.1'],
    usage: 'server',
    validFor: 3_600_000,
  });
  const logger = pino(
    {
      level: 'info',
      base: { component: 'nodeflavor' },
      redact: {
        paths: ['*.token', '*.secret', '*.authorization', '*.key', 'req.headers.authorization'],
        censor: '[redacted]',
      },
    },
    pino.destination({ dest: logFile, sync: true }),
  ).child({ component: 'admission' });
  const protectedKeys = protectedKeysFromFlavorClasses([P2_FLAVOR_KEYS]);
  const policy = {
    controllerUsernames: ['system:serviceaccount:nodeflavor:nodeflavor'],
    adminGroups: [P2_ADMIN_GROUP],
    protectedKeys,
  };
  const server = await startWebhookServer({
    host: '127.0.0.1',
    port: 0,
    certificate: serving,
    policy: () => policy,
    metrics: new AdmissionMetrics(new Registry()),
    logger,
  });
  writeFileSync(readyFile, JSON.stringify({ port: server.port, caPem: ca.certPem, pid: process.pid }));

  process.once('SIGTERM', () => {
    void (async () => {
      await profiler?.flush();
      await server.close();
      process.exit(0);
    })();
  });
}

// ---------------------------------------------------------------------------------------------
// `load`: P2's load generator for the webhook server alone, in a process of its own (so that it does not
// share an event loop with the server): an undici Pool with --connections keep-alive HTTP/1.1
// connections, each with one review in flight, POSTing AdmissionReview bodies (above) for a
// warm-up and then --duration-ms. Every answer is checked (HTTP 200, the review's uid, the
// expected decision). Writes the result as JSON to --out.
// With --profile-pid, the server is sent SIGUSR2 when the measured window starts and ends, so that
// its CPU profile (profiling.ts) covers exactly that window.
async function load(): Promise<void> {
  const port = Number(arg('port'));
  const ca = readFileSync(arg('ca-file'), 'utf8');
  const out = arg('out');
  const connections = Number(arg('connections', '32'));
  const durationMs = Number(arg('duration-ms', '10000'));
  const warmupMs = Number(arg('warmup-ms', '1000'));
  const profilePid = arg('profile-pid', '') === '' ? undefined : Number(arg('profile-pid'));

  const bodies = reviewBodies(32);
  const uids = bodies.map(
    (b) => (JSON.parse(b.body.toString('utf8')) as { request: { uid: string } }).request.uid,
  );
  const pool = new Pool(`https://127.0.0.1:${port}`, {
    connections,
    pipelining: 1,
    allowH2: false,
    connect: { ca, rejectUnauthorized: true },
  });

  let measuring = false;
  let stopping = false;
  let reviews = 0;
  let failures = 0;
  let firstFailure: string | undefined;
  const latencies: number[] = [];
  const byVariant: Record<string, number> = {};
  let next = 0;

  async function worker(): Promise<void> {
    while (!stopping) {
      const index = next++ % bodies.length;
      const review = bodies[index] as (typeof bodies)[number];
      const started = performance.now();
      let problem: string | undefined;
      try {
        const { statusCode, body } = await pool.request({
          path: '/validate-nodes',
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: review.body,
        });
        const text = await body.text();
        if (statusCode !== 200) problem = `HTTP ${statusCode}: ${text.slice(0, 200)}`;
        else {
          const answer = (JSON.parse(text) as { response?: { uid?: string; allowed?: boolean } }).response;
          if (answer?.uid !== uids[index]) problem = 'the answer names another uid';
          else if (answer?.allowed !== review.allowed)
            problem = `${review.variant}: allowed=${answer?.allowed}`;
        }
      } catch (error) {
        problem = (error as Error).message;
      }
      if (!measuring) continue;
      reviews += 1;
      latencies.push(performance.now() - started);
      byVariant[review.variant] = (byVariant[review.variant] ?? 0) + 1;
      if (problem !== undefined) {
        failures += 1;
        firstFailure ??= problem;
      }
    }
  }

  const workers = Array.from({ length: connections }, () => worker());
  await new Promise((resolve) => setTimeout(resolve, warmupMs));
  toggleProfile(profilePid);
  measuring = true;
  const started = performance.now();
  await new Promise((resolve) => setTimeout(resolve, durationMs));
  measuring = false;
  const elapsed = performance.now() - started;
  toggleProfile(profilePid);
  stopping = true;
  await Promise.all(workers);
  await pool.close();

  const sizes = bodies.map((b) => b.body.length);
  const result: LoadResult = {
    connections,
    durationMs: elapsed,
    reviews,
    reviewsPerSecond: reviews / (elapsed / 1000),
    failures,
    ...(firstFailure === undefined ? {} : { firstFailure }),
    p50Ms: percentile(latencies, 50),
    p99Ms: percentile(latencies, 99),
    byVariant,
    bodyBytes: { min: Math.min(...sizes), max: Math.max(...sizes) },
  };
  writeFileSync(out, JSON.stringify(result));
}

if (import.meta.main) {
  const mode = process.argv[2];
  if (mode === 'server') await serve();
  else if (mode === 'load') await load();
  else throw new Error('usage: node --import tsx bench/p2-webhook.ts server|load [flags]');
}
