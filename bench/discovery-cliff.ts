// Issue 15, the cluster-info signature cliff: what N live bootstrap tokens cost issuance and joins.
// Every token with usage-bootstrap-signing makes kube-controller-manager's bootstrap signer keep a
// JWS for it in kube-public/cluster-info (an 85-byte value each) and re-sign the whole ConfigMap on every
// token change; a ConfigMap's values may total at most 1 MiB. Three modes, each on a fresh control plane:
//   kubeadm   plain kubeadm-style tokens (`kubeadm token create`: a signing Secret in kubeadm's
//             group); "issuance" is that Secret create; joins by token discovery, auto-approved.
//   token     nodeflavor with token discovery (the old default, now opt-in): its tokens sign.
//   file      nodeflavor with file discovery (the default): its tokens sign nothing.
//   file-nosigner  the same on a kube-controller-manager without the bootstrap signer (as a
//             cluster that uses only file discovery may run it): the signer re-reads every
//             bootstrap Secret on every bootstrap Secret change, signing or not.
// In the file modes each issuance round is followed by a round of raw Secret creates of the same
// shape (the floor, as in P3), so that drift of this shared machine shows in the floor too.
//   ab        the goal, robust to this shared machine's drift: two file-discovery control planes
//             side by side, with the first and the last level's live tokens, issuance rounds
//             alternating between them (ABBA); ab-nosigner the same without the bootstrap signer.
// For each N in the levels, N live tokens are pre-created directly as bootstrap Secrets of the
// mode's shape (fast: no issuer, no FlavoredToken), then measured: the issuance rate and latency
// (POST /v1/tokens through the issuer in a process of its own, p3-issuer-server.ts; the operator
// runs as well, as in a cluster, and approves the joins' CSRs), in rounds whose tokens are deleted
// after each round so that N stays N; a join's success and latency with a token issued just
// before (the simulated kubelet, discovering as kubeadm does); for nodeflavor, a plain kubeadm join
// alongside (the cliff breaks those too); cluster-info's size and signatures.
//   node --import tsx bench/discovery-cliff.ts [--scale quick] [--modes kubeadm,token,file,file-nosigner,ab,ab-nosigner]
//        [--levels 100,1000]

import { randomBytes } from 'node:crypto';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { cpus, loadavg } from 'node:os';
import { join } from 'node:path';
import { Pool } from 'undici';
import { randomString, TOKEN_ALPHABET } from '../src/flavor/bootstrap-token.ts';
import { rfc3339 } from '../src/flavor/rfc3339.ts';
import { kubeFetch, kubeJson } from '../src/runtime/fetch.ts';
import {
  DEFAULT_AUTH_EXTRA_GROUP,
  DEFAULT_ISSUER_AUDIENCE,
  DEFAULT_SECRET_DESCRIPTION,
  KUBEADM_BOOTSTRAP_GROUP,
  MAX_CLUSTER_INFO_SIGNATURES,
} from '../src/tokenissuer/config.ts';
import type { IssueResponse } from '../src/tokenissuer/response.ts';
import { applyObjects } from '../test/e2e/cluster/apply.ts';
import { ControlPlane } from '../test/e2e/cluster/controlplane.ts';
import { parseJoinConfiguration } from '../test/e2e/kubelet-sim/join-config.ts';
import { SimulatedKubelet } from '../test/e2e/kubelet-sim/kubelet.ts';
import { joinConfiguration } from '../test/e2e/support/bootstrap.ts';
import { prepareOperatorIdentity } from '../test/e2e/support/chart.ts';
import { type E2EEnvironment, loadEnvironment } from '../test/e2e/support/environment.ts';
import {
  clusterRoleBindingObject,
  serviceAccountObject,
  useFlavorClassesRole,
} from '../test/e2e/support/issuer.ts';
import { applyFlavorClass, nodeFiles, startOperator } from '../test/e2e/support/nodeflavor.ts';
import {
  benchDir,
  buildOperator,
  chartNodeOptions,
  type Figure,
  figure,
  freePort,
  log,
  mapLimit,
  printTable,
  type Scale,
  scaleFromArgs,
  startBenchIssuer,
  summary,
  waitReady,
} from './lib.ts';
import { waitForFile } from './p3-issuance.ts';
import { controlPlanePids, ProcessCpu } from './profiling.ts';

type Mode = 'kubeadm' | 'token' | 'file' | 'file-nosigner';
const MODE_NAMES: Record<Mode, string> = {
  kubeadm: 'kubeadm-style tokens',
  token: 'nodeflavor, token discovery (old default)',
  file: 'nodeflavor, file discovery (default)',
  'file-nosigner': 'nodeflavor, file discovery, no bootstrap signer',
};
/** Modes whose tokens sign nothing in cluster-info. */
const isFileMode = (mode: Mode) => mode === 'file' || mode === 'file-nosigner';
const FLAVOR = 'cliff-bench';
const PORTAL_NAMESPACE = 'cliff-portal';
const PRECREATED_LABEL = 'bench.nodeflavor.io/cliff';
const BOOTSTRAP_TYPE = 'bootstrap.kubernetes.io/token';
const CONCURRENCY = 8;
const JOIN_TIMEOUT_MS = 60_000;

interface Settings {
  levels: number[];
  rounds: number;
  perRound: number;
  joins: number;
}

