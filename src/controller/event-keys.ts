// Which keys a cache event enqueues, one function per arrow of the wiring (wiring.ts): each reads
// only the event, the caches and the indexes (as the event left them), and returns the keys of
// one queue. All but countedFlavors are pure; test/unit/wiring.test.ts runs each on events.

import { REFUSED_ANNOTATION } from '../flavor/refusal-record.ts';
import type { FlavorClassSpec, NodeNameClaim, StoredFlavoredToken } from '../flavor/resources.ts';
import { tokenIdOf } from '../flavor/token-facts.ts';
import { readVerificationRecord, VERIFIED_ANNOTATION } from '../flavor/verdict.ts';
import type { CsrObject } from '../kube/csrs.ts';
import type { StoredFlavorClass } from '../kube/flavor-classes.ts';
import type { TrimmedNode } from '../kube/node-writes.ts';
import type { WatchEventType } from '../runtime/listwatch.ts';
import type { Caches } from './context.ts';
import { csrTokenId, nodeFacts } from './facts.ts';
import { type Indexes, requestsOf } from './indexes.ts';

export interface CacheEvent<T> {
  type: WatchEventType;
  object: T;
  /** The object as cached before the event (undefined when it was not cached). */
  previous: T | undefined;
}

/** What a mapping may read: the caches and the indexes, as the event left them. */
export interface Reads {
  caches: Caches;
  indexes: Indexes;
}

type Named = { metadata: { name: string } };

/** The object's own key, whatever happened to it. */
export const itself = ({ object }: CacheEvent<Named>): string[] => [object.metadata.name];

/** The object's own key, unless it is gone. */
export const itselfUnlessDeleted = ({ type, object }: CacheEvent<Named>): string[] =>
  type === 'DELETED' ? [] : [object.metadata.name];

/**
 * The object's own key when it is new or its spec changed (a new generation): not when it is gone,
 * nor on a status write, which is the reconciler's own (answering each with another pass would
 * write the status again at every change of what it counts, undoing the coalescing).
 */
export const itselfOnSpecChange = ({
  type,
  object,
  previous,
}: CacheEvent<{ metadata: { name: string; generation?: number } }>): string[] =>
  type === 'DELETED' || (type === 'MODIFIED' && object.metadata.generation === previous?.metadata.generation)
    ? []
    : [object.metadata.name];

/** A bootstrap CSR (a join's request), or one a join record names (gone: its record may go too). */
export const joinRequest = ({ object }: CacheEvent<CsrObject>, { indexes }: Reads): string[] =>
  csrTokenId(object) || indexes.claimByRequest.has(object.metadata.name) ? [object.metadata.name] : [];

/** Every request a resync judges or follows: bootstrap CSRs, and those join records name. */
export const joinRequests = ({ caches }: Reads): string[] => {
  const keys = new Set(
    caches.csrs
      .list()
      .filter((csr) => csrTokenId(csr))
      .map((csr) => csr.metadata.name),
  );
  for (const record of caches.claims.list()) for (const request of requestsOf(record)) keys.add(request);
  return [...keys];
};

/** Whether the event changed what a token's joins rest on: its spec, or its deletion. */
function tokenChanged({ type, object, previous }: CacheEvent<StoredFlavoredToken>): boolean {
  return (
    type !== 'MODIFIED' ||
    object.metadata.generation !== previous?.metadata.generation ||
    object.metadata.deletionTimestamp !== previous?.metadata.deletionTimestamp
  );
}

/**
 * A token that arrived, changed (revoked) or is being deleted: its requests (a pending one is
 * judged on it, or denied) and its joins' records (a join that never registered ends with it).
 */
export const requestsOfToken = (
  event: CacheEvent<StoredFlavoredToken>,
  { caches, indexes }: Reads,
): string[] => {
  if (!tokenChanged(event)) return [];
  const keys = new Set(indexes.csrsByTokenId.get(tokenIdOf(event.object) ?? ''));
  for (const name of indexes.claimsByTokenUid.get(event.object.metadata.uid)) {
    const holder = caches.claims.get(name)?.spec.holder;
    if (holder) keys.add(holder.csrName);
  }
  return [...keys];
};

