// Issuer abuse: what a flood costs the token issuer and the callers it should serve, with the
// issuer's default limits. The issuer runs in a process of its own (p3-issuer-server.ts:
// startTokenIssuer as `nodeflavor run` wires it, the chart's NODE_OPTIONS, with 127.0.0.9 as a
// trusted proxy and the per-caller rate limit raised so that the well-behaved caller's own pace is
// not what is measured). Everything is on loopback; each client has its own 127.0.0.x address.
//   1. no flood: a well-behaved caller (GET /v1/flavors, 20/s, through the proxy 127.0.0.9 as
//      X-Forwarded-For 198.51.100.10) and probes (/healthz, /readyz, 5/s each from 127.0.0.8);
//   2. the same during a flood: fresh bad bearers as fast as 32 connections carry them, through
//      the same proxy (as 203.0.113.66) and directly from 127.0.0.2; slowloris from 127.0.0.3
//      (3× the per-address cap of connections trickling their headers, reopened when cut); body
//      tricklers from 127.0.0.4 (a valid bearer, one body byte a second).
// Figures: the caller's and the probes' p50/p99 with and without the flood, 5xx answers, the
// TokenReviews the flood caused (the API server's own counter, less the caller's, from the
// issuer's metric) against its budget, the issuer's RSS before, at peak and after, and when slow
// clients were cut off.
//   node --import tsx bench/issuer-abuse.ts [--scale quick]
import { readFileSync } from 'node:fs';
import { cpus, loadavg } from 'node:os';
import { DEFAULT_ISSUER_AUDIENCE, parseIssuerConfig } from '../src/tokenissuer/config.ts';
import { applyObjects } from '../test/e2e/cluster/apply.ts';
import {
  type Answer,
  badBearer,
  type Closed,
  call,
  clientAgent,
  RawClient,
  tokenReviewsSoFar,
} from '../test/e2e/support/abuse.ts';
import { deleteObjects } from '../test/e2e/support/admission.ts';
import { prepareOperatorIdentity } from '../test/e2e/support/chart.ts';
import { e2eEnvironment } from '../test/e2e/support/environment.ts';
import {
  clusterRoleBindingObject,
  serviceAccountObject,
  useFlavorClassesRole,
} from '../test/e2e/support/issuer.ts';
import { applyFlavorClass } from '../test/e2e/support/nodeflavor.ts';
import {
  benchDir,
  chartNodeOptions,
  type Figure,
  figure,
  log,
  runStandalone,
  type Scale,
  startBenchIssuer,
  summary,
} from './lib.ts';
import { waitForFile } from './p3-issuance.ts';

const FLAVOR = 'abuse-bench';
const PORTAL_NAMESPACE = 'abuse-portal';
const PORTAL = 'portal';
const PROXY = '127.0.0.9';
const CALLER_PACE_MS = 50;
const PROBE_PACE_MS = 200;
const FLOOD_CONNECTIONS = 32;

/** The limits under test: the issuer's defaults. */
const LIMITS = parseIssuerConfig({ tls: { certPem: 'x', keyPem: 'y' } });

function rssMiB(pid: number): number {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  return Number(/^VmRSS:\s+(\d+) kB/m.exec(status)?.[1] ?? 0) / 1024;
}

/** Calls `once` every `paceMs` (or back to back when slower) until `until()` is false. */
async function paced(paceMs: number, until: () => boolean, once: () => Promise<void>): Promise<void> {
  while (until()) {
    const started = performance.now();
    await once();
    const left = paceMs - (performance.now() - started);
    if (left > 0) await new Promise((resolve) => setTimeout(resolve, left));
  }
}

interface Phase {
  caller: Answer[];
  probes: Answer[];
  flood: Answer[];
  /** Requests of the well-behaved caller and the probes that got no answer at all. */
  errors: number;
  /** Flood requests that got no answer (a connection refused on arrival, say). */
  floodErrors: number;
}

