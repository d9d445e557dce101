// Runs `nodeflavor capi` in the management cluster: four list/watch caches (KubeadmConfigs,
// Machines, Clusters, and the issuer access Secrets of its own namespace) that every replica keeps
// warm, two work queues (KubeadmConfigs, Machines) that only the Lease holder drains, and the
// routing of cache events to keys. Each leadership is a term: writes and Events go through a
// KubeConfig fenced by the term's signal, so a replica that lost the Lease writes nothing more.
import type { Logger } from 'pino';
import type { Registry } from 'prom-client';
import { EventRecorder, termWriters } from '../runtime/events.ts';
import type { KubeConfig } from '../runtime/kubeconfig.ts';
import { followTerms, type Leadership } from '../runtime/leader.ts';
import { objectKey, type RestartReason, unsyncedCaches } from '../runtime/listwatch.ts';
import { WorkQueue } from '../runtime/queue.ts';
import { type CapiCaches, capiCaches } from './cluster-api.ts';
import type { CapiConfig } from './config.ts';
import { type CapiContext, type IssuerLookup, RetryLater, type StatusCheck } from './context.ts';
import { accessSecretName, clusterOfAccessSecret, parseIssuerAccess } from './issuer-access.ts';
import { IssuerClient } from './issuer-client.ts';
import { type CapiMetrics, capiMetrics } from './metrics.ts';
import { reconcileConfig } from './reconcile-config.ts';
import { reconcileMachine } from './reconcile-machine.ts';
import { clusterNameOf, controllerOf, KUBEADM_CONFIG_KIND, MACHINE_KIND } from './resources.ts';

export interface CapiControllerHandle {
  synced: Promise<void>;
  unsyncedCaches: () => string[];
  isLeader: () => boolean;
  /** Resolves when both queues are empty (tests). */
  idle: () => Promise<void>;
  caches: CapiCaches;
  metrics: CapiMetrics;
  stop: () => Promise<void>;
}