/** What the node reconciler's write (or the Node's coming and going) says about its join. */
function nodeJudged({ type, object, previous }: CacheEvent<TrimmedNode>): boolean {
  if (type !== 'MODIFIED' || previous === undefined) return true;
  const mark = (node: TrimmedNode, key: string) => node.metadata.annotations?.[key];
  return (
    object.metadata.uid !== previous.metadata.uid ||
    mark(object, VERIFIED_ANNOTATION) !== mark(previous, VERIFIED_ANNOTATION) ||
    mark(object, REFUSED_ANNOTATION) !== mark(previous, REFUSED_ANNOTATION)
  );
}

/** A Node registered, judged or gone: the request its name's join record follows. */
export const requestOfNodesRecord = (event: CacheEvent<TrimmedNode>, { caches }: Reads): string[] => {
  if (!nodeJudged(event)) return [];
  const record = caches.claims.get(event.object.metadata.name);
  const request = record?.spec.holder?.csrName ?? (record ? requestsOf(record)[0] : undefined);
  return request ? [request] : [];
};

/**
 * A token's events that can change a node's verdict: its spec or deletion (revocation strips or
 * quarantines the nodes of its joins), and refusals it newly records (the reason a Node under
 * that name shows).
 */
export const nodesOfToken = (
  event: CacheEvent<StoredFlavoredToken>,
  { caches, indexes }: Reads,
): string[] => {
  const keys = new Set<string>();
  if (tokenChanged(event))
    for (const name of indexes.claimsByTokenUid.get(event.object.metadata.uid))
      if (caches.claims.get(name)) keys.add(name);
  const before = new Set((event.previous?.status?.rejections ?? []).map((r) => r.csrName));
  for (const r of event.object.status?.rejections ?? [])
    if (r.nodeName && !before.has(r.csrName)) keys.add(r.nodeName);
  return [...keys];
};

/** Whether the record's holder or its join's Node changed (what the node verdict reads of it). */
function claimChanged({ type, object, previous }: CacheEvent<NodeNameClaim>): boolean {
  if (type !== 'MODIFIED' || previous === undefined) return true;
  const holder = (c: NodeNameClaim) => `${c.spec.holder?.tokenUID}/${c.spec.holder?.csrName}`;
  return (
    holder(object) !== holder(previous) || object.status?.join?.nodeUID !== previous.status?.join?.nodeUID
  );
}

/** A name claimed, taken over or released: its Node is judged again (quarantine, binding). */
export const claimedNode = (event: CacheEvent<NodeNameClaim>): string[] =>
  event.object.metadata.name && claimChanged(event) ? [event.object.metadata.name] : [];

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

/**
 * A class edit (or a new class naming new protected keys) can change any node's verdict: the
 * nodes of its tokens' joins, the nodes whose record names it (their token is gone, deleted with
 * Keep), and the nodes that carry one of its keys already (set before the class named it, when
 * nothing guarded it: judged now, not at the next resync, for they have no right to the key).
 * A status write (ours) leaves the generation as it was: no node's verdict can change.
 */
export function nodesAClassCanChange(
  { type, object, previous }: CacheEvent<StoredFlavorClass>,
  { caches }: Reads,
): string[] {
  if (type === 'MODIFIED' && object.metadata.generation === previous?.metadata.generation) return [];
  const keys: string[] = [];
  for (const record of caches.claims.list()) {
    const holder = record.spec.holder;
    const token = holder ? caches.tokens.get(holder.tokenName) : undefined;
    if (token?.spec.flavorClassName === object.metadata.name && record.metadata.name)
      keys.push(record.metadata.name);
  }
  const claimed = classKeyTest(object.spec);
  for (const node of caches.nodes.list()) {
    if (readVerificationRecord(nodeFacts(node))?.flavorClass === object.metadata.name || claimed(node))
      keys.push(node.metadata.name);
  }
  return keys;
}

/**
 * The flavors whose count of verified Nodes the event changed. The one mapping with a side
 * effect: it keeps indexes.nodeFlavors (what each Node carried) as it maps, so the count and the
 * keys come from one look at the Node.
 */
export const countedFlavors = ({ type, object }: CacheEvent<TrimmedNode>, { indexes }: Reads): string[] =>
  indexes.nodeFlavors.onNode(type, object);
