// Wires the controller: four list/watch caches (every replica keeps them warm), two work queues
// that only the leader drains, the event → key mapping, periodic resync, and leader election.
// Each leadership is a term: the reconcilers write through a KubeConfig fenced by the term's
// signal, so when the term ends (the Lease lost, or not renewed by the renew deadline) the work
// in flight is cut off with it, not just the work still queued.
import { randomBytes } from 'node:crypto';
import { hostname } from 'node:os';
import type { Logger } from 'pino';
import type { Registry } from 'prom-client';
import { type Config, controllerUsername } from '../config.ts';
import { FLAVOR_CLASS_PLURAL, FLAVORED_TOKEN_PLURAL, GROUP, VERSION } from '../flavor/resources.ts';
import { readVerificationRecord } from '../flavor/verdict.ts';
import { prepareKubeConfig } from '../kube/config.ts';
import { fencedKubeConfig } from '../kube/deadlines.ts';
import { EventRecorder } from '../kube/events.ts';
import { internStrings } from '../kube/intern.ts';
import { KeyRingWatch } from '../kube/keyring-watch.ts';
import type { KubeConfig } from '../kube/kubeconfig.ts';
import { LeaderElector, type Leadership, soleLeadership } from '../kube/leader.ts';
import { ListWatch, type RestartReason, withoutManagedFields } from '../kube/listwatch.ts';
import { type TrimmedNode, trimNode } from '../kube/node-writes.ts';
import { KubeReviews } from '../kube/reviews.ts';
import { type CsrObject, decideCsr, flavoredTokenExists, type StoredToken } from '../kube/token-writes.ts';
import { checkAutoApproval } from './auto-approval.ts';
import type { Caches, ControllerContext } from './context.ts';
import { controllerMetrics } from './metrics.ts';
import { reconcileNode } from './nodes.ts';
import { WorkQueue } from './queue.ts';
import { csrTokenId, Indexes, nodeFacts, type StoredFlavorClass, trimCsr } from './state.ts';
import { reconcileToken } from './tokens.ts';

const KUBELET_SIGNER = 'kubernetes.io/kube-apiserver-client-kubelet';
const CSR_KEY_PREFIX = 'csr/';

