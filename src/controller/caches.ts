// The controller's five list/watch caches, each trimmed to what the reconcilers read. Every
// replica keeps them warm; their events go through the wiring table (wiring.ts, routing.ts). The
// FlavorClass, FlavoredToken and NodeNameClaim caches are the process's, shared with the issuer
// and the admission guard when they run beside it.

import { KUBELET_CLIENT_SIGNER } from '../flavor/verdict.ts';
import type { CsrObject } from '../kube/csrs.ts';
import { type FlavorClassCache, flavorClassCache } from '../kube/flavor-classes.ts';
import { internStrings } from '../kube/intern.ts';
import { type TrimmedNode, trimNode } from '../kube/node-writes.ts';
import { flavoredTokenCache, joinRecordCache, type TokenCaches } from '../kube/token-caches.ts';
import type { KubeConfig } from '../runtime/kubeconfig.ts';
import { ListWatch, type RestartReason } from '../runtime/listwatch.ts';
import type { CacheName, CacheObject } from './context.ts';
import { trimCsr } from './facts.ts';

/** Each cache of the controller's Caches, as the ListWatch that fills it. */
export type WatchedCaches = { [C in CacheName]: ListWatch<CacheObject<C>> };

/**
 * The caches, not started. `classes` is the process's shared FlavorClass cache when given (its
 * owner starts it), else a new one; `restart` makes each watch's restart handler.
 */
export function watchedCaches(options: {
  kubeConfig: KubeConfig;
  classes: FlavorClassCache | undefined;
  tokenCaches?: TokenCaches | undefined;
  restart: (resource: string) => (reason: RestartReason, error?: Error) => void;
}): WatchedCaches {
  const { kubeConfig, restart } = options;
  const nodes = new ListWatch<TrimmedNode>({
    kubeConfig,
    path: '/api/v1/nodes',
    // One copy of each label/annotation value shared by many nodes (kube/intern.ts).
    transform: (raw) => internStrings(trimNode(raw)),
    // Realistic Nodes are ~15 KB: a page of 500 is ~7.5 MB of JSON parsed at once, and that
    // transient garbage, not the trimmed cache, set the peak memory (10,000 nodes: 225–254 MiB
    // RSS with pages of 500, 202–206 MiB with 100, no slower to sync; bench/RESULTS.md, P4).
    pageSize: 100,
    onRestart: restart('nodes'),
  });
  const csrs = new ListWatch<CsrObject>({
    kubeConfig,
    path: '/apis/certificates.k8s.io/v1/certificatesigningrequests',
    fieldSelector: `spec.signerName=${KUBELET_CLIENT_SIGNER}`,
    transform: trimCsr,
    onRestart: restart('certificatesigningrequests'),
  });
  // The process's token and join-record caches when given (the issuer reads them too), else ours.
  const tokens = options.tokenCaches?.tokens ?? flavoredTokenCache(kubeConfig);
  const claims = options.tokenCaches?.records ?? joinRecordCache(kubeConfig);
  const classes = options.classes ?? flavorClassCache(kubeConfig);
  // In this order: /readyz lists the unsynced ones in it.
  return { nodes, csrs, tokens, classes, claims };
}