const SETTINGS: Record<Scale, Settings> = {
  quick: { levels: [100, 1_000], rounds: 2, perRound: 50, joins: 1 },
  full: { levels: [100, 1_000, 4_500, 10_000, 12_500, 50_000], rounds: 6, perRound: 100, joins: 3 },
};

/** `--modes a,b` (or CLIFF_MODES=a,b, which reaches this script through bench/run.ts). */
function listArg(name: string): string[] | undefined {
  const at = process.argv.indexOf(`--${name}`);
  const value = at >= 0 ? process.argv[at + 1] : process.env[`CLIFF_${name.toUpperCase()}`];
  return value === undefined ? undefined : value.split(',').filter(Boolean);
}

interface JoinResult {
  ok: boolean;
  ms: number;
  error?: string;
}

interface Level {
  live: number;
  /** The level's name: the live count, or `<count>-again` for the re-measurement. */
  label: string;
  issued: number;
  refused: number;
  rate: number;
  p50: number;
  p99: number;
  cpuPerToken: string;
  /** cluster-info before the measurement: its data size and its JWS entries. */
  clusterInfoBytes: number;
  signatures: number;
  /** How long the bootstrap signer took to catch up after the pre-creation (signing modes). */
  settleMs: number | undefined;
  writable: boolean;
  joins: JoinResult[];
  kubeadmJoin: JoinResult | undefined;
  precreatePerSecond: number;
  /** The machine's 1-min load average during the level (mean of its start and end). */
  load: number;
  /** File modes: raw Secret creates of the same shape in the same rounds. */
  floor?: { rate: number; p50: number; p99: number; cpuPerCreate: string };
}

/** A bootstrap token Secret of the mode's shape, as JSON for a POST; labelled for counting. */
function tokenSecret(mode: Mode, label: string): { id: string; secret: string; body: string } {
  const id = randomString(TOKEN_ALPHABET, 6, randomBytes);
  const secret = randomString(TOKEN_ALPHABET, 16, randomBytes);
  const signing = !isFileMode(mode);
  const body = JSON.stringify({
    apiVersion: 'v1',
    kind: 'Secret',
    metadata: {
      name: `bootstrap-token-${id}`,
      namespace: 'kube-system',
      labels: { [PRECREATED_LABEL]: label },
    },
    type: BOOTSTRAP_TYPE,
    stringData: {
      'token-id': id,
      'token-secret': secret,
      expiration: rfc3339(new Date(Date.now() + 4 * 3_600_000)),
      'usage-bootstrap-authentication': 'true',
      ...(signing ? { 'usage-bootstrap-signing': 'true' } : {}),
      'auth-extra-groups': mode === 'kubeadm' ? KUBEADM_BOOTSTRAP_GROUP : DEFAULT_AUTH_EXTRA_GROUP,
      ...(mode === 'kubeadm' ? {} : { description: DEFAULT_SECRET_DESCRIPTION }),
    },
  });
  return { id, secret, body };
}

async function send(pool: Pool, method: string, path: string, bearer: string, body?: string) {
  const response = await pool.request({
    path,
    method,
    headers: {
      authorization: `Bearer ${bearer}`,
      accept: 'application/json',
      ...(body ? { 'content-type': 'application/json' } : {}),
    },
    ...(body ? { body } : {}),
  });
  return { status: response.statusCode, text: await response.body.text() };
}

async function clusterInfo(env: E2EEnvironment): Promise<{ bytes: number; signatures: number }> {
  const info = await kubeJson<{ data?: Record<string, string> }>(
    env.kubeConfig,
    'GET',
    '/api/v1/namespaces/kube-public/configmaps/cluster-info',
  );
  const entries = Object.entries(info.data ?? {});
  return {
    bytes: entries.reduce((sum, [key, value]) => sum + key.length + value.length, 0),
    signatures: entries.filter(([key]) => key.startsWith('jws-kubeconfig-')).length,
  };
}

/**
 * How many token signatures cluster-info can hold on this cluster: the bootstrap signer writes
 * cluster-info whole, so one more than this and its every write fails. Found by writing copies
 * of what it would write (the same kubeconfig, `jws-kubeconfig-<id>` keys, 85-character detached
 * JWS values, an Update by a field manager as the signer's) into a scratch ConfigMap, bisecting.
 * Returns the largest count that was stored and why the next one was refused.
 */
async function signatureCapacity(env: E2EEnvironment): Promise<{ capacity: number; refusal: string }> {
  const info = await kubeJson<{ data?: Record<string, string> }>(
    env.kubeConfig,
    'GET',
    '/api/v1/namespaces/kube-public/configmaps/cluster-info',
  );
  const kubeconfig = info.data?.kubeconfig ?? '';
  const value = `eyJhbGciOiJIUzI1NiIsImtpZCI6ImFiY2RlZiJ9..${'x'.repeat(43)}`;
  const path = '/api/v1/namespaces/kube-public/configmaps';
  const write = async (count: number): Promise<string | undefined> => {
    const data: Record<string, string> = { kubeconfig };
    for (let i = 0; i < count; i++) data[`jws-kubeconfig-${i.toString(36).padStart(6, '0')}`] = value;
    await kubeJson(env.kubeConfig, 'DELETE', `${path}/cliff-probe`).catch(() => undefined);
    try {
      await kubeJson(env.kubeConfig, 'POST', path, {
        body: { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'cliff-probe' }, data },
        query: { fieldManager: 'bootstrap-signer' },
      });
      return undefined;
    } catch (error) {
      return (error as Error).message.replace(/^POST [^:]+: /, '').slice(0, 200);
    }
  };
  let [lo, hi] = [0, 40_000];
  let refusal = (await write(hi)) ?? '';
  if (!refusal) return { capacity: hi, refusal: `${hi} signatures were stored` };
  while (hi - lo > 1) {
    const mid = Math.floor((lo + hi) / 2);
    const refused = await write(mid);
    if (refused === undefined) lo = mid;
    else [hi, refusal] = [mid, refused];
  }
  await kubeJson(env.kubeConfig, 'DELETE', `${path}/cliff-probe`).catch(() => undefined);
  return { capacity: lo, refusal };
}

