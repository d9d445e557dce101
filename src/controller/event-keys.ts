// Which keys a cache event enqueues, one function per arrow of the wiring (wiring.ts): each reads
// only the event, the caches and the indexes (as the event left them), and returns the keys of
// one queue. All but countedFlavors are pure; test/unit/wiring.test.ts runs each on events.

import type { FlavorClassSpec, NodeNameClaim } from '../flavor/resources.ts';
import { readVerificationRecord } from '../flavor/verdict.ts';
import type { StoredFlavorClass } from '../kube/flavor-classes.ts';
import type { WatchEventType } from '../kube/listwatch.ts';
import type { TrimmedNode } from '../kube/node-writes.ts';
import type { CsrObject, StoredToken } from '../kube/token-writes.ts';
import type { Caches } from './context.ts';
import { csrTokenId, type Indexes, nodeFacts } from './state.ts';

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

/** A Node gone (or re-created under its name) frees the bindings that name it: their tokens. */
export const tokensBoundToNode = ({ type, object }: CacheEvent<TrimmedNode>, { indexes }: Reads): string[] =>
  type === 'MODIFIED' ? [] : indexes.tokensByNodeName.get(object.metadata.name);

/** The token that issued the CSR's bootstrap token, when nodeflavor knows it (undefined: not ours). */
function tokenOf(csr: CsrObject, indexes: Indexes): string | undefined {
  const tokenId = csrTokenId(csr);
  return tokenId ? indexes.tokenNameById.get(tokenId) : undefined;
}

/** A bootstrap CSR of one of our tokens is judged by that token (which hands the decision on). */
export const tokenOfCsr = ({ type, object }: CacheEvent<CsrObject>, { indexes }: Reads): string[] => {
  if (type === 'DELETED') return [];
  const tokenName = tokenOf(object, indexes);
  return tokenName ? [tokenName] : [];
};

/** A bootstrap CSR of a token nodeflavor did not issue is refused on its own. */
export const foreignCsr = ({ type, object }: CacheEvent<CsrObject>, { indexes }: Reads): string[] => {
  if (type === 'DELETED' || !csrTokenId(object)) return [];
  return tokenOf(object, indexes) ? [] : [object.metadata.name];
};

/** The CSRs a resync judges on their own: those of tokens nodeflavor did not issue. */
export const foreignCsrs = ({ caches, indexes }: Reads): string[] =>
  caches.csrs
    .list()
    .filter((csr) => !indexes.tokenNameById.has(csrTokenId(csr) ?? ''))
    .map((csr) => csr.metadata.name);

/** The nodes a token's bindings name, before and after the event. */
export const nodesOfBindings = ({ object, previous }: CacheEvent<StoredToken>): Set<string> =>
  new Set([...(previous?.status?.bindings ?? []), ...(object.status?.bindings ?? [])].map((b) => b.nodeName));

/** A claimed name without a live binding keeps its Node quarantined (nodes.ts). */
export const claimedNode = ({ object }: CacheEvent<NodeNameClaim>): string[] =>
  object.metadata.name ? [object.metadata.name] : [];

/** The holder releases the claim if no binding of it backs the claim (claims.ts). */
export const claimHolder = ({ object }: CacheEvent<NodeNameClaim>): string[] =>
  object.spec.holder ? [object.spec.holder.tokenName] : [];

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
 * nodes its tokens bound, the nodes whose record names it (their token is gone, deleted with
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
  for (const token of caches.tokens.list()) {
    if (token.spec.flavorClassName !== object.metadata.name) continue;
    for (const binding of token.status?.bindings ?? []) keys.push(binding.nodeName);
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
