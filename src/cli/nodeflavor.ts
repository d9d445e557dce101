#!/usr/bin/env node
// nodeflavor run [--kubeconfig PATH] [flags]: the operator — controller, admission webhook and
// token issuer in one process, each switchable (--no-controller, --no-webhook, --no-issuer).
// nodeflavor capi [flags]: the Cluster API controller, in a management cluster (./capi.ts).
// Exit codes: 0 clean shutdown, 1 runtime failure, 2 bad usage or configuration.
import { randomBytes } from 'node:crypto';
import { hostname } from 'node:os';
import { collectDefaultMetrics, Gauge, Registry } from 'prom-client';
import { parseConfig } from '../config.ts';
import { startController } from '../controller/manager.ts';
import { flavorClassCache } from '../kube/flavor-classes.ts';
import { KeyRingWatch } from '../kube/keyring-watch.ts';
import { flavoredTokenCache, joinRecordCache } from '../kube/token-caches.ts';
import { loadKubeConfig } from '../runtime/config.ts';
import { EventRecorder } from '../runtime/events.ts';
import { observeKubeRequests } from '../runtime/fetch.ts';
import { kubeRequestCounter } from '../runtime/kube-request-metrics.ts';
import { electorFor, soleLeadership } from '../runtime/leader.ts';
import { createLogger } from '../runtime/log.ts';
import { type ReadinessCheck, splitAddress, startOpsServer } from '../runtime/ops-server.ts';
import { parseRunFlags, UsageError } from './run-flags.ts';
import { startupChecks } from './startup.ts';

/** How often an unguarded controller repeats its warning. */
const UNGUARDED_WARNING_EVERY_MS = 10 * 60_000;

const USAGE = `usage: nodeflavor run [--kubeconfig PATH] [--namespace NS] [--no-controller] [--no-webhook] [--no-issuer]
                      [--admission-mode webhook|policy|both] [--admin-group G]... [--csr-approver]
                      [--allow-unguarded-nodes] [--trusted-node-label KEY]... [--allow-untrusted-node] [flags]
Flags are the settings in src/config.ts in kebab-case; NODEFLAVOR_<SETTING> environment variables work too.
       nodeflavor capi [flags]   (Cluster API management clusters: nodeflavor capi --help)`;