/**
 * Until cluster-info carries exactly `expected` signatures. Past `capacity` it never will: the
 * signer's writes fail and cluster-info keeps the last one that fitted.
 */
async function settleSigner(
  env: E2EEnvironment,
  expected: number,
  capacity: number,
): Promise<{ ms: number; writable: boolean }> {
  const started = performance.now();
  if (expected > capacity) return { ms: 0, writable: false };
  const deadline = Date.now() + 300_000;
  while ((await clusterInfo(env)).signatures !== expected) {
    if (Date.now() > deadline) {
      log(`cliff: the bootstrap signer did not reach ${expected} signatures within 300 s; carrying on`);
      break;
    }
    await new Promise((resolve) => setTimeout(resolve, 250));
  }
  return { ms: performance.now() - started, writable: true };
}

async function timedJoin(material: Parameters<typeof nodeFiles>[0], name: string, startedAt: number) {
  const text = typeof material === 'string' ? material : material.joinConfiguration;
  const kubelet = new SimulatedKubelet(name, parseJoinConfiguration(text), {
    timeoutMs: JOIN_TIMEOUT_MS,
    readFile: nodeFiles(material),
  });
  try {
    await kubelet.join();
    return { ok: true, ms: performance.now() - startedAt };
  } catch (error) {
    return { ok: false, ms: performance.now() - startedAt, error: (error as Error).message.slice(0, 160) };
  } finally {
    kubelet.stop();
  }
}

interface ModeRun {
  mode: Mode;
  levels: Level[];
  /** The first level measured again after the others (file discovery): the drift meanwhile. */
  again?: Level;
  /** Signing modes: how many signatures cluster-info can hold, and why one more is refused. */
  capacity?: { capacity: number; refusal: string };
  stoppedAt?: string;
}

/**
 * One fresh control plane for a mode, with the issuer and the operator (nodeflavor modes), and
 * what a measurement does on it. `tag` tells apart the processes of two planes run side by side.
 */
