// The controller's wiring, in one place, as controller-runtime's builder declares it
// (For / Owns / Watches(..., EnqueueRequestsFromMapFunc)): each reconciler with its queue, what
// it writes (it is the one writer of each: docs/architecture.md, "Who writes what"), the caches
// it watches and, for each, which of its keys an event enqueues (event-keys.ts). manager.ts
// builds one queue per entry and routes every cache event through this table (routing.ts):
// first the indexes, then each watching reconciler's keys. This table is every enqueue there is:
// a reconciler enqueues nothing itself, it only asks for its own key again, later (its Requeue).
// test/unit/wiring.test.ts checks the mappings on events and the doc against `owns`.

import { CLASS_COALESCE_MS, reconcileClassStatus } from './class-status.ts';
import type { CacheName, CacheObject, ControllerContext, Requeue } from './context.ts';
import {
  type CacheEvent,
  claimedNode,
  countedFlavors,
  itself,
  itselfOnSpecChange,
  itselfUnlessDeleted,
  joinRequest,
  joinRequests,
  nodesAClassCanChange,
  nodesOfToken,
  type Reads,
  requestOfNodesRecord,
  requestsOfToken,
} from './event-keys.ts';
import type { Indexes } from './indexes.ts';
import { reconcileJoin } from './joins.ts';
import { reconcileNode } from './nodes.ts';
import { reconcileToken } from './tokens.ts';

export type QueueName = 'joins' | 'nodes' | 'tokens' | 'flavorclasses';

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
  /** Reconciles one key; what it returns asks for that key again, later (its only enqueue). */
  reconcile: (ctx: ControllerContext, key: string) => Promise<Requeue>;
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
    name: 'join reconciler',
    queue: 'joins',
    reconcile: reconcileJoin,
    owns: [
      'CSR approvals',
      'NodeNameClaims (the join records)',
      "FlavoredToken `status.uses`, `status.bindings` and `status.rejections` (the token's use count)",
      "the bootstrap Secret's deletion once every join registered",
    ],
    watches: {
      csrs: watch('a bootstrap CSR, or one a join record names: itself', joinRequest),
      tokens: watch(
        "added, its spec changed, or being deleted: its requests and its joins' requests",
        requestsOfToken,
      ),
      nodes: watch(
        "registered, judged or gone: the request its name's join record follows",
        requestOfNodesRecord,
      ),
    },
    resync: joinRequests,
    retryLog: { field: 'csr', message: 'join reconcile failed; retrying' },
  },
  {
    name: 'node reconciler',
    queue: 'nodes',
    reconcile: reconcileNode,
    owns: ['Nodes'],
    watches: {
      nodes: watch('the Node, unless deleted', itselfUnlessDeleted),
      tokens: watch(
        'its spec changed: the nodes of its joins; a new refusal: the node it names',
        nodesOfToken,
      ),
      claims: watch("its holder or its join's Node changed: the Node of the name", claimedNode),
      classes: watch(
        "unless only its status changed: its tokens' joins' nodes, the nodes whose record names it or that carry its keys",
        nodesAClassCanChange,
      ),
    },
    resync: ({ caches }) => caches.nodes.keys(),
    needsKeyRing: true,
    retryLog: { field: 'node', message: 'node reconcile failed; retrying' },
  },
  {
    name: 'token reconciler',
    queue: 'tokens',
    reconcile: reconcileToken,
    // Also, not alone: the revocation finalizer (the issuer sets it) and a half-made record's
    // deletion after --orphan-grace (the issuer's rollback deletes it too).
    owns: [
      'FlavoredToken `status.conditions` (the lifecycle)',
      "the bootstrap Secret's deletion on revocation, expiry, or a join that never registered",
    ],
    watches: {
      tokens: watch('the token', itself),
    },
    resync: ({ caches }) => caches.tokens.keys(),
    retryLog: { field: 'token', message: 'token reconcile failed; retrying' },
  },
  {
    name: 'FlavorClass status reconciler',
    queue: 'flavorclasses',
    reconcile: reconcileClassStatus,
    owns: ['FlavorClass `status`'],
    watches: {
      classes: watch('the class, when new or its spec changed', itselfOnSpecChange),
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
    csrs: ({ type, object }, indexes) => indexes.onCsr(object, type === 'DELETED'),
    tokens: ({ type, object, previous }, indexes) =>
      indexes.onToken(type === 'DELETED' ? undefined : object, previous),
    claims: ({ type, object, previous }, indexes) =>
      indexes.onClaim(type === 'DELETED' ? undefined : object, previous),
  };