export async function runIssuerAbuse(scale: Scale): Promise<Figure[]> {
  const phaseMs = scale === 'quick' ? 10_000 : 30_000;
  const env = await e2eEnvironment();
  const logs = benchDir('nodeflavor-bench-abuse-');
  log(
    `abuse: logs in ${logs}; 1-min load average ${(loadavg()[0] ?? 0).toFixed(2)} on ${cpus().length} cores`,
  );
  const { install } = await prepareOperatorIdentity(env);
  await applyFlavorClass(env, FLAVOR, { description: 'abuse benchmark' });
  const portalObjects = [
    { apiVersion: 'v1', kind: 'Namespace', metadata: { name: PORTAL_NAMESPACE } },
    serviceAccountObject(PORTAL, PORTAL_NAMESPACE),
    useFlavorClassesRole('abuse-bench-use', [FLAVOR]),
    clusterRoleBindingObject('abuse-bench-use', 'abuse-bench-use', PORTAL, PORTAL_NAMESPACE),
  ];
  await applyObjects(env.kubeconfigPath, portalObjects, 'nodeflavor-bench');
  const portalToken =
    (
      await env.core.createNamespacedServiceAccountToken({
        name: PORTAL,
        namespace: PORTAL_NAMESPACE,
        body: { spec: { expirationSeconds: 3600, audiences: [DEFAULT_ISSUER_AUDIENCE] } },
      })
    ).status?.token ?? '';

  const { process: issuerProcess, readyFile } = startBenchIssuer({
    name: 'abuse-issuer',
    logs,
    tag: 'issuer',
    kubeconfigPath: install.kubeconfigPath,
    apiServerEndpoint: env.apiServerEndpoint,
    nodeArgs: chartNodeOptions(),
    args: ['--settings', JSON.stringify({ trustedProxies: [PROXY] })],
  });
  try {
    await waitForFile(readyFile, issuerProcess);
    const ready = JSON.parse(readFileSync(readyFile, 'utf8')) as {
      url: string;
      caPem: string;
      pid: number;
      statsUrl: string;
    };
    const { url, caPem: ca, pid } = ready;
    const validReviews = async () => {
      const text = await (await fetch(`${ready.statsUrl}metrics`)).text();
      return Number(/^nodeflavor_issuer_bearer_reviews_total\{result="valid"\} (\d+)/m.exec(text)?.[1] ?? 0);
    };
    const callerAgent = clientAgent(PROXY, ca, 1);
    const probeAgent = clientAgent('127.0.0.8', ca, 1);
    const asCaller = () =>
      call(url, '/v1/flavors', {
        from: PROXY,
        ca,
        token: portalToken,
        headers: { 'x-forwarded-for': '198.51.100.10' },
        agent: callerAgent,
      });
    // Warm up: the caller's review, the FlavorClass watch, JIT.
    for (let i = 0; i < 20; i++) {
      const answer = await asCaller();
      if (answer.status !== 200) throw new Error(`the caller got ${answer.status}: ${answer.text}`);
    }

    const rss: number[] = [];
    const runPhase = async (flood: boolean): Promise<Phase> => {
      const started = performance.now();
      const running = () => performance.now() - started < phaseMs;
      const phase: Phase = { caller: [], probes: [], flood: [], errors: 0, floodErrors: 0 };
      const sampling = setInterval(() => rss.push(rssMiB(pid)), 250);
      const keep = (into: Answer[]) => (answer: Answer) => void into.push(answer);
      const failed = () => {
        phase.errors += 1;
      };
      const floodFailed = () => {
        phase.floodErrors += 1;
      };
      const work: Promise<void>[] = [
        paced(CALLER_PACE_MS, running, () => asCaller().then(keep(phase.caller), failed)),
        paced(PROBE_PACE_MS, running, async () => {
          await call(url, '/healthz', { from: '127.0.0.8', ca, agent: probeAgent }).then(
            keep(phase.probes),
            failed,
          );
          await call(url, '/readyz', { from: '127.0.0.8', ca, agent: probeAgent }).then(
            keep(phase.probes),
            failed,
          );
        }),
      ];
      if (flood) {
        let n = 0;
        const viaProxy = clientAgent(PROXY, ca, FLOOD_CONNECTIONS);
        const direct = clientAgent('127.0.0.2', ca, FLOOD_CONNECTIONS);
        for (let i = 0; i < FLOOD_CONNECTIONS; i++) {
          work.push(
            paced(0, running, () =>
              call(url, '/v1/flavors', {
                from: PROXY,
                ca,
                token: badBearer(n++),
                headers: { 'x-forwarded-for': '203.0.113.66' },
                agent: viaProxy,
              }).then(keep(phase.flood), floodFailed),
            ),
            paced(0, running, () =>
              call(url, '/v1/flavors', { from: '127.0.0.2', ca, token: badBearer(n++), agent: direct }).then(
                keep(phase.flood),
                floodFailed,
              ),
            ),
          );
        }
        work.push(
          Promise.all(work.slice(2)).then(() => {
            viaProxy.destroy();
            direct.destroy();
          }),
        );
      }
      await Promise.all(work);
      clearInterval(sampling);
      return phase;
    };

    /** Slowloris from 127.0.0.3, reopened when cut, for the flood phase; their cut-off times. */
    const slowloris = (until: () => boolean) => {
      const cut: Closed[] = [];
      let opened = 0;
      let refused = 0;
      const one = async (): Promise<void> => {
        while (until()) {
          const client = new RawClient(url, { from: '127.0.0.3', ca });
          opened += 1;
          const accepted = await client.connected.then(
            () => true,
            () => false,
          );
          if (!accepted) {
            refused += 1;
            // Refused at once: try again a little later, as a real slowloris would.
            await new Promise((resolve) => setTimeout(resolve, 200));
            continue;
          }
          client.send('GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n');
          client.trickle('X-Slow: 1\r\n', 1000);
          cut.push(await client.closed);
        }
      };
      const done = Promise.all(Array.from({ length: 3 * LIMITS.connections.maxPerAddress }, one));
      return { done, cut, counts: () => ({ opened, refused }) };
    };

    /** Body tricklers (a valid bearer) from 127.0.0.4: when each was cut off. */
    const bodyTricklers = (count: number) =>
      Promise.all(
        Array.from({ length: count }, async () => {
          const client = new RawClient(url, { from: '127.0.0.4', ca });
          await client.connected;
          const body = JSON.stringify({ flavorClassName: FLAVOR, description: 'x'.repeat(100) });
          client.send(
            `POST /v1/tokens HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer ${portalToken}\r\n` +
              `Content-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n`,
          );
          let sent = 0;
          const timer = setInterval(() => client.send(body.charAt(sent++)), 1000);
          const closed = await client.closed;
          clearInterval(timer);
          return closed;
        }),
      );

    log(`abuse: ${phaseMs / 1000} s without a flood`);
    const quiet = await runPhase(false);
    const rssBefore = rss.at(-1) ?? rssMiB(pid);
    rss.length = 0;

    log(`abuse: ${phaseMs / 1000} s with a flood`);
    const reviewsBefore = await tokenReviewsSoFar(env.kubeConfig);
    const validBefore = await validReviews();
    const floodStarted = performance.now();
    const flooding = () => performance.now() - floodStarted < phaseMs;
    const loris = slowloris(flooding);
    const tricklers = bodyTricklers(4);
    const flooded = await runPhase(true);
    const floodSeconds = (performance.now() - floodStarted) / 1000;
    const reviewsTotal = (await tokenReviewsSoFar(env.kubeConfig)) - reviewsBefore;
    const callerReviews = (await validReviews()) - validBefore;
    const floodReviews = reviewsTotal - callerReviews;
    const rssPeak = Math.max(...rss);
    const bodyCut = await tricklers;
    await loris.done;
    const headerCut = loris.cut;
    // Memory once the flood's connections are gone.
    const rssAfter = rssMiB(pid);

    const budget = LIMITS.rateLimit.unauthenticatedPerAddress;
    // Two flooding clients (203.0.113.66 behind the proxy, 127.0.0.2), each with its own budget.
    const allowed = 2 * Math.floor(budget.capacity + budget.refillPerSecond * floodSeconds);
    const all = [...quiet.caller, ...quiet.probes, ...flooded.caller, ...flooded.probes, ...flooded.flood];
    const fivexx = all.filter((a) => a.status >= 500).length;
    const notOk = [...quiet.caller, ...flooded.caller, ...quiet.probes, ...flooded.probes].filter(
      (a) => a.status !== 200,
    ).length;
    const ms = (answers: Answer[]) => summary(answers.map((a) => a.ms));
    const [cq, cf, pq, pf] = [ms(quiet.caller), ms(flooded.caller), ms(quiet.probes), ms(flooded.probes)];
    const floodRate = flooded.flood.length / floodSeconds;
    const statusCounts = flooded.flood.reduce<Record<number, number>>((c, a) => {
      c[a.status] = (c[a.status] ?? 0) + 1;
      return c;
    }, {});
    const seconds = (cut: Closed[]) => summary(cut.map((c) => c.afterMs / 1000));
    const hc = seconds(headerCut);
    const bc = seconds(bodyCut);
    const loadEnd = loadavg()[0] ?? 0;
    const { opened, refused } = loris.counts();
    log(
      `abuse: caller p50/p99 ${cq.p50.toFixed(1)}/${cq.p99.toFixed(1)} ms quiet, ${cf.p50.toFixed(1)}/${cf.p99.toFixed(1)} ms flooded; probes ${pq.p99.toFixed(1)} / ${pf.p99.toFixed(1)} ms p99`,
    );
    log(
      `abuse: flood ${flooded.flood.length} requests (${floodRate.toFixed(0)}/s, ${JSON.stringify(statusCounts)}), ${floodReviews} TokenReviews (allowed ${allowed}); slowloris ${opened} opened, ${refused} refused; RSS ${rssBefore.toFixed(0)} → ${rssPeak.toFixed(0)} → ${rssAfter.toFixed(0)} MiB`,
    );
    const common = `issuer defaults (headers 10 s, request 15 s, idle 65 s, 32 connections per address, failed-authentication budget 20 + 1/s per address) with 127.0.0.9 as a trusted proxy and the per-caller limit raised; issuer in its own process (tsx, chart NODE_OPTIONS); ${phaseMs / 1000} s per phase; 1-min load average ${loadEnd.toFixed(1)} at the end on ${cpus().length} shared cores`;
    const floodNote = `flood: ${flooded.flood.length} requests with fresh bad bearers (${floodRate.toFixed(0)}/s over ${FLOOD_CONNECTIONS} connections through the trusted proxy as 203.0.113.66 and ${FLOOD_CONNECTIONS} direct from 127.0.0.2; answers ${JSON.stringify(statusCounts)}, ${flooded.floodErrors} without an answer), slowloris from 127.0.0.3 (${opened} connections opened, ${refused} refused on arrival), 4 body tricklers`;
    return [
      figure({
        name: 'abuse: well-behaved caller p99 during a flood (same proxy address as the flood)',
        value: cf.p99,
        unit: 'ms',
        baseline: cq.p99,
        baselineName: 'no flood',
        goal: '< 1,000 ms, all 200',
        met: cf.p99 < 1_000 && notOk === 0 && flooded.errors === 0,
        notes: `GET /v1/flavors every ${CALLER_PACE_MS} ms through 127.0.0.9 as 198.51.100.10: p50 ${cf.p50.toFixed(1)} ms flooded, ${cq.p50.toFixed(1)} ms quiet (${flooded.caller.length} and ${quiet.caller.length} calls; answers other than 200 in both phases: ${notOk}); ${floodNote}; ${common}`,
      }),
      figure({
        name: 'abuse: /healthz and /readyz p99 during a flood',
        value: pf.p99,
        unit: 'ms',
        baseline: pq.p99,
        baselineName: 'no flood',
        goal: '< 1,000 ms, all 200',
        met: pf.p99 < 1_000 && notOk === 0,
        notes: `from 127.0.0.8 every ${PROBE_PACE_MS} ms each; p50 ${pf.p50.toFixed(1)} ms flooded, ${pq.p50.toFixed(1)} ms quiet; ${common}`,
      }),
      figure({
        name: 'abuse: 5xx answers (both phases, every client)',
        value: fivexx,
        unit: '',
        baseline: null,
        baselineName: null,
        goal: '0',
        met: fivexx === 0 && flooded.errors + quiet.errors === 0,
        notes: `${all.length} answers; connection errors on well-behaved clients: ${flooded.errors + quiet.errors}`,
      }),
      figure({
        name: 'abuse: TokenReviews caused by the flood',
        value: floodReviews,
        unit: '',
        baseline: allowed,
        baselineName: 'budget',
        goal: '≤ budget',
        met: floodReviews <= allowed,
        notes: `the API server's apiserver_request_total for tokenreviews over the flood phase (${reviewsTotal}), less the well-behaved caller's valid reviews (${callerReviews}, from nodeflavor_issuer_bearer_reviews_total); budget: two flooding clients × (20 + 1/s × ${floodSeconds.toFixed(1)} s); the flood sent ${flooded.flood.length} bad bearers`,
      }),
      figure({
        name: 'abuse: issuer RSS peak during the flood',
        value: rssPeak,
        unit: 'MiB',
        baseline: rssBefore,
        baselineName: 'before the flood',
        goal: '≤ 1.5× before the flood',
        met: rssPeak <= 1.5 * rssBefore,
        notes: `VmRSS every 250 ms; ${rssAfter.toFixed(0)} MiB after the flood's connections were cut; tsx adds to a compiled issuer's footprint`,
      }),
      figure({
        name: 'abuse: slowloris (header trickle) cut off after',
        value: hc.p50,
        unit: 's',
        baseline: LIMITS.connections.headersTimeoutSeconds,
        baselineName: 'headers timeout',
        goal: '≤ timeout + 1 s',
        met: hc.p99 <= LIMITS.connections.headersTimeoutSeconds + 1,
        notes: `${headerCut.length} connections that got past the cap, p99 ${hc.p99.toFixed(2)} s, from opening (TLS handshake included) to the server's close; one header line a second`,
      }),
      figure({
        name: 'abuse: body trickle cut off after',
        value: bc.p50,
        unit: 's',
        baseline: LIMITS.connections.requestTimeoutSeconds,
        baselineName: 'request timeout',
        goal: '≤ timeout + 1 s',
        met: bc.p99 <= LIMITS.connections.requestTimeoutSeconds + 1,
        notes: `${bodyCut.length} POST /v1/tokens with a valid bearer and one body byte a second, p99 ${bc.p99.toFixed(2)} s, answered 408: ${bodyCut.filter((c) => c.received.startsWith('HTTP/1.1 408')).length}`,
      }),
    ];
  } finally {
    await issuerProcess.stop();
    await deleteObjects(env, [
      ...portalObjects,
      { apiVersion: 'nodeflavor.io/v1alpha1', kind: 'FlavorClass', metadata: { name: FLAVOR } },
    ]);
  }
}

if (import.meta.main) await runStandalone(runIssuerAbuse);