async function openPlane(mode: Mode, settings: Settings, logs: string, tag: string = mode) {
  const plane = await ControlPlane.start({
    log: (line) => log(`[control-plane ${tag}] ${line}`),
    ...(mode === 'file-nosigner' ? { controllers: '*,tokencleaner' } : {}),
  });
  const env = await loadEnvironment(plane.kubeconfigPath);
  const stops: (() => Promise<void>)[] = [];
  const close = async () => {
    for (const stop of stops.reverse()) await stop().catch(() => undefined);
    await plane.stop();
  };
  try {
    // The chart's RBAC and ServiceAccount on this plane: the issuer, the operator and the
    // pre-creation all act as it (it may create bootstrap Secrets, as the issuer does).
    const { install, kubeConfig: operatorKubeConfig } = await prepareOperatorIdentity(env, {
      'joins.discovery': isFileMode(mode) ? 'file' : 'token',
    });
    const operatorToken = operatorKubeConfig.getCurrentUser()?.token ?? '';
    const api = new Pool(new URL(env.server).origin, {
      connections: 32,
      pipelining: 1,
      allowH2: false,
      connect: { ca: env.caPem },
    });
    stops.push(() => api.close());
    const pids: Record<string, number> = { ...controlPlanePids(plane.kubeconfigPath), bench: process.pid };

    let issuer: { pool: Pool; bearer: string } | undefined;
    if (mode !== 'kubeadm') {
      await applyFlavorClass(env, FLAVOR, { description: 'cliff benchmark nodes' });
      await applyObjects(env.kubeconfigPath, portalObjects(), 'nodeflavor-bench');
      const bearer =
        (
          await env.core.createNamespacedServiceAccountToken({
            name: 'portal',
            namespace: PORTAL_NAMESPACE,
            body: { spec: { expirationSeconds: 3600 * 6, audiences: [DEFAULT_ISSUER_AUDIENCE] } },
          })
        ).status?.token ?? '';
      const { process: issuerProcess, readyFile } = startBenchIssuer({
        name: `issuer-${tag}`,
        logs,
        tag: `issuer-${tag}`,
        kubeconfigPath: install.kubeconfigPath,
        apiServerEndpoint: env.apiServerEndpoint,
        args: [
          '--settings',
          JSON.stringify({
            issuance: {
              apiServerEndpoint: env.apiServerEndpoint,
              discovery: isFileMode(mode) ? 'file' : 'token',
              // The old behaviour as far as the guard lets it go (its highest setting).
              maxClusterInfoSignatures: MAX_CLUSTER_INFO_SIGNATURES,
            },
          }),
        ],
      });
      stops.push(() => issuerProcess.stop());
      await waitForFile(readyFile, issuerProcess);
      const ready = JSON.parse(readFileSync(readyFile, 'utf8')) as {
        url: string;
        caPem: string;
        pid: number;
      };
      pids.issuer = ready.pid;
      const pool = new Pool(ready.url, {
        connections: CONCURRENCY,
        pipelining: 1,
        allowH2: false,
        connect: { ca: ready.caPem },
      });
      stops.push(() => pool.close());
      issuer = { pool, bearer };

      const metricsPort = await freePort();
      const operator = startOperator(
        join(logs, `operator-${tag}.log`),
        ['--no-leader-elect', '--log-level', 'warn'],
        {
          metricsPort,
          nodeArgs: chartNodeOptions(),
          built: true,
          // Two planes may run side by side: each operator with its own plane's identity.
          kubeconfigPath: install.kubeconfigPath,
        },
      );
      stops.push(() => operator.stop());
      await waitReady(metricsPort);
      const operatorPid = operator.componentPid();
      if (operatorPid) pids.operator = operatorPid;
    }
    const cpu = new ProcessCpu(pids);
    const { capacity, refusal } = isFileMode(mode)
      ? { capacity: Number.POSITIVE_INFINITY, refusal: '' }
      : await signatureCapacity(env);
    if (!isFileMode(mode)) {
      log(
        `cliff ${mode}: cluster-info holds at most ${capacity} token signatures here; one more: ${refusal}`,
      );
    }

    /** Issues one token: through the issuer, or as `kubeadm token create` does. */
    const issueOne = async (): Promise<
      { ok: true; tokenId: string; name?: string; answer?: IssueResponse; token?: string } | { ok: false }
    > => {
      if (!issuer) {
        // Like `kubeadm token create`, which also draws another ID when one is taken.
        for (;;) {
          const { id, secret, body } = tokenSecret('kubeadm', 'issued');
          const answer = await send(
            api,
            'POST',
            '/api/v1/namespaces/kube-system/secrets',
            operatorToken,
            body,
          );
          if (answer.status === 201) return { ok: true, tokenId: id, token: `${id}.${secret}` };
          if (answer.status !== 409)
            throw new Error(`Secret create: HTTP ${answer.status}: ${answer.text.slice(0, 200)}`);
        }
      }
      const answer = await send(
        issuer.pool,
        'POST',
        '/v1/tokens',
        issuer.bearer,
        JSON.stringify({ flavorClassName: FLAVOR, ttl: '4h' }),
      );
      if (answer.status === 503) return { ok: false };
      if (answer.status !== 201)
        throw new Error(`POST /v1/tokens: HTTP ${answer.status}: ${answer.text.slice(0, 200)}`);
      const issued = JSON.parse(answer.text) as IssueResponse;
      return { ok: true, tokenId: issued.tokenID, name: issued.id, answer: issued };
    };
    const forget = async (tokens: { tokenId: string; name?: string }[]) => {
      await mapLimit(tokens, 16, async (t) => {
        if (t.name)
          await send(api, 'DELETE', `/apis/nodeflavor.io/v1alpha1/flavoredtokens/${t.name}`, operatorToken);
        await send(
          api,
          'DELETE',
          `/api/v1/namespaces/kube-system/secrets/bootstrap-token-${t.tokenId}`,
          operatorToken,
        );
      });
    };

    /** One raw Secret create of the mode's shape (the floor); its token ID. */
    const createRaw = async (): Promise<string> => {
      for (;;) {
        const { id, body } = tokenSecret(mode, 'floor');
        const answer = await send(api, 'POST', '/api/v1/namespaces/kube-system/secrets', operatorToken, body);
        if (answer.status === 201) return id;
        if (answer.status !== 409) throw new Error(`Secret create: HTTP ${answer.status}`);
      }
    };

    /**
     * Issues perRound tokens `rounds` times, deleting each round's tokens after it; in the file
     * modes each round is followed by as many raw Secret creates (the floor), deleted likewise.
     */
    const issueRounds = async (
      rounds: number,
      phase: string,
      live: number,
      writable: boolean,
      withFloor = true,
    ) => {
      const latencies: number[] = [];
      const floorLatencies: number[] = [];
      let elapsedMs = 0;
      let floorMs = 0;
      let refused = 0;
      for (let round = 0; round < rounds; round++) {
        const tokens: { tokenId: string; name?: string }[] = [];
        let cpuBefore = cpu.snapshot();
        let started = performance.now();
        await mapLimit(Array.from({ length: settings.perRound }), CONCURRENCY, async () => {
          const t0 = performance.now();
          const result = await issueOne();
          if (!result.ok) {
            refused += 1;
            return;
          }
          latencies.push(performance.now() - t0);
          tokens.push(result);
        });
        elapsedMs += performance.now() - started;
        cpu.add(phase, cpuBefore, cpu.snapshot(), tokens.length);
        await forget(tokens);
        if (isFileMode(mode) && withFloor) {
          const raw: { tokenId: string }[] = [];
          cpuBefore = cpu.snapshot();
          started = performance.now();
          await mapLimit(Array.from({ length: settings.perRound }), CONCURRENCY, async () => {
            const t0 = performance.now();
            raw.push({ tokenId: await createRaw() });
            floorLatencies.push(performance.now() - t0);
          });
          floorMs += performance.now() - started;
          cpu.add(`${phase}-floor`, cpuBefore, cpu.snapshot(), raw.length);
          await forget(raw);
        }
        if (!isFileMode(mode) && writable) await settleSigner(env, live, capacity);
      }
      return { latencies, elapsedMs, refused, floorLatencies, floorMs, cpu: cpu.perUnit(phase) };
    };

    /** One join with a token issued just before, and (nodeflavor) a plain kubeadm join alongside. */
    const joinsAt = async (live: number, label: string) => {
      const joins: JoinResult[] = [];
      for (let i = 0; i < settings.joins; i++) {
        const startedAt = performance.now();
        const result = await issueOne();
        if (!result.ok) {
          joins.push({ ok: false, ms: 0, error: 'not issued: the issuer refused (503, cluster-info full)' });
          break;
        }
        const material = result.answer ?? joinConfiguration(env, result.token ?? '');
        const joined = await timedJoin(material, `cliff-${mode}-${label}-${i}`, startedAt);
        joins.push(joined);
        await forget([result]);
        if (!joined.ok) break;
      }
      let kubeadmJoin: JoinResult | undefined;
      // Without the signer no token-discovery join can succeed, by design of that setting.
      if (mode !== 'kubeadm' && mode !== 'file-nosigner') {
        const startedAt = performance.now();
        let created = tokenSecret('kubeadm', 'issued');
        while (
          (await send(api, 'POST', '/api/v1/namespaces/kube-system/secrets', operatorToken, created.body))
            .status === 409
        ) {
          created = tokenSecret('kubeadm', 'issued');
        }
        const { id, secret } = created;
        kubeadmJoin = await timedJoin(
          joinConfiguration(env, `${id}.${secret}`),
          `cliff-${mode}-${label}-kubeadm`,
          startedAt,
        );
        await forget([{ tokenId: id }]);
      }
      return { joins, kubeadmJoin, live };
    };

    /**
     * Creates `count` live tokens of the mode's shape; the number of creates that failed. Token IDs
     * are 6 random characters: among 50,000 a clash (409) is likely, and then another ID is drawn.
     */
    const precreate = async (count: number): Promise<number> => {
      let failed = 0;
      await mapLimit(Array.from({ length: count }), 32, async () => {
        for (let attempt = 0; attempt < 3; attempt++) {
          const { body } = tokenSecret(mode, 'precreated');
          const answer = await send(
            api,
            'POST',
            '/api/v1/namespaces/kube-system/secrets',
            operatorToken,
            body,
          );
          if (answer.status === 201) return;
          if (answer.status !== 409) break;
        }
        failed += 1;
      });
      return failed;
    };

    const measure = async (live: number, label: string, precreatePerSecond: number): Promise<Level> => {
      const settled = isFileMode(mode)
        ? { ms: undefined, writable: true }
        : await settleSigner(env, live, capacity);
      const before = await clusterInfo(env);
      const load = loadavg()[0] ?? 0;
      log(
        `cliff ${mode}: ${live} live tokens (pre-created at ${precreatePerSecond.toFixed(0)}/s); cluster-info ${before.bytes} bytes, ${before.signatures} signatures${settled.ms !== undefined ? `, signer settled in ${(settled.ms / 1000).toFixed(1)} s` : ''}${settled.writable ? '' : ', NOT WRITABLE (over 1 MiB)'}; load ${load.toFixed(1)}`,
      );
      const { latencies, elapsedMs, refused, floorLatencies, floorMs } = await issueRounds(
        settings.rounds,
        `${mode}-${label}`,
        live,
        settled.writable,
      );
      const { joins, kubeadmJoin } = await joinsAt(live, label);
      if (!isFileMode(mode) && settled.writable) await settleSigner(env, live, capacity);
      const s = summary(latencies);
      const f = summary(floorLatencies);
      const level: Level = {
        live,
        label,
        issued: latencies.length,
        refused,
        rate: latencies.length / (elapsedMs / 1000),
        p50: s.p50,
        p99: s.p99,
        cpuPerToken: cpu.perUnit(`${mode}-${label}`),
        clusterInfoBytes: before.bytes,
        signatures: before.signatures,
        settleMs: settled.ms,
        writable: settled.writable,
        joins,
        kubeadmJoin,
        precreatePerSecond,
        load: ((loadavg()[0] ?? 0) + load) / 2,
        ...(floorLatencies.length > 0
          ? {
              floor: {
                rate: floorLatencies.length / (floorMs / 1000),
                p50: f.p50,
                p99: f.p99,
                cpuPerCreate: cpu.perUnit(`${mode}-${label}-floor`),
              },
            }
          : {}),
      };
      log(
        `cliff ${mode} @ ${label}: ${level.issued} issued (${refused} refused) at ${level.rate.toFixed(1)}/s, p50/p99 ${s.p50.toFixed(1)}/${s.p99.toFixed(1)} ms; joins ${joins.map(describeJoin).join(', ')}${kubeadmJoin ? `; kubeadm join alongside ${describeJoin(kubeadmJoin)}` : ''}; CPU per token ${level.cpuPerToken}${level.floor ? `; floor ${describeFloor(level.floor)}` : ''}`,
      );
      return level;
    };

    /** Deletes every pre-created token (the file modes' return to the first level). */
    const deletePrecreated = async () => {
      const names = await precreatedNames(env);
      await mapLimit(names, 32, (name) =>
        send(api, 'DELETE', `/api/v1/namespaces/kube-system/secrets/${name}`, operatorToken),
      );
      return names.length;
    };

    return {
      mode,
      env,
      capacity,
      refusal,
      precreate,
      deletePrecreated,
      issueRounds,
      joinsAt,
      measure,
      close,
    };
  } catch (error) {
    await close();
    throw error;
  }
}

