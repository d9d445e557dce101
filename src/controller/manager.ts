// Runs the controller: five list/watch caches (every replica keeps them warm), one work queue per
// reconciler that only the leader drains, periodic resync, and leader election. What each
// reconciler watches, writes and enqueues is declared in wiring.ts; this file builds the caches
// and the queues, routes each cache's events through that table (routing.ts) and runs the terms.
// Each leadership is a term: the reconcilers write through a KubeConfig fenced by the term's
// signal, so when the term ends (the Lease lost, or not renewed by the renew deadline) the work
// in flight is cut off with it, not just the work still queued.

import { randomBytes } from 'node:crypto';
import { hostname } from 'node:os';
import type { Logger } from 'pino';
import type { Registry } from 'prom-client';
import { type Config, controllerUsername } from '../config.ts';
import type { FlavorClassCache } from '../kube/flavor-classes.ts';
import { KeyRingWatch } from '../kube/keyring-watch.ts';
import { KubeReviews } from '../kube/reviews.ts';
import type { TokenCaches } from '../kube/token-caches.ts';
import { prepareKubeConfig } from '../runtime/config.ts';
import type { KubeConfig } from '../runtime/kubeconfig.ts';
import { electorFor, followTerms, type Leadership, soleLeadership } from '../runtime/leader.ts';
import { type RestartReason, unsyncedCaches } from '../runtime/listwatch.ts';
import { checkAutoApproval } from './auto-approval.ts';
import { watchedCaches } from './caches.ts';
import type { CacheName, Caches, ControllerContext } from './context.ts';
import { Indexes } from './indexes.ts';
import { controllerMetrics } from './metrics.ts';
import { enqueueAll as enqueueEvery, reconcilerQueues, routeEvents } from './routing.ts';
import { termContexts } from './term-context.ts';
import { RECONCILERS } from './wiring.ts';

export interface ControllerHandle {
  /** Resolves when every cache has its first full list. */
  synced: Promise<void>;
  isLeader: () => boolean;
  /** The caches still waiting for their first list (for /readyz). */
  unsyncedCaches: () => string[];
  /** Resolves when every queue is empty (tests, benchmarks). */
  idle: () => Promise<void>;
  caches: Caches;
  stop: () => Promise<void>;
}

