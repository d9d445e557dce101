// P2's load generator for the webhook server alone, in a process of its own (so that it does not
// share an event loop with the server): an undici Pool with --connections keep-alive HTTP/1.1
// connections, each with one review in flight, POSTing AdmissionReview bodies (p2-reviews.ts) for
// a warm-up and then --duration-ms. Every answer is checked (HTTP 200, the review's uid, the
// expected decision). Writes the result as JSON to --out.
//   node --import tsx bench/p2-webhook-load.ts --port P --ca-file F --out F [--connections 32]
//        [--duration-ms 10000] [--warmup-ms 1000] [--profile-pid PID]
// With --profile-pid, the server is sent SIGUSR2 when the measured window starts and ends, so that
// its CPU profile (p2-signal-profiler.ts) covers exactly that window.
import { readFileSync, writeFileSync } from 'node:fs';
import { Pool } from 'undici';
import { percentile } from './lib.ts';
import { reviewBodies } from './p2-reviews.ts';
import { toggleProfile } from './p2-signal-profiler.ts';

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