type Plane = Awaited<ReturnType<typeof openPlane>>;

async function runMode(mode: Mode, settings: Settings, logs: string): Promise<ModeRun> {
  const ctx = await openPlane(mode, settings, logs);
  const run: ModeRun = {
    mode,
    levels: [],
    ...(isFileMode(mode) ? {} : { capacity: { capacity: ctx.capacity, refusal: ctx.refusal } }),
  };
  try {
    // Warm-up (JIT, connections, caches), not counted.
    await ctx.issueRounds(1, 'warm-up', 0, true);
    let live = 0;
    for (const target of settings.levels) {
      const started = performance.now();
      const failed = await ctx.precreate(target - live);
      if (failed > 0) {
        run.stoppedAt = `${failed} of ${target - live} Secret creates failed on the way to ${target}`;
        log(`cliff ${mode}: ${run.stoppedAt}; stopping this mode`);
        break;
      }
      const rate = (target - live) / ((performance.now() - started) / 1000);
      live = target;
      run.levels.push(await ctx.measure(live, String(live), rate));
    }
    // File discovery carries the goal (the top level against the first): the first level once more,
    // after the pre-created tokens are gone, shows how far the machine drifted meanwhile.
    const first = settings.levels[0];
    if (isFileMode(mode) && first !== undefined && live > first && !run.stoppedAt) {
      const started = performance.now();
      const deleted = await ctx.deletePrecreated();
      log(
        `cliff ${mode}: deleted ${deleted} pre-created tokens in ${((performance.now() - started) / 1000).toFixed(0)} s`,
      );
      const again = performance.now();
      await ctx.precreate(first);
      run.again = await ctx.measure(first, `${first}-again`, first / ((performance.now() - again) / 1000));
    }
    return run;
  } finally {
    await ctx.close();
  }
}