export function startCapiController(options: {
  kubeConfig: KubeConfig;
  config: CapiConfig;
  registry: Registry;
  log: Logger;
  leadership: Leadership;
}): CapiControllerHandle {
  const { kubeConfig, config, log, leadership } = options;
  const metrics = capiMetrics(options.registry);
  const restart = (resource: string) => (reason: RestartReason, error?: Error) => {
    metrics.watchRestarts.inc({ resource, reason });
    if (reason === 'error' || reason === 'stalled')
      log.warn({ resource, reason, err: error?.message }, 'watch restarted');
  };
  const caches = capiCaches(kubeConfig, config.namespace, restart);

  // One client per access Secret version: a rotated bearer or CA takes effect at once.
  const clients = new Map<string, { version: string; client: IssuerClient }>();
  const issuerFor = (clusterKey: string): IssuerLookup => {
    const [clusterNamespace = '', clusterName = ''] = clusterKey.split('/');
    const name = accessSecretName(clusterNamespace, clusterName);
    const secret = caches.access.get(`${config.namespace}/${name}`);
    const parsed = parseIssuerAccess(secret, { namespace: config.namespace, name });
    if (!parsed.ok) return parsed;
    const version = secret?.metadata.resourceVersion ?? '';
    const known = clients.get(clusterKey);
    if (known && known.version === version) return { ok: true, client: known.client };
    known?.client.close();
    const client = new IssuerClient(parsed.access);
    clients.set(clusterKey, { version, client });
    return { ok: true, client };
  };

  const statusChecks = new Map<string, StatusCheck>();
  let ctx: CapiContext | undefined;
  const queue = (
    name: 'kubeadmconfigs' | 'machines',
    reconcile: (c: CapiContext, key: string) => Promise<void>,
  ) =>
    new WorkQueue({
      name,
      concurrency: config.workers,
      // A wait on the issuer (RBAC granted, class created, issuer back) clears within this of the fix.
      maxDelayMs: 15_000,
      reconcile: async (key) => {
        if (!ctx) return;
        try {
          await reconcile(ctx, key);
          metrics.reconciles.inc({ queue: name, result: 'ok' });
        } catch (error) {
          metrics.reconciles.inc({ queue: name, result: 'error' });
          throw error;
        }
      },
      onError: (key, error, attempt) => {
        const entry = { queue: name, key, attempt, err: error.message };
        if (error instanceof RetryLater) log.debug(entry, 'waiting (the condition says why)');
        else log.warn(entry, 'reconcile failed; retrying with backoff');
      },
      onDepthChange: (depth) => metrics.queueDepth.set({ queue: name }, depth),
    });
  const configQueue = queue('kubeadmconfigs', reconcileConfig);
  const machineQueue = queue('machines', reconcileMachine);

  // Routing: handlers only enqueue keys (level-based reconciles read the caches themselves).
  const enqueueCluster = (clusterKey: string) => {
    const [namespace, name] = clusterKey.split('/');
    for (const config of caches.configs.list())
      if (config.metadata.namespace === namespace && clusterNameOf(config) === name)
        configQueue.add(objectKey(config));
    for (const machine of caches.machines.list())
      if (machine.metadata.namespace === namespace && machine.spec?.clusterName === name)
        machineQueue.add(objectKey(machine));
  };
  const removers = [
    caches.configs.addEventHandler((_type, config) => {
      configQueue.add(objectKey(config));
      const owner = controllerOf(config);
      if (owner?.kind === MACHINE_KIND) machineQueue.add(`${config.metadata.namespace}/${owner.name}`);
    }),
    caches.machines.addEventHandler((type, machine) => {
      if (type === 'DELETED') statusChecks.delete(machine.metadata.uid);
      machineQueue.add(objectKey(machine));
      const ref = machine.spec?.bootstrap?.configRef;
      if (ref?.kind === KUBEADM_CONFIG_KIND) configQueue.add(`${machine.metadata.namespace}/${ref.name}`);
    }),
    caches.clusters.addEventHandler((_type, cluster) => enqueueCluster(objectKey(cluster))),
    caches.access.addEventHandler((_type, secret) => {
      const cluster = clusterOfAccessSecret(secret.metadata.name);
      if (cluster) enqueueCluster(cluster);
    }),
  ];
  const enqueueAll = () => {
    for (const key of caches.configs.keys()) configQueue.add(key);
    for (const key of caches.machines.keys()) machineQueue.add(key);
  };
  const resync = setInterval(enqueueAll, config.resync);
  resync.unref();

  const recorder = new EventRecorder(kubeConfig, { component: 'nodeflavor-capi' });
  const contextFor = (term: AbortSignal): CapiContext => {
    const { kubeConfig: termKubeConfig, events } = termWriters(kubeConfig, recorder, term, log);
    return {
      kubeConfig: termKubeConfig,
      caches,
      config,
      events,
      log,
      metrics,
      issuerFor,
      now: () => new Date(),
      statusChecks,
      requeueConfig: (key, afterMs) => configQueue.addAfter(key, afterMs),
      enqueueMachine: (key) => machineQueue.add(key),
      requeueMachine: (key, afterMs) => machineQueue.addAfter(key, afterMs),
    };
  };

  let leading = false;
  let stopped = false;
  const startWorking = (term: AbortSignal) => {
    if (term.aborted || stopped) return;
    ctx = contextFor(term);
    leading = true;
    metrics.isLeader.set(1);
    log.info('leading: reconciling KubeadmConfigs and Machines');
    enqueueAll();
    configQueue.start();
    machineQueue.start();
  };
  const stopWorking = () => {
    configQueue.stop();
    machineQueue.stop();
    metrics.isLeader.set(0);
    if (leading) log.warn('stopped leading: stopped reconciling, in-flight writes cancelled');
    leading = false;
  };

  const all = [caches.configs, caches.machines, caches.clusters, caches.access];
  const synced = Promise.all(all.map((cache) => cache.start())).then(() => {
    log.info(
      { kubeadmConfigs: caches.configs.size, machines: caches.machines.size, clusters: caches.clusters.size },
      'caches synced',
    );
  });
  let unsubscribe: (() => void) | undefined;
  void synced.then(() => {
    if (stopped) return;
    unsubscribe = followTerms(leadership, startWorking, stopWorking);
  });

  return {
    synced,
    caches,
    metrics,
    isLeader: () => leading,
    unsyncedCaches: () => unsyncedCaches(caches),
    idle: async () => {
      await configQueue.whenIdle();
      await machineQueue.whenIdle();
    },
    stop: async () => {
      stopped = true;
      clearInterval(resync);
      unsubscribe?.();
      stopWorking();
      for (const remove of removers) remove();
      for (const cache of all) cache.stop();
      for (const { client } of clients.values()) client.close();
    },
  };
}
