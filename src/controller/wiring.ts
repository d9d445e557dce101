// The controller's wiring, in one place, as controller-runtime's builder declares it
// (For / Owns / Watches(..., EnqueueRequestsFromMapFunc)): each reconciler with its queue, what
// it writes (it is the one writer of each: docs/architecture.md, "Who writes what"), the caches
// it watches and, for each, which of its keys an event enqueues (event-keys.ts). manager.ts
// builds one queue per entry and routes every cache event through this table (routing.ts):
// first the indexes, then each watching reconciler's keys. test/unit/wiring.test.ts checks the
// mappings on events and the doc against `owns`.

import { CLASS_COALESCE_MS, reconcileClassStatus } from './class-status.ts';
import type { CacheName, CacheObject, ControllerContext } from './context.ts';
import { reconcileCsr } from './csrs.ts';
import {
  type CacheEvent,
  claimedNode,
  claimHolder,
  countedFlavors,
  foreignCsr,
  foreignCsrs,
  itself,
  itselfUnlessDeleted,
  nodesAClassCanChange,
  nodesOfBindings,
  type Reads,
  tokenOfCsr,
  tokensBoundToNode,
} from './event-keys.ts';
import { reconcileNode } from './nodes.ts';
import type { Indexes } from './state.ts';
import { reconcileToken } from './tokens.ts';

export type QueueName = 'tokens' | 'nodes' | 'csrs' | 'flavorclasses';

export interface Watch<T> {
  /** What an event means to this reconciler, in a few words (the doc's wiring table). */
  why: string;
  keys: (event: CacheEvent<T>, read: Reads) => Iterable<string>;
  /** Coalesced: the keys are added after this long (of several schedules of a key, the earliest wins). */
  afterMs?: number;
}

export interface ReconcilerWiring {
  /** As docs/architecture.md's "who writes what" names it in its writer column. */
  name: string;
  queue: QueueName;
  reconcile: (ctx: ControllerContext, key: string) => Promise<void>;
  /** What it writes and nothing else in the controller does, each as the doc's writer column says it. */
  owns: readonly string[];
  /** For each cache it watches: which of its keys an event of that cache enqueues. */
  watches: { [C in CacheName]?: Watch<CacheObject<C>> };
  /** The keys a resync enqueues (also a new term and a changed key ring). */
  resync: (read: Reads) => Iterable<string>;
  /** Fail closed: while the key ring is unusable its keys are dropped, not reconciled. */
  needsKeyRing?: boolean;
  /** Its queue's workers, from --workers (default: that many). */
  workers?: (configured: number) => number;
  /** Its retry log line: the field that names the key, and the message. */
  retryLog: { field: string; message: string };
}

const watch = <T>(why: string, keys: Watch<T>['keys'], afterMs?: number): Watch<T> =>
  afterMs === undefined ? { why, keys } : { why, keys, afterMs };

export const RECONCILERS: readonly ReconcilerWiring[] = [
  {
    name: 'token reconciler',
    queue: 'tokens',
    reconcile: reconcileToken,
    // Also, not alone: the revocation finalizer (the issuer sets it) and a half-made record's
    // deletion after --orphan-grace (the issuer's rollback deletes it too).
    owns: ['FlavoredToken `status`', 'NodeNameClaims', "the bootstrap Secret's deletion"],
    watches: {
      tokens: watch('the token', itself),
      csrs: watch('its token, if nodeflavor issued it', tokenOfCsr),
      nodes: watch('added or deleted: the tokens bound to its name', tokensBoundToNode),
      claims: watch('its holder', claimHolder),
    },
    resync: ({ caches }) => caches.tokens.keys(),
    retryLog: { field: 'token', message: 'token reconcile failed; retrying' },
  },
  {
    name: 'node reconciler',
    queue: 'nodes',
    reconcile: reconcileNode,
    owns: ['Nodes'],
    watches: {
      nodes: watch('the Node, unless deleted', itselfUnlessDeleted),
      tokens: watch('the nodes its bindings name, before and after', nodesOfBindings),
      claims: watch('the Node of the claimed name', claimedNode),
      classes: watch(
        "unless only its status changed: its tokens' bound nodes, the nodes whose record names it or that carry its keys",
        nodesAClassCanChange,
      ),
    },
    resync: ({ caches }) => caches.nodes.keys(),
    needsKeyRing: true,
    retryLog: { field: 'node', message: 'node reconcile failed; retrying' },
  },
  {
    name: 'CSR reconciler',
    queue: 'csrs',
    reconcile: reconcileCsr,
    owns: ['CSR approvals'],
    watches: {
      csrs: watch('the CSR, if it is a bootstrap CSR of a token nodeflavor did not issue', foreignCsr),
    },
    // CSRs of our tokens are judged with their token; the others are refused on their own.
    resync: foreignCsrs,
    retryLog: { field: 'csr', message: 'csr reconcile failed; retrying' },
  },
  {
    name: 'FlavorClass status reconciler',
    queue: 'flavorclasses',
    reconcile: reconcileClassStatus,
    owns: ['FlavorClass `status`'],
    watches: {
      classes: watch('the class, unless deleted', itselfUnlessDeleted),
      nodes: watch('the flavors whose count of verified Nodes it changed', countedFlavors, CLASS_COALESCE_MS),
    },
    resync: ({ caches }) => caches.classes.keys(),
    workers: (configured) => Math.max(1, Math.min(2, configured)),
    retryLog: { field: 'flavorClass', message: 'FlavorClass status write failed; retrying' },
  },
];

/** Index upkeep on each cache's events, before any keys are mapped (the reconcilers read them). */
export const INDEXERS: { [C in CacheName]?: (event: CacheEvent<CacheObject<C>>, indexes: Indexes) => void } =
  {
    nodes: ({ type, object }, indexes) => {
      // What was kept per node goes with it (node churn must not grow memory).
      if (type === 'DELETED') indexes.onNodeDeleted(object);
    },
    csrs: ({ type, object }, indexes) => indexes.onCsr(object, type === 'DELETED'),
    tokens: ({ type, object, previous }, indexes) =>
      indexes.onToken(type === 'DELETED' ? undefined : object, previous),
    claims: ({ type, object, previous }, indexes) =>
      indexes.onClaim(type === 'DELETED' ? undefined : object, previous),
  };
