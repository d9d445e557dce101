// Where a token is in its life, as a node administrator sees it: issued → bound (a node's CSR
// named it) → verified (the node's flavor token checked out) — or expired, revoked, or failed with
// the reason the controller gave (the same name as its Warning Event). Pure: computed from the
// FlavoredToken with its joins' records composed onto it (node-name-claim.ts tokenWithJoins).
import { type FlavoredToken, LIMITS, type TokenBinding, type TokenRejection } from './resources.ts';
import { expiryText } from './token-facts.ts';

export const TOKEN_PHASES = ['Issued', 'Bound', 'Verified', 'Failed', 'Expired', 'Revoked'] as const;
export type TokenPhase = (typeof TOKEN_PHASES)[number];

/** One node that used (or tried to use) the token. */
export interface TokenNode {
  nodeName: string;
  csrName: string;
  boundAt: string | null;
  verifiedAt: string | null;
  /** Why this node is not verified (bound nodes) or was not bound (rejected CSRs). */
  reason: string | null;
  message: string | null;
}

interface TokenLifecycle {
  phase: TokenPhase;
  /** For Failed: the reason (an Event reason such as InvalidToken); for others, null. */
  reason: string | null;
  message: string | null;
  /** When the phase began, as far as the record tells (null when it does not). */
  since: string | null;
  nodes: TokenNode[];
}

const latest = (times: (string | null | undefined)[]): string | null =>
  times.filter((t): t is string => typeof t === 'string').sort((a, b) => Date.parse(b) - Date.parse(a))[0] ??
  null;

/** A binding's node is verified now: it was, and has not lost its flavor since. */
export function bindingVerified(binding: TokenBinding): boolean {
  return binding.verifiedAt !== undefined && binding.failure === undefined;
}

function bindingNode(binding: TokenBinding): TokenNode {
  return {
    nodeName: binding.nodeName,
    csrName: binding.csrName,
    boundAt: binding.boundAt,
    // A node that lost its flavor shows why, not the verification it no longer has.
    verifiedAt: bindingVerified(binding) ? (binding.verifiedAt ?? null) : null,
    reason: binding.failure?.reason ?? null,
    message: binding.failure?.message ?? null,
  };
}

function rejectionNode(rejection: TokenRejection): TokenNode {
  return {
    nodeName: rejection.nodeName ?? '',
    csrName: rejection.csrName,
    boundAt: null,
    verifiedAt: null,
    reason: rejection.reason,
    message: rejection.message,
  };
}

/**
 * The token's phase. Revoked first (nothing more can happen); then Verified while any node
 * verified with it still is (a pool token keeps that phase while more nodes join; a node that lost
 * its flavor since no longer counts); then Failed when the
 * latest thing that happened was a failure — a bound node whose check failed, or a CSR refused
 * after the last binding; then Bound; then Expired for a token no node used in time; else Issued.
 */
export function tokenLifecycle(token: FlavoredToken, now: Date): TokenLifecycle {
  const bindings = token.status?.bindings ?? [];
  const rejections = token.status?.rejections ?? [];
  const nodes = [...bindings.map(bindingNode), ...rejections.map(rejectionNode)];
  const revoked = token.spec.revoked || token.metadata.deletionTimestamp !== undefined;
  const result = (
    phase: TokenPhase,
    since: string | null,
    failure?: { reason: string; message: string },
  ) => ({
    phase,
    reason: failure?.reason ?? null,
    message: failure?.message ?? null,
    since,
    nodes,
  });
  if (revoked) {
    const condition = token.status?.conditions?.find((c) => c.type === 'Revoked' && c.status === 'True');
    return result('Revoked', condition?.lastTransitionTime ?? token.metadata.deletionTimestamp ?? null);
  }
  const verified = bindings.filter(bindingVerified);
  if (verified.length > 0) return result('Verified', latest(verified.map((b) => b.verifiedAt)));
  const lastBound = latest(bindings.map((b) => b.boundAt));
  const failures = [
    ...bindings.flatMap((b) => (b.failure ? [{ ...b.failure, at: b.failure.since }] : [])),
    ...rejections.filter((r) => lastBound === null || Date.parse(r.at) >= Date.parse(lastBound)),
  ].sort((a, b) => Date.parse(b.at) - Date.parse(a.at));
  const failure = failures[0];
  if (failure) return result('Failed', failure.at, failure);
  if (lastBound !== null) return result('Bound', lastBound);
  const expiresAt = expiryText(token);
  if (expiresAt !== null && Date.parse(expiresAt) <= now.getTime()) return result('Expired', expiresAt);
  return result('Issued', token.metadata.creationTimestamp ?? null);
}

/**
 * The rejections to keep after judging a token's CSRs: the ones recorded before, plus each newly
 * refused CSR (a CSR already recorded keeps its first entry, so a repeated judgement writes
 * nothing), the newest LIMITS.rejections of them.
 */
export function withRejections(
  recorded: readonly TokenRejection[],
  refused: readonly { csrName: string; nodeName?: string | undefined; reason: string; message: string }[],
  at: string,
): TokenRejection[] {
  const kept = [...recorded];
  for (const r of refused) {
    if (kept.some((k) => k.csrName === r.csrName && k.reason === r.reason)) continue;
    const entry: TokenRejection = {
      csrName: r.csrName,
      ...(r.nodeName ? { nodeName: r.nodeName } : {}),
      reason: r.reason,
      message: r.message.slice(0, LIMITS.messageLength),
      at,
    };
    const index = kept.findIndex((k) => k.csrName === r.csrName);
    if (index >= 0) kept.splice(index, 1);
    kept.push(entry);
  }
  return kept.slice(-LIMITS.rejections);
}