export interface ControllerHandle {
  /** Resolves when every cache has its first full list. */
  synced: Promise<void>;
  isLeader: () => boolean;
  /** The caches still waiting for their first list (for /readyz). */
  unsyncedCaches: () => string[];
  /** Resolves when both queues are empty (tests, benchmarks). */
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
  const judgeNode = counted('nodes', (key) => reconcileNode(ctx, key));
  const nodeQueue = new WorkQueue({
    name: 'nodes',
    concurrency: config.workers,
    // Fail closed without a usable key ring: no node is judged (nothing verified or stripped,
    // nodes keep what they have); the key is dropped and every node is enqueued again when the
    // ring is back (below), so nothing waits out a retry backoff.
    reconcile: (key) => (keyRing.available ? judgeNode(key) : Promise.resolve()),
    onError: (key, error, attempt) =>
      log.warn({ node: key, attempt, err: error.message }, 'node reconcile failed; retrying'),
    onDepthChange: (depth) => metrics.queueDepth.set({ queue: 'nodes' }, depth),
    onRetry: () => metrics.retries.inc({ queue: 'nodes' }),
  });
  const tokenQueue = new WorkQueue({
    name: 'tokens',
    concurrency: config.workers,
    reconcile: (key) =>
      key.startsWith(CSR_KEY_PREFIX)
        ? reconcileOrphanCsr(key.slice(CSR_KEY_PREFIX.length))
        : reconcileToken(ctx, key),
    onError: (key, error, attempt) =>
      log.warn({ token: key, attempt, err: error.message }, 'token reconcile failed; retrying'),
    onDepthChange: (depth) => metrics.queueDepth.set({ queue: 'tokens' }, depth),
    onRetry: () => metrics.retries.inc({ queue: 'tokens' }),
  });

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
    fieldSelector: `spec.signerName=${KUBELET_SIGNER}`,
    transform: trimCsr,
    onEvent: (type, csr) => {
      indexes.onCsr(csr, type === 'DELETED');
      if (type === 'DELETED') return;
      const tokenId = csrTokenId(csr);
      if (!tokenId) return;
      const tokenName = indexes.tokenNameById.get(tokenId);
      tokenQueue.add(tokenName ?? `${CSR_KEY_PREFIX}${csr.metadata.name}`);
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
  const classes = new ListWatch<StoredFlavorClass>({
    kubeConfig,
    path: `/apis/${GROUP}/${VERSION}/${FLAVOR_CLASS_PLURAL}`,
    transform: withoutManagedFields<StoredFlavorClass>,
    onEvent: (_type, flavorClass) => {
      // A class edit (or a new class naming new protected keys) can change any node's verdict.
      for (const token of tokens.list()) {
        if (token.spec.flavorClassName !== flavorClass.metadata.name) continue;
        for (const binding of token.status?.bindings ?? []) nodeQueue.add(binding.nodeName);
      }
      // Nodes whose token is gone (deleted with Keep) carry the class in their record.
      for (const node of nodes.list()) {
        if (readVerificationRecord(nodeFacts(node))?.flavorClass === flavorClass.metadata.name)
          nodeQueue.add(node.metadata.name);
      }
    },
    onRestart: restart('flavorclasses'),
  });
  const caches: Caches = { nodes, csrs, tokens, classes };

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
      requeueToken: (name, afterMs) => tokenQueue.addAfter(name, Math.min(afterMs, 2 ** 31 - 1)),
      approveCsr: async (csrName, approve, reason, message) => {
        const csr = csrs.get(csrName);
        if (!csr || csr.status?.conditions?.some((c) => c.type === 'Approved' || c.type === 'Denied')) return;
        await decideCsr(termKubeConfig, csr, approve, reason, message);
      },
    };
  };
  // Until the first term: a closed fence, so nothing can write before this replica leads.
  const closed = new AbortController();
  closed.abort();
  ctx = termContext(closed.signal);

  /** A CSR made with a bootstrap token we have no FlavoredToken for. */
  async function reconcileOrphanCsr(csrName: string): Promise<void> {
    const csr = csrs.get(csrName);
    if (!csr) return;
    const tokenId = csrTokenId(csr);
    const tokenName = tokenId ? indexes.tokenNameById.get(tokenId) : undefined;
    if (tokenName) {
      tokenQueue.add(tokenName);
      return;
    }
    const facts = await indexes.csrFacts(csr);
    if (facts.subject.ok) {
      indexes.setRejection(facts.subject.nodeName, csrName, {
        reason: 'UnknownToken',
        message: `CSR ${csrName} was made with a bootstrap token nodeflavor did not issue`,
      });
      nodeQueue.add(facts.subject.nodeName);
    }
    // Only CSRs of our bootstrap group are ours to decide: plain kubeadm tokens (another group)
    // are left to kube-controller-manager's auto-approval, untouched.
    if (config.csrApprover && csr.spec.groups?.includes(config.bootstrapGroup)) {
      // A denial is final for the CSR: never deny from a cache that may lag (a new leader right
      // after a failover, a token issued a moment ago). The issuer names records ft-<token ID>.
      if (tokenId && (await flavoredTokenExists(ctx.kubeConfig, `ft-${tokenId}`))) {
        tokenQueue.addAfter(`${CSR_KEY_PREFIX}${csrName}`, 1_000);
        return;
      }
      await ctx.approveCsr(
        csrName,
        false,
        'UnknownToken',
        'the bootstrap token was not issued by nodeflavor',
      );
    }
  }

  const enqueueAll = () => {
    for (const name of tokens.keys()) tokenQueue.add(name);
    for (const name of nodes.keys()) nodeQueue.add(name);
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
  };
  const stopWorking = () => {
    // Queued work stays queued (the next term runs it); work in flight fails with the fence.
    tokenQueue.stop();
    nodeQueue.stop();
    metrics.isLeader.set(0);
    if (leading) log.warn({ identity }, 'stopped leading: stopped reconciling, in-flight writes cancelled');
    leading = false;
  };

  if (ownKeyRing) void keyRing.start();
  const synced = Promise.all([classes.start(), tokens.start(), csrs.start(), nodes.start()]).then(() => {
    log.info(
      { nodes: nodes.size, tokens: tokens.size, csrs: csrs.size, classes: classes.size },
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
      ? new LeaderElector({
          kubeConfig,
          namespace: config.namespace,
          name: config.leaderElectionId,
          identity,
          leaseDurationMs: config.leaderElectLeaseDuration,
          renewDeadlineMs: config.leaderElectRenewDeadline,
          retryPeriodMs: config.leaderElectRetryPeriod,
          onError: (error) => log.warn({ err: error.message }, 'leader election'),
        })
      : undefined;
  const leadership = options.leadership ?? ownElector ?? soleLeadership();
  let unsubscribe: (() => void) | undefined;
  void synced.then(() => {
    if (stopped) return;
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
    },
    stop: async () => {
      stopped = true;
      clearInterval(resyncTimer);
      unsubscribe?.();
      stopWorking();
      await ownElector?.stop();
      for (const cache of [nodes, csrs, tokens, classes]) cache.stop();
      if (ownKeyRing) keyRing.stop();
    },
  };
}