async function run(args: string[]): Promise<number> {
  let config: ReturnType<typeof parseConfig>;
  try {
    config = parseConfig(parseRunFlags(args, process.env));
  } catch (error) {
    process.stderr.write(`nodeflavor: ${(error as Error).message}\n${USAGE}\n`);
    return 2;
  }
  const log = createLogger('nodeflavor', config.logLevel);
  const registry = new Registry();
  // Process metrics (resident memory, heap, event-loop lag, GC) beside ours, as operators export them.
  collectDefaultMetrics({ register: registry });
  observeKubeRequests(kubeRequestCounter(registry));
  const checks: ReadinessCheck[] = [];
  const stops: (() => Promise<void>)[] = [];

  // First of all, before anything that needs the API server: /healthz answers while the API
  // server is down (the kubelet must not restart us in a loop), and /readyz says what we wait for.
  let waitingFor: string | undefined = 'starting';
  checks.push({ name: 'startup', ready: () => waitingFor === undefined, reason: () => waitingFor });
  const { host, port } = splitAddress(config.metricsAddress);
  const ops = await startOpsServer({ host, port, registry, checks });

  const kubeConfig = loadKubeConfig(config.kubeconfig, { requestTimeoutMs: config.kubeRequestTimeout });
  // Before anything writes or loads a key: where we run, who we are, whether Nodes are guarded (ADR 0003).
  const startup = await startupChecks(kubeConfig, config, log, (why) => {
    waitingFor = why;
  });
  if (startup.refusal) {
    process.stderr.write(`nodeflavor: ${startup.refusal}\n`);
    ops.close();
    return 2;
  }
  waitingFor = 'starting its parts';
  new Gauge({
    name: 'nodeflavor_unguarded_nodes',
    help: '1 while the controller runs with no admission guard protecting Nodes (--allow-unguarded-nodes)',
    registers: [registry],
  }).set(startup.guard.guarded ? 0 : 1);
  if (startup.placementWarning) log.warn({ node: config.nodeName }, startup.placementWarning);
  const { warning } = startup.guard;
  if (warning) {
    log.warn({ username: startup.username }, warning);
    const repeat = setInterval(() => log.warn(warning), UNGUARDED_WARNING_EVERY_MS);
    repeat.unref();
    stops.push(async () => clearInterval(repeat));
  }

  // One key ring per process, shared by the controller and the issuer, kept current by a watch.
  let keyRing: KeyRingWatch | undefined;
  if (config.controller || config.issuer) {
    const events = new EventRecorder(kubeConfig, { component: 'nodeflavor', namespace: config.namespace });
    events.onError = (error) => log.warn({ err: error.message }, 'could not record an Event');
    const ring = new KeyRingWatch({
      kubeConfig,
      namespace: config.namespace,
      name: config.keySecret,
      createIfMissing: true,
      log: log.child({ part: 'keyring' }),
      registry,
      events,
    });
    void ring.start();
    checks.push({ name: 'hmac-key-ring', ready: () => ring.available, reason: () => ring.unavailableReason });
    keyRing = ring;
  }

  // One FlavorClass cache per process: the controller, the guard and the issuer each add a handler.
  // Its restarts are logged (and counted) by the controller when it runs, here otherwise.
  const classes = flavorClassCache(kubeConfig, (reason, error) => {
    if (!config.controller && (reason === 'error' || reason === 'stalled'))
      log.warn({ resource: 'flavorclasses', reason, err: error?.message }, 'watch restarted');
  });
  void classes.start();
  // One FlavoredToken and one join-record cache per process, likewise: the controller and the
  // issuer each add their handlers.
  const tokenCaches =
    config.controller || config.issuer
      ? {
          tokens: flavoredTokenCache(kubeConfig, (reason, error) => {
            if (!config.controller && (reason === 'error' || reason === 'stalled'))
              log.warn({ resource: 'flavoredtokens', reason, err: error?.message }, 'watch restarted');
          }),
          records: joinRecordCache(kubeConfig, (reason, error) => {
            if (!config.controller && (reason === 'error' || reason === 'stalled'))
              log.warn({ resource: 'nodenameclaims', reason, err: error?.message }, 'watch restarted');
          }),
        }
      : undefined;
  if (tokenCaches) {
    void tokenCaches.tokens.start();
    void tokenCaches.records.start();
  }

  // One Lease per process: its holder runs the controller's queues and writes the admission
  // registration, the objects every replica shares.
  const identity = `${hostname()}-${randomBytes(4).toString('hex')}`;
  const elector =
    config.leaderElect && (config.controller || config.webhook)
      ? electorFor(kubeConfig, config, identity, log, true)
      : undefined;
  const leadership = elector ?? soleLeadership();

  let controllerSynced: Promise<void> = Promise.resolve();
  if (config.controller) {
    const controller = startController({
      kubeConfig,
      config,
      registry,
      log: log.child({ part: 'controller' }),
      identity,
      leadership,
      classes,
      ...(tokenCaches ? { tokenCaches } : {}),
      ...(keyRing ? { keyRing } : {}),
    });
    controllerSynced = controller.synced;
    checks.push({
      name: 'controller-caches',
      ready: () => controller.unsyncedCaches().length === 0,
      reason: () => `waiting for the first list of ${controller.unsyncedCaches().join(', ')}`,
    });
    stops.push(controller.stop);
  }
  // Loaded only when one of them runs: a controller-only process does not hold their modules.
  if (config.webhook || config.issuer) {
    const parts = await import('./run-parts.ts');
    for (const part of parts.startOptionalParts({
      kubeConfig,
      config,
      registry,
      log,
      leadership,
      classes,
      ...(tokenCaches ? { tokenCaches } : {}),
      ...(keyRing ? { keyRing } : {}),
    })) {
      checks.push(part.check);
      stops.push(part.stop);
    }
  }
  waitingFor = undefined; // every part has its own check from here on
  // Campaign once the controller's caches are warm: a leader then works at once.
  let campaigning = true;
  void controllerSynced.then(() => {
    if (campaigning) elector?.start();
  });
  stops.push(async () => {
    campaigning = false;
    await elector?.stop(); // after the parts: releasing the Lease hands over at once
  });
  // Last: the parts above use them until they stop.
  stops.push(async () => {
    classes.stop();
    tokenCaches?.tokens.stop();
    tokenCaches?.records.stop();
  });
  if (keyRing) stops.push(async () => keyRing.stop());

  log.info(
    {
      metrics: config.metricsAddress,
      controller: config.controller,
      webhook: config.webhook,
      issuer: config.issuer,
      identity,
    },
    'nodeflavor running',
  );

  return new Promise((resolve) => {
    const shutdown = async (signal: string) => {
      log.info({ signal }, 'shutting down');
      for (const stop of stops)
        await stop().catch((error: Error) => log.warn({ err: error.message }, 'stop failed'));
      ops.close();
      resolve(0);
    };
    process.once('SIGTERM', () => void shutdown('SIGTERM'));
    process.once('SIGINT', () => void shutdown('SIGINT'));
  });
}

async function main(argv: string[]): Promise<number> {
  const [command, ...rest] = argv;
  if (command === 'run') return run(rest);
  if (command === 'capi') {
    // Loaded only for this command: `nodeflavor run` does not hold its modules.
    const capi = await import('./capi.ts');
    if (rest.includes('--help') || rest.includes('-h')) {
      process.stdout.write(`${capi.CAPI_USAGE}\n`);
      return 0;
    }
    return capi.runCapi(rest);
  }
  if (command === '--help' || command === '-h' || command === 'help') {
    process.stdout.write(`${USAGE}\n`);
    return 0;
  }
  process.stderr.write(`nodeflavor: unknown command "${command ?? ''}"\n${USAGE}\n`);
  return 2;
}

main(process.argv.slice(2)).then(
  (code) => process.exit(code),
  (error: Error) => {
    process.stderr.write(`nodeflavor: ${error instanceof UsageError ? '' : 'failed: '}${error.message}\n`);
    process.exit(1);
  },
);