interface AbRun {
  mode: 'file' | 'file-nosigner';
  low: number;
  high: number;
  rounds: number;
  /** Per side: the issuance latencies and busy time over all its rounds, its CPU per token, its joins. */
  sides: Record<
    'low' | 'high',
    { latencies: number[]; elapsedMs: number; cpu: string; joins: JoinResult[]; kubeadmJoin?: JoinResult }
  >;
}

/**
 * The goal, measured so that this shared machine's drift hits both sides alike: two control planes
 * with file discovery side by side, one with the first level's live tokens and one with the last's,
 * issuance rounds alternating between them (low, high, high, low, ...).
 */
async function runAb(mode: AbRun['mode'], settings: Settings, logs: string): Promise<AbRun | undefined> {
  const low = settings.levels[0];
  const high = settings.levels.at(-1);
  if (low === undefined || high === undefined || high <= low) return undefined;
  const planes: Plane[] = [];
  try {
    planes.push(await openPlane(mode, settings, logs, `${mode}-ab-low`));
    planes.push(await openPlane(mode, settings, logs, `${mode}-ab-high`));
    const [lowPlane, highPlane] = planes as [Plane, Plane];
    await lowPlane.precreate(low);
    const started = performance.now();
    await highPlane.precreate(high);
    log(
      `cliff A/B: ${low} and ${high} live tokens (the ${high} pre-created in ${((performance.now() - started) / 1000).toFixed(0)} s)`,
    );
    for (const p of planes) await p.issueRounds(1, 'warm-up', 0, true);
    const rounds = Math.max(settings.rounds, 2) * 2;
    const sides: AbRun['sides'] = {
      low: { latencies: [], elapsedMs: 0, cpu: '', joins: [] },
      high: { latencies: [], elapsedMs: 0, cpu: '', joins: [] },
    };
    for (let round = 0; round < rounds; round++) {
      // ABBA: a linear drift over the run costs both sides the same.
      const order: ('low' | 'high')[] = round % 2 === 0 ? ['low', 'high'] : ['high', 'low'];
      for (const side of order) {
        const plane = side === 'low' ? lowPlane : highPlane;
        const result = await plane.issueRounds(1, `ab-${side}`, side === 'low' ? low : high, true, false);
        sides[side].latencies.push(...result.latencies);
        sides[side].elapsedMs += result.elapsedMs;
        sides[side].cpu = result.cpu;
      }
    }
    for (const side of ['low', 'high'] as const) {
      const plane = side === 'low' ? lowPlane : highPlane;
      const { joins, kubeadmJoin } = await plane.joinsAt(side === 'low' ? low : high, `ab-${side}`);
      sides[side].joins = joins;
      if (kubeadmJoin) sides[side].kubeadmJoin = kubeadmJoin;
    }
    const describe = (side: 'low' | 'high') => {
      const s = summary(sides[side].latencies);
      return `${(sides[side].latencies.length / (sides[side].elapsedMs / 1000)).toFixed(1)}/s, p50/p99 ${s.p50.toFixed(1)}/${s.p99.toFixed(1)} ms, CPU per token ${sides[side].cpu}`;
    };
    log(`cliff A/B ${mode} @ ${low}: ${describe('low')}`);
    log(`cliff A/B ${mode} @ ${high}: ${describe('high')}`);
    return { mode, low, high, rounds, sides };
  } finally {
    for (const p of planes) await p.close();
  }
}