export function startController(options: {
  kubeConfig: KubeConfig;
  config: Config;
  registry: Registry;
  log: Logger;
  identity?: string;
  /** The process's key ring (shared with the issuer); the controller watches its own when absent. */
  keyRing?: KeyRingWatch;
  /** The process's token and join-record caches (the issuer reads them too), started by their owner. */
  tokenCaches?: TokenCaches;
  /** The process's FlavorClass cache, started by its owner; the controller watches its own when absent. */
  classes?: FlavorClassCache;
  /**
   * The process's leadership (shared with the admission registration); when absent the controller
   * elects its own (config.leaderElect) once its caches are synced.
   */
  leadership?: Leadership;
}): ControllerHandle {
  const { config, log } = options;
  const kubeConfig = prepareKubeConfig(options.kubeConfig);
  const metrics = controllerMetrics(options.registry);
  const indexes = new Indexes();
  const identity = options.identity ?? `${hostname()}-${randomBytes(4).toString('hex')}`;
  const restart = (resource: string) => (reason: RestartReason, error?: Error) => {
    metrics.watchRestarts.inc({ resource, reason });
    if (reason === 'error' || reason === 'stalled')
      log.warn({ resource, reason, err: error?.message }, 'watch restarted');
  };

  const ownKeyRing = options.keyRing === undefined;
  const keyRing =
    options.keyRing ??
    new KeyRingWatch({
      kubeConfig,
      namespace: config.namespace,
      name: config.keySecret,
      createIfMissing: true,
      log: log.child({ part: 'keyring' }),
      registry: options.registry,
    });

  // Queues first, one per reconciler of the wiring table: cache handlers only enqueue keys.
  let ctx: ControllerContext;
  const queues = reconcilerQueues({
    reconcilers: RECONCILERS,
    context: () => ctx,
    keyRingAvailable: () => keyRing.available,
    workers: config.workers,
    metrics,
    log,
  });

  // The process's FlavorClass cache when it shares one (the issuer and the guard read it too).
  const ownClasses = options.classes === undefined;
  const ownTokenCaches = options.tokenCaches === undefined;
  const watched = watchedCaches({
    kubeConfig,
    classes: options.classes,
    tokenCaches: options.tokenCaches,
    restart,
  });
  const { nodes, csrs, tokens, claims, classes } = watched;
  // The shared caches' restarts count in this controller's metric whoever owns them.
  const removeRestartHandlers = [
    classes.addRestartHandler(restart('flavorclasses')),
    tokens.addRestartHandler(restart('flavoredtokens')),
    claims.addRestartHandler(restart('nodenameclaims')),
  ];
  const caches: Caches = watched;
  const reads = { caches, indexes };
  // Each cache's events through the wiring table. A shared class cache replays the classes it
  // already holds at once.
  const route = <C extends CacheName>(name: C) =>
    watched[name].addEventHandler(routeEvents(name, RECONCILERS, queues, reads));
  const removeHandlers = [route('nodes'), route('csrs'), route('tokens'), route('claims'), route('classes')];

  /** The context of one term: every write (and Event) goes through the term's fenced KubeConfig. */
  const termContext = termContexts({ kubeConfig, config, caches, indexes, metrics, log, keyRing });
  // Until the first term: a closed fence, so nothing can write before this replica leads.
  const closed = new AbortController();
  closed.abort();
  ctx = termContext(closed.signal);

  const enqueueAll = () => enqueueEvery(RECONCILERS, queues, reads);
  const resyncTimer = setInterval(enqueueAll, config.resync);
  resyncTimer.unref();
  // A restored or rotated ring can change any verdict: judge everything again (only the leader works).
  keyRing.onChange((ring) => {
    if (ring && leading) enqueueAll();
  });

  // All queues start at once: a node whose binding is not recorded yet waits (its grace
  // period) rather than being judged, so nothing needs to hold the node queue back.
  let leading = false;
  const startWorking = (term: AbortSignal) => {
    if (term.aborted || stopped) return;
    ctx = termContext(term);
    leading = true;
    metrics.isLeader.set(1);
    log.info({ identity }, 'leading: reconciling');
    enqueueAll();
    for (const queue of Object.values(queues)) queue.start();
  };
  const stopWorking = () => {
    // Queued work stays queued (the next term runs it); work in flight fails with the fence.
    for (const queue of Object.values(queues)) queue.stop();
    metrics.isLeader.set(0);
    if (leading) log.warn({ identity }, 'stopped leading: stopped reconciling, in-flight writes cancelled');
    leading = false;
  };

  if (ownKeyRing) void keyRing.start();
  const synced = Promise.all([
    ownClasses ? classes.start() : classes.waitForSync(),
    ownTokenCaches ? tokens.start() : tokens.waitForSync(),
    csrs.start(),
    nodes.start(),
    ownTokenCaches ? claims.start() : claims.waitForSync(),
  ]).then(() => {
    log.info(
      { nodes: nodes.size, tokens: tokens.size, csrs: csrs.size, classes: classes.size, claims: claims.size },
      'caches synced',
    );
  });
  void checkAutoApproval(
    new KubeReviews(kubeConfig),
    config.bootstrapGroup,
    metrics.bootstrapGroupAutoApproved,
    log,
  );
  let stopped = false;
  const ownElector =
    options.leadership === undefined && config.leaderElect
      ? electorFor(kubeConfig, config, identity, log, false)
      : undefined;
  const leadership = options.leadership ?? ownElector ?? soleLeadership();
  let unsubscribe: (() => void) | undefined;
  void synced.then(() => {
    // A shared cache stopped before its first list: judging Nodes against no classes would strip them.
    if (stopped || !classes.hasSynced) return;
    // Work only with warm caches: a term that began before the sync starts working now.
    unsubscribe = followTerms(leadership, startWorking, stopWorking);
    ownElector?.start();
  });
  log.info({ identity, controller: controllerUsername(config) }, 'controller starting');

  return {
    synced,
    caches,
    isLeader: () => leading,
    unsyncedCaches: () => unsyncedCaches(caches),
    idle: async () => {
      for (const queue of Object.values(queues)) await queue.whenIdle();
    },
    stop: async () => {
      stopped = true;
      clearInterval(resyncTimer);
      unsubscribe?.();
      stopWorking();
      await ownElector?.stop();
      for (const cache of ownTokenCaches ? [nodes, csrs, tokens, claims] : [nodes, csrs]) cache.stop();
      for (const remove of [...removeHandlers, ...removeRestartHandlers]) remove();
      if (ownClasses) classes.stop();
      if (ownKeyRing) keyRing.stop();
    },
  };
}
