// Wires the controller: five list/watch caches (every replica keeps them warm), four work queues
// (tokens, nodes, CSRs, FlavorClass status: one owner each of FlavoredToken status, Nodes, CSR
// approvals and FlavorClass status) that only the leader drains, the event → key mapping, periodic
// resync, and leader election.
// Each leadership is a term: the reconcilers write through a KubeConfig fenced by the term's
// signal, so when the term ends (the Lease lost, or not renewed by the renew deadline) the work
// in flight is cut off with it, not just the work still queued.

import { randomBytes } from 'node:crypto';
import { hostname } from 'node:os';
import type { Logger } from 'pino';
import type { Registry } from 'prom-client';
import { type Config, controllerUsername } from '../config.ts';
import {
  FLAVORED_TOKEN_PLURAL,
  type FlavorClassSpec,
  GROUP,
  type NodeNameClaim,
  VERSION,
} from '../flavor/resources.ts';
import { KUBELET_CLIENT_SIGNER, readVerificationRecord } from '../flavor/verdict.ts';
import { prepareKubeConfig } from '../kube/config.ts';
import { fencedKubeConfig } from '../kube/deadlines.ts';
import { EventRecorder } from '../kube/events.ts';
import { type FlavorClassCache, flavorClassCache } from '../kube/flavor-classes.ts';
import { internStrings } from '../kube/intern.ts';
import { KeyRingWatch } from '../kube/keyring-watch.ts';
import type { KubeConfig } from '../kube/kubeconfig.ts';
import { electorFor, type Leadership, soleLeadership } from '../kube/leader.ts';
import { ListWatch, type RestartReason, withoutManagedFields } from '../kube/listwatch.ts';
import { CLAIMS_PATH } from '../kube/node-name-claims.ts';
import { type TrimmedNode, trimNode } from '../kube/node-writes.ts';
import { KubeReviews } from '../kube/reviews.ts';
import type { CsrObject, StoredToken } from '../kube/token-writes.ts';
import { kubeControllerApi } from './api.ts';
import { checkAutoApproval } from './auto-approval.ts';
import { FlavorClassStatusReconciler } from './class-status.ts';
import type { Caches, ControllerContext } from './context.ts';
import { reconcileCsr } from './csrs.ts';
import { controllerMetrics } from './metrics.ts';
import { reconcileNode } from './nodes.ts';
import { WorkQueue } from './queue.ts';
import { csrTokenId, Indexes, nodeFacts, trimCsr } from './state.ts';
import { reconcileToken } from './tokens.ts';