/** The names of the pre-created token Secrets (admin list, metadata only, in pages). */
async function precreatedNames(env: E2EEnvironment): Promise<string[]> {
  const names: string[] = [];
  let token: string | undefined;
  do {
    const response = await kubeFetch(env.kubeConfig, '/api/v1/namespaces/kube-system/secrets', {
      query: { labelSelector: `${PRECREATED_LABEL}=precreated`, limit: 5000, continue: token },
      headers: { Accept: 'application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1' },
    });
    if (response.status !== 200) throw new Error(`list pre-created Secrets: HTTP ${response.status}`);
    const page = (await response.json()) as {
      items: { metadata: { name: string } }[];
      metadata: { continue?: string };
    };
    names.push(...page.items.map((item) => item.metadata.name));
    token = page.metadata.continue || undefined;
  } while (token);
  return names;
}

function describeFloor(floor: NonNullable<Level['floor']>): string {
  return `raw Secret creates ${floor.rate.toFixed(1)}/s, p50/p99 ${floor.p50.toFixed(1)}/${floor.p99.toFixed(1)} ms, CPU per create ${floor.cpuPerCreate}`;
}

function describeJoin(j: JoinResult): string {
  return j.ok ? `ok ${j.ms.toFixed(0)} ms` : `FAILED after ${(j.ms / 1000).toFixed(1)} s (${j.error ?? ''})`;
}

function portalObjects() {
  return [
    { apiVersion: 'v1', kind: 'Namespace', metadata: { name: PORTAL_NAMESPACE } },
    serviceAccountObject('portal', PORTAL_NAMESPACE),
    useFlavorClassesRole('cliff-bench-use', [FLAVOR]),
    clusterRoleBindingObject('cliff-bench-use', 'cliff-bench-use', 'portal', PORTAL_NAMESPACE),
  ];
}

function figuresOf(run: ModeRun, settings: Settings): Figure[] {
  const name = MODE_NAMES[run.mode];
  const first = run.levels[0];
  const again = run.again;
  const figures: Figure[] = [];
  // The goal's baseline: the first level, averaged with its re-measurement at the end when there
  // is one, so that the machine's drift over the run (a shared 2-core machine) cancels out.
  const baseline = (pick: (level: Level) => number): number | null => {
    if (!first || first.issued === 0) return null;
    return again && again.issued > 0 ? (pick(first) + pick(again)) / 2 : pick(first);
  };
  const baselineName = first
    ? `${first.live.toLocaleString('en-US')} live tokens${again ? ', mean of before and after' : ''}`
    : null;
  const rateBaseline = baseline((l) => l.rate);
  const p99Baseline = baseline((l) => l.p99);
  for (const level of [...run.levels, ...(again ? [again] : [])]) {
    const isFirst = level === first || level === again;
    const n = `${level.live.toLocaleString('en-US')} live tokens${level === again ? ', again at the end' : ''}`;
    const joinsOk = level.joins.filter((j) => j.ok);
    const joinMs = joinsOk.length > 0 ? summary(joinsOk.map((j) => j.ms)).p50 : Number.NaN;
    const context = `${level.issued} issued${level.refused ? `, ${level.refused} refused (503: cluster-info full)` : ''} in ${settings.rounds} rounds of ${settings.perRound} at concurrency ${CONCURRENCY}, each round's tokens deleted after it; cluster-info ${level.clusterInfoBytes.toLocaleString('en-US')} bytes with ${level.signatures} signatures${level.writable ? '' : ' (its last successful write: the signatures of all live tokens would exceed 1 MiB)'}${level.settleMs !== undefined ? `; the bootstrap signer caught up ${(level.settleMs / 1000).toFixed(1)} s after the pre-creation` : ''}; pre-created at ${level.precreatePerSecond.toFixed(0)} Secrets/s; CPU per token: ${level.cpuPerToken}${level.floor ? `; in the same rounds, ${describeFloor(level.floor)}` : ''}; load average ${level.load.toFixed(1)}`;
    const joinNote = `joins: ${level.joins.map(describeJoin).join(', ')}${level.kubeadmJoin ? `; a plain kubeadm join alongside: ${describeJoin(level.kubeadmJoin)}` : ''}`;
    // Informational: the sweep measures one level after another on a shared machine whose load
    // drifts by ±20 % over such a run (compare the first level with its re-measurement at the
    // end); the goal is judged A/B (abFigures), where the drift hits both sides alike.
    figures.push(
      figure({
        name: `cliff ${name}, ${n}: issuance rate`,
        value: level.issued > 0 ? level.rate : 0,
        unit: '/s',
        baseline: isFirst ? null : rateBaseline,
        baselineName: isFirst ? null : baselineName,
        goal: '-',
        met: true,
        notes: `p50 ${level.p50.toFixed(1)} ms; ${context}; ${joinNote}`,
      }),
      figure({
        name: `cliff ${name}, ${n}: issuance p99`,
        value: level.issued > 0 ? level.p99 : 0,
        unit: 'ms',
        baseline: isFirst ? null : p99Baseline,
        baselineName: isFirst ? null : baselineName,
        goal: '-',
        met: true,
        notes: context,
      }),
      figure({
        name: `cliff ${name}, ${n}: join (issued → Node registered)`,
        value: Number.isNaN(joinMs) ? 0 : joinMs,
        unit: 'ms',
        baseline: null,
        baselineName: null,
        goal: isFileMode(run.mode) ? 'every join succeeds' : '-',
        met:
          !isFileMode(run.mode) ||
          (level.joins.length > 0 && level.joins.every((j) => j.ok) && level.kubeadmJoin?.ok !== false),
        notes: `${joinsOk.length}/${level.joins.length} joined${joinsOk.length > 1 ? ' (p50 shown)' : ''}; ${joinNote}`,
      }),
    );
  }
  if (run.capacity) {
    figures.push(
      figure({
        name: `cliff ${name}: most token signatures cluster-info can hold`,
        value: run.capacity.capacity,
        unit: 'signatures',
        baseline: null,
        baselineName: null,
        goal: '-',
        met: true,
        notes: `bisected by writing what the bootstrap signer would write (the kubeconfig, jws-kubeconfig-<id> keys, 85-byte detached JWS values) into a scratch ConfigMap on this control plane; one more: ${run.capacity.refusal}. Past it every re-sign fails, no new token gets a signature and every token-discovery join with a new token fails`,
      }),
    );
  }
  if (run.stoppedAt) log(`cliff ${run.mode}: stopped: ${run.stoppedAt}`);
  return figures;
}

function abFigures(ab: AbRun, settings: Settings): Figure[] {
  const stats = (side: 'low' | 'high') => {
    const s = summary(ab.sides[side].latencies);
    return {
      rate: ab.sides[side].latencies.length / (ab.sides[side].elapsedMs / 1000),
      p50: s.p50,
      p99: s.p99,
    };
  };
  const [low, high] = [stats('low'), stats('high')];
  const n = (count: number) => count.toLocaleString('en-US');
  const name = `cliff A/B, ${MODE_NAMES[ab.mode].replace('nodeflavor, ', '')}, ${n(ab.high)} vs ${n(ab.low)} live tokens`;
  const context = `two control planes side by side, ${ab.rounds} rounds of ${settings.perRound} issuances each at concurrency ${CONCURRENCY}, alternating low/high (ABBA); CPU per token at ${n(ab.high)}: ${ab.sides.high.cpu}; at ${n(ab.low)}: ${ab.sides.low.cpu}`;
  const joins = ab.sides.high.joins;
  return [
    figure({
      name: `${name}: issuance rate`,
      value: high.rate,
      unit: '/s',
      baseline: low.rate,
      baselineName: `${n(ab.low)} live tokens, same rounds`,
      goal: '≥ 0.9× baseline',
      met: high.rate >= 0.9 * low.rate,
      notes: `p50 ${high.p50.toFixed(1)} ms (${n(ab.low)}: ${low.p50.toFixed(1)} ms); ${context}`,
    }),
    figure({
      name: `${name}: issuance p99`,
      value: high.p99,
      unit: 'ms',
      baseline: low.p99,
      baselineName: `${n(ab.low)} live tokens, same rounds`,
      goal: '≤ 1.1× baseline',
      met: high.p99 <= 1.1 * low.p99,
      notes: context,
    }),
    figure({
      name: `${name}: join at ${n(ab.high)} (issued → Node registered)`,
      value:
        joins.filter((j) => j.ok).length > 0 ? summary(joins.filter((j) => j.ok).map((j) => j.ms)).p50 : 0,
      unit: 'ms',
      baseline: null,
      baselineName: null,
      goal: 'every join succeeds',
      met: joins.length > 0 && joins.every((j) => j.ok) && ab.sides.high.kubeadmJoin?.ok !== false,
      notes: `joins: ${joins.map(describeJoin).join(', ')}${ab.sides.high.kubeadmJoin ? `; a plain kubeadm join alongside: ${describeJoin(ab.sides.high.kubeadmJoin)}` : ''}; at ${n(ab.low)}: ${ab.sides.low.joins.map(describeJoin).join(', ')}`,
    }),
  ];
}

export async function runCliff(scale: Scale): Promise<Figure[]> {
  const settings: Settings = {
    ...SETTINGS[scale],
    ...(listArg('levels') ? { levels: (listArg('levels') ?? []).map(Number) } : {}),
  };
  const modes = listArg('modes') ?? ['kubeadm', 'token', 'file', 'file-nosigner', 'ab', 'ab-nosigner'];
  const logs = benchDir('nodeflavor-bench-cliff-');
  mkdirSync(logs, { recursive: true });
  log(
    `cliff: levels ${settings.levels.join(', ')}; modes ${modes.join(', ')}; 1-min load average ${(loadavg()[0] ?? 0).toFixed(2)} on ${cpus().length} cores; logs in ${logs}`,
  );
  const figures: Figure[] = [];
  for (const mode of modes) {
    const started = performance.now();
    if (mode === 'ab' || mode === 'ab-nosigner') {
      const ab = await runAb(mode === 'ab' ? 'file' : 'file-nosigner', settings, logs);
      if (ab) figures.push(...abFigures(ab, settings));
    } else {
      figures.push(...figuresOf(await runMode(mode as Mode, settings, logs), settings));
    }
    log(`cliff ${mode}: done in ${((performance.now() - started) / 1000).toFixed(0)} s`);
  }
  return figures;
}

if (import.meta.main) {
  buildOperator();
  const figures = await runCliff(scaleFromArgs());
  printTable(figures);
  const at = process.argv.indexOf('--json');
  const path = at >= 0 ? process.argv[at + 1] : undefined;
  if (path) writeFileSync(path, JSON.stringify(figures));
}