/** Whether a Node carries any label, annotation or taint key the class names. */
function classKeyTest(spec: FlavorClassSpec | undefined): (node: TrimmedNode) => boolean {
  const labels = Object.keys(spec?.labels ?? {});
  const annotations = Object.keys(spec?.annotations ?? {});
  const taints = new Set((spec?.taints ?? []).map((t) => t.key));
  return (node) =>
    labels.some((k) => Object.hasOwn(node.metadata.labels ?? {}, k)) ||
    annotations.some((k) => Object.hasOwn(node.metadata.annotations ?? {}, k)) ||
    (node.spec.taints ?? []).some((t) => taints.has(t.key));
}

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

  const counted =
    (queue: string, reconcile: (key: string) => Promise<void>) =>
    async (key: string): Promise<void> => {
      try {
        await reconcile(key);
        metrics.reconciles.inc({ queue, result: 'ok' });
      } catch (error) {
        metrics.reconciles.inc({ queue, result: 'error' });
        throw error;
      }
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

  // Queues first: cache handlers only enqueue keys.
  let ctx: ControllerContext;
  /** A work queue of one kind of key, with its metrics and its retry log line. */
  const workQueue = (name: string, what: string, reconcile: (key: string) => Promise<void>) =>
    new WorkQueue({
      name,
      concurrency: config.workers,
      reconcile,
      onError: (key, error, attempt) =>
        log.warn({ [what]: key, attempt, err: error.message }, `${what} reconcile failed; retrying`),
      onDepthChange: (depth) => metrics.queueDepth.set({ queue: name }, depth),
      onRetry: () => metrics.retries.inc({ queue: name }),
    });
  const judgeNode = counted('nodes', (key) => reconcileNode(ctx, key));
  // Fail closed without a usable key ring: no node is judged (nothing verified or stripped,
  // nodes keep what they have); the key is dropped and every node is enqueued again when the
  // ring is back (below), so nothing waits out a retry backoff.
  const nodeQueue = workQueue('nodes', 'node', (key) =>
    keyRing.available ? judgeNode(key) : Promise.resolve(),
  );
  const tokenQueue = workQueue(
    'tokens',
    'token',
    counted('tokens', (key) => reconcileToken(ctx, key)),
  );
  const csrQueue = workQueue(
    'csrs',
    'csr',
    counted('csrs', (key) => reconcileCsr(ctx, key)),
  );

  const nodes = new ListWatch<TrimmedNode>({
    kubeConfig,
    path: '/api/v1/nodes',
    // One copy of each label/annotation value shared by many nodes (kube/intern.ts).
    transform: (raw) => internStrings(trimNode(raw)),
    // Realistic Nodes are ~15 KB: a page of 500 is ~7.5 MB of JSON parsed at once, and that
    // transient garbage, not the trimmed cache, set the peak memory (10,000 nodes: 225–254 MiB
    // RSS with pages of 500, 202–206 MiB with 100, no slower to sync; bench/RESULTS.md, P4).
    pageSize: 100,
    onEvent: (type, node) => {
      classStatus.onNode(type, node);
      if (type === 'DELETED') indexes.onNodeDeleted(node);
      if (type !== 'DELETED') nodeQueue.add(node.metadata.name);
      // A Node gone (or re-created under its name) frees the bindings that name it.
      if (type !== 'MODIFIED')
        for (const tokenName of indexes.tokensByNodeName.get(node.metadata.name)) tokenQueue.add(tokenName);
    },
    onRestart: restart('nodes'),
  });
  const csrs = new ListWatch<CsrObject>({
    kubeConfig,
    path: '/apis/certificates.k8s.io/v1/certificatesigningrequests',
    fieldSelector: `spec.signerName=${KUBELET_CLIENT_SIGNER}`,
    transform: trimCsr,
    onEvent: (type, csr) => {
      indexes.onCsr(csr, type === 'DELETED');
      if (type === 'DELETED') return;
      const tokenId = csrTokenId(csr);
      if (!tokenId) return;
      const tokenName = indexes.tokenNameById.get(tokenId);
      // Ours: its token judges it (and hands the decision to the CSR queue). Not ours: refused there.
      if (tokenName) tokenQueue.add(tokenName);
      else csrQueue.add(csr.metadata.name);
    },
    onRestart: restart('certificatesigningrequests'),
  });
  const tokens = new ListWatch<StoredToken>({
    kubeConfig,
    path: `/apis/${GROUP}/${VERSION}/${FLAVORED_TOKEN_PLURAL}`,
    // Conditions, reasons, the class name...: ~0.5 KB less per token (bench/cache-cost.ts).
    transform: (raw) => internStrings(withoutManagedFields<StoredToken>(raw)),
    onEvent: (type, token, previous) => {
      indexes.onToken(type === 'DELETED' ? undefined : token, previous);
      tokenQueue.add(token.metadata.name);
      const affected = new Set(
        [...(previous?.status?.bindings ?? []), ...(token.status?.bindings ?? [])].map((b) => b.nodeName),
      );
      for (const nodeName of affected) nodeQueue.add(nodeName);
    },
    onRestart: restart('flavoredtokens'),
  });
  const claims = new ListWatch<NodeNameClaim>({
    kubeConfig,
    path: CLAIMS_PATH,
    transform: (raw) => withoutManagedFields<NodeNameClaim>(raw),
    onEvent: (type, claim, previous) => {
      indexes.onClaim(type === 'DELETED' ? undefined : claim, previous);
      // A claimed name without a live binding keeps its Node quarantined (nodes.ts); its holder
      // releases the claim if no binding of it backs the claim (claims.ts).
      if (claim.metadata.name) nodeQueue.add(claim.metadata.name);
      if (claim.spec.holder) tokenQueue.add(claim.spec.holder.tokenName);
    },
    onRestart: restart('nodenameclaims'),
  });
  // The process's FlavorClass cache when it shares one (the issuer and the guard read it too).
  const ownClasses = options.classes === undefined;
  const classes = options.classes ?? flavorClassCache(kubeConfig);
  // Its restarts count in this controller's metric whoever owns it.
  const removeClassRestarts = classes.addRestartHandler(restart('flavorclasses'));
  const caches: Caches = { nodes, csrs, tokens, classes, claims };
  // The one writer of FlavorClass status (its own queue; fed by the Node and FlavorClass caches).
  const classStatus: FlavorClassStatusReconciler = new FlavorClassStatusReconciler({
    classes,
    metrics,
    log,
    workers: config.workers,
    now: () => new Date(),
  });
  // After classStatus exists: a shared cache replays the classes it already holds at once.
  const removeClassHandler = classes.addEventHandler((type, flavorClass, previous) => {
    classStatus.onClass(type, flavorClass);
    // A status write (ours) leaves the generation as it was: no node's verdict can change.
    if (type === 'MODIFIED' && flavorClass.metadata.generation === previous?.metadata.generation) return;
    // A class edit (or a new class naming new protected keys) can change any node's verdict.
    for (const token of tokens.list()) {
      if (token.spec.flavorClassName !== flavorClass.metadata.name) continue;
      for (const binding of token.status?.bindings ?? []) nodeQueue.add(binding.nodeName);
    }
    // Nodes whose token is gone (deleted with Keep) carry the class in their record; and a Node
    // that carries one of the class's keys already (set before the class named it, when nothing
    // guarded it) is judged now, not at the next resync: it has no right to the key.
    const claimed = classKeyTest(flavorClass.spec);
    for (const node of nodes.list()) {
      if (readVerificationRecord(nodeFacts(node))?.flavorClass === flavorClass.metadata.name || claimed(node))
        nodeQueue.add(node.metadata.name);
    }
  });

  const recorder = new EventRecorder(kubeConfig, { component: 'nodeflavor-controller' });
  /** The context of one term: every write (and Event) goes through the term's fenced KubeConfig. */
  const termContext = (term: AbortSignal): ControllerContext => {
    const termKubeConfig = fencedKubeConfig(kubeConfig, term);
    const events = recorder.through(termKubeConfig);
    events.onError = (error) => {
      if (!term.aborted) log.warn({ err: error.message }, 'could not record an Event');
    };
    return {
      kubeConfig: termKubeConfig,
      api: kubeControllerApi(termKubeConfig),
      config,
      caches,
      indexes,
      metrics,
      events,
      log,
      keyRing: () => keyRing.get(),
      freshKeyRing: () => keyRing.refresh(),
      now: () => new Date(),
      enqueueNode: (name) => nodeQueue.add(name),
      requeueNode: (name, afterMs) => nodeQueue.addAfter(name, afterMs),
      enqueueToken: (name) => tokenQueue.add(name),
      requeueToken: (name, afterMs) => tokenQueue.addAfter(name, Math.min(afterMs, 2 ** 31 - 1)),
      enqueueCsr: (name) => csrQueue.add(name),
      requeueCsr: (name, afterMs) => csrQueue.addAfter(name, afterMs),
    };
  };
  // Until the first term: a closed fence, so nothing can write before this replica leads.
  const closed = new AbortController();
  closed.abort();
  ctx = termContext(closed.signal);

  const enqueueAll = () => {
    for (const name of tokens.keys()) tokenQueue.add(name);
    for (const name of nodes.keys()) nodeQueue.add(name);
    // CSRs of our tokens are judged with their token; the others are refused on their own.
    for (const csr of csrs.list())
      if (!indexes.tokenNameById.has(csrTokenId(csr) ?? '')) csrQueue.add(csr.metadata.name);
    classStatus.enqueueAll();
  };
  const resyncTimer = setInterval(enqueueAll, config.resync);
  resyncTimer.unref();
  // A restored or rotated ring can change any verdict: judge everything again (only the leader works).
  keyRing.onChange((ring) => {
    if (ring && leading) enqueueAll();
  });

  // Both queues start at once: a node whose binding is not recorded yet waits (its grace
  // period) rather than being judged, so nothing needs to hold the node queue back.
  let leading = false;
  const startWorking = (term: AbortSignal) => {
    if (term.aborted || stopped) return;
    ctx = termContext(term);
    leading = true;
    metrics.isLeader.set(1);
    log.info({ identity }, 'leading: reconciling');
    enqueueAll();
    tokenQueue.start();
    nodeQueue.start();
    csrQueue.start();
    classStatus.start(ctx.kubeConfig);
  };
  const stopWorking = () => {
    // Queued work stays queued (the next term runs it); work in flight fails with the fence.
    tokenQueue.stop();
    nodeQueue.stop();
    csrQueue.stop();
    classStatus.stop();
    metrics.isLeader.set(0);
    if (leading) log.warn({ identity }, 'stopped leading: stopped reconciling, in-flight writes cancelled');
    leading = false;
  };

  if (ownKeyRing) void keyRing.start();
  const synced = Promise.all([
    ownClasses ? classes.start() : classes.waitForSync(),
    tokens.start(),
    csrs.start(),
    nodes.start(),
    claims.start(),
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
    unsubscribe = leadership.subscribe((term) => (term ? startWorking(term) : stopWorking()));
    const current = leadership.term();
    if (current) startWorking(current);
    ownElector?.start();
  });
  log.info({ identity, controller: controllerUsername(config) }, 'controller starting');

  return {
    synced,
    caches,
    isLeader: () => leading,
    unsyncedCaches: () =>
      Object.entries(caches)
        .filter(([, cache]) => !cache.hasSynced)
        .map(([name]) => name),
    idle: async () => {
      await tokenQueue.whenIdle();
      await nodeQueue.whenIdle();
      await csrQueue.whenIdle();
      await classStatus.whenIdle();
    },
    stop: async () => {
      stopped = true;
      clearInterval(resyncTimer);
      unsubscribe?.();
      stopWorking();
      await ownElector?.stop();
      for (const cache of [nodes, csrs, tokens, claims]) cache.stop();
      removeClassHandler();
      removeClassRestarts();
      if (ownClasses) classes.stop();
      if (ownKeyRing) keyRing.stop();
    },
  };
}
