// `kubectl flavor explain NODE|TOKEN`: one screen that says what nodeflavor concluded about a node
// (or a token) and why — which token, which CSR, which check failed, what to do — from the facts
// src/kube/explain-facts.ts reads. Also the REASON of `kubectl flavor nodes`. Pure.

import { remedyFor } from '../flavor/reasons.ts';
import type { FlavoredToken, NodeNameClaim, TokenBinding } from '../flavor/resources.ts';
import { QUARANTINE_TAINT_KEY, TOKEN_LABEL_KEY } from '../flavor/resources.ts';
import { tokenIdOf } from '../flavor/token-facts.ts';
import { tokenLifecycle } from '../flavor/token-lifecycle.ts';
import { FAILURE_REASONS, type NodeFacts, readVerificationRecord } from '../flavor/verdict.ts';
import type { CsrSummary, EventSummary } from '../kube/explain-facts.ts';

type NodeState = 'verified' | 'quarantined' | 'waiting' | 'unmanaged';

interface NodeConclusion {
  state: NodeState;
  flavor: string | null;
  reason: string | null;
  message: string | null;
  token: FlavoredToken | undefined;
  binding: TokenBinding | undefined;
  csr: CsrSummary | undefined;
}

const isFailureReason = (reason: string) => (FAILURE_REASONS as readonly string[]).includes(reason);
const time = (t: string | undefined | null) => (t ? Date.parse(t) : 0);
const newest = <T>(items: T[], at: (item: T) => string | undefined | null): T | undefined =>
  [...items].sort((a, b) => time(at(b)) - time(at(a)))[0];

/** nodeflavor's own Warning Events with a failure reason (others' Events say nothing about flavors). */
function failureEvents(events: EventSummary[]): EventSummary[] {
  return events.filter(
    (e) => e.type === 'Warning' && isFailureReason(e.reason) && (e.component ?? '').startsWith('nodeflavor'),
  );
}

/** What nodeflavor made of the node, and the reason it gave, from the record that says it most durably. */
export function concludeNode(
  node: NodeFacts,
  tokens: FlavoredToken[],
  csrs: CsrSummary[],
  events: EventSummary[],
): NodeConclusion {
  const record = readVerificationRecord(node);
  const quarantined = node.taints.some((t) => t.key === QUARANTINE_TAINT_KEY);
  const bound = tokens.flatMap((token) =>
    (token.status?.bindings ?? [])
      .filter((b) => b.nodeName === node.name && (!b.nodeUID || b.nodeUID === node.uid))
      .map((binding) => ({ token, binding })),
  );
  const own = newest(bound, (b) => b.binding.boundAt);
  const rejection = newest(
    tokens.flatMap((token) =>
      (token.status?.rejections ?? []).filter((r) => r.nodeName === node.name).map((r) => ({ token, r })),
    ),
    (x) => x.r.at,
  );
  const event = newest(
    failureEvents(events).filter((e) => e.kind === 'Node' && e.name === node.name),
    (e) => e.lastAt,
  );
  const recordToken = record ? tokens.find((t) => (tokenIdOf(t) ?? '') === record.tokenID) : undefined;
  const token = own?.token ?? recordToken ?? rejection?.token;
  const csr =
    csrs.find((c) => c.name === (own?.binding.csrName ?? rejection?.r.csrName)) ??
    newest(
      csrs.filter((c) => c.nodeName === node.name),
      (c) => c.createdAt,
    );
  const base = { token, binding: own?.binding, csr };
  if (record && !quarantined) {
    return { ...base, state: 'verified', flavor: record.flavorClass, reason: null, message: null };
  }
  const managed =
    quarantined || record !== undefined || Object.hasOwn(node.labels, TOKEN_LABEL_KEY) || own !== undefined;
  if (!managed) return { ...base, state: 'unmanaged', flavor: null, reason: null, message: null };
  // The binding's failure is the controller's current conclusion; else the latest of a refused
  // CSR (on the token) and a Warning Event on the Node (Events expire after an hour).
  const failure = own?.binding.failure;
  const candidates = [
    ...(failure ? [{ reason: failure.reason, message: failure.message, at: failure.since }] : []),
    ...(!failure && rejection
      ? [{ reason: rejection.r.reason, message: rejection.r.message, at: rejection.r.at }]
      : []),
    ...(!failure && event ? [{ reason: event.reason, message: event.message, at: event.lastAt ?? '' }] : []),
  ];
  const why = newest(candidates, (c) => c.at);
  if (!why) return { ...base, state: 'waiting', flavor: null, reason: null, message: null };
  return { ...base, state: 'quarantined', flavor: null, reason: why.reason, message: why.message };
}

/** The REASON column of `kubectl flavor nodes`: why an unverified node is, or `<none>`. */
export function nodeReason(node: NodeFacts, tokens: FlavoredToken[], events: EventSummary[]): string {
  const conclusion = concludeNode(node, tokens, [], events);
  if (conclusion.state === 'quarantined') return conclusion.reason ?? '<unknown>';
  if (conclusion.state === 'waiting') return 'NotJudgedYet';
  return '<none>';
}

/** `5m`, `3h`, `2d`: how long ago. */
function ago(iso: string | null | undefined, now: Date): string {
  if (!iso) return '<unknown>';
  const seconds = Math.max(0, Math.round((now.getTime() - Date.parse(iso)) / 1000));
  if (seconds < 120) return `${seconds}s`;
  if (seconds < 7200) return `${Math.round(seconds / 60)}m`;
  if (seconds < 172_800) return `${Math.round(seconds / 3600)}h`;
  return `${Math.round(seconds / 86_400)}d`;
}

function lines(rows: [string, string | null | undefined][]): string {
  const shown = rows.filter((r): r is [string, string] => typeof r[1] === 'string' && r[1] !== '');
  const width = Math.max(...shown.map(([k]) => k.length)) + 2;
  return shown.map(([k, v]) => `${`${k}:`.padEnd(width)}${v}`).join('\n') + '\n';
}

function csrLine(csr: CsrSummary | undefined, now: Date): string | undefined {
  if (!csr) return undefined;
  const decision =
    csr.state === 'Pending' ? 'pending' : `${csr.state}${csr.reason ? ` (${csr.reason})` : ''}`;
  return `${csr.name}, made ${ago(csr.createdAt, now)} ago as ${csr.username || '<unknown>'}: ${decision}`;
}

function tokenLine(token: FlavoredToken | undefined, now: Date): string | undefined {
  if (!token) return undefined;
  const life = tokenLifecycle(token, now);
  return `${token.metadata.name} (token ID ${tokenIdOf(token) ?? ''}, flavor ${token.spec.flavorClassName}, ${life.phase}${life.reason ? ` ${life.reason}` : ''})`;
}

function eventLines(events: EventSummary[], now: Date): string {
  const ours = events
    .filter((e) => (e.component ?? '').startsWith('nodeflavor'))
    .sort((a, b) => time(b.lastAt) - time(a.lastAt))
    .slice(0, 8);
  if (ours.length === 0) return 'Events:      <none> (Events expire after an hour)\n';
  return (
    'Events:\n' +
    ours
      .map((e) => {
        const seen = e.count > 1 ? `x${e.count} over ${ago(e.firstAt, now)}` : `${ago(e.lastAt, now)} ago`;
        return `  ${e.type.padEnd(8)}${e.reason.padEnd(20)}${seen.padEnd(14)}${e.message}`;
      })
      .join('\n') +
    '\n'
  );
}

function remedyLines(reason: string | null): [string, string | undefined][] {
  const remedy = remedyFor(reason);
  return [
    ['Check failed', remedy?.check ? `${remedy.check} (${reason})` : (reason ?? undefined)],
    ['Why', remedy?.meaning],
    ['What to do', remedy?.action],
  ];
}

const CONCLUSIONS: Readonly<Record<NodeState, (c: NodeConclusion) => string>> = {
  verified: (c) => `verified: it carries flavor ${c.flavor}`,
  quarantined: (c) => `quarantined: not verified (${c.reason})`,
  waiting: () => 'quarantined: not judged yet (within the binding grace, or the controller has no leader)',
  unmanaged: () => 'not managed by nodeflavor: no token label, no flavor, no quarantine taint',
};

/** The name's joins, as its record tells them (newest last): what happened, when, to which token. */
function historyLines(record: NodeNameClaim | undefined, now: Date): string {
  const history = record?.status?.history ?? [];
  if (history.length === 0) return '';
  const rows = history.map((e) => {
    const who = [e.tokenID ? `token ${e.tokenID}` : undefined, e.csrName ? `CSR ${e.csrName}` : undefined]
      .filter(Boolean)
      .join(', ');
    const why = e.reason ? ` ${e.reason}${e.message ? `: ${e.message}` : ''}` : '';
    return `  ${`${ago(e.at, now)} ago`.padEnd(10)}${e.event.padEnd(12)}${who}${why}`;
  });
  return `Join history (NodeNameClaim ${record?.metadata.name}):\n${rows.join('\n')}\n`;
}

export function explainNode(
  node: NodeFacts,
  tokens: FlavoredToken[],
  csrs: CsrSummary[],
  events: EventSummary[],
  now: Date,
  joinRecord?: NodeNameClaim,
): string {
  const c = concludeNode(node, tokens, csrs, events);
  const record = readVerificationRecord(node);
  const rows: [string, string | null | undefined][] = [
    ['Node', node.name],
    ['Conclusion', CONCLUSIONS[c.state](c)],
    ['Verified at', c.state === 'verified' ? record?.verifiedAt : undefined],
    [
      'Token',
      tokenLine(c.token, now) ??
        (record ? `token ID ${record.tokenID} (its FlavoredToken is gone)` : '<none>'),
    ],
    ['CSR', csrLine(c.csr, now) ?? '<none>'],
    ['Message', c.message],
    ...(c.state === 'quarantined' ? remedyLines(c.reason) : []),
    [
      'What to do',
      c.state === 'waiting'
        ? 'wait a minute and run this again; if it stays, check the controller (kubectl -n nodeflavor get lease) and the operations guide'
        : c.state === 'verified' || c.state === 'unmanaged'
          ? 'nothing'
          : undefined,
    ],
  ];
  return lines(rows) + historyLines(joinRecord, now) + eventLines(events, now);
}

export function explainToken(
  token: FlavoredToken,
  csrs: CsrSummary[],
  events: EventSummary[],
  now: Date,
): string {
  const life = tokenLifecycle(token, now);
  const rows: [string, string | null | undefined][] = [
    ['Token', tokenLine(token, now)],
    ['Phase', `${life.phase}${life.since ? ` since ${life.since} (${ago(life.since, now)} ago)` : ''}`],
    ['Expires', token.status?.expiresAt ?? token.spec.expiresAt ?? token.spec.ttl],
    ['Uses', `${token.status?.uses ?? 0}/${token.spec.maxUses === 0 ? '∞' : token.spec.maxUses}`],
    ['Message', life.message],
    ...(life.phase === 'Failed' ? remedyLines(life.reason) : []),
  ];
  const nodeRows = life.nodes.map((n) => {
    const csr = csrs.find((c) => c.name === n.csrName);
    const state = n.verifiedAt
      ? `verified ${ago(n.verifiedAt, now)} ago`
      : n.boundAt
        ? `bound ${ago(n.boundAt, now)} ago${n.reason ? `, not verified: ${n.reason}` : ''}`
        : `refused: ${n.reason}`;
    return `  ${(n.nodeName || '<unreadable>').padEnd(24)}${state}  (CSR ${n.csrName}${csr ? `: ${csr.state}` : ''})`;
  });
  const nodes = nodeRows.length > 0 ? `Nodes:\n${nodeRows.join('\n')}\n` : 'Nodes:      <none>\n';
  return lines(rows) + nodes + eventLines(events, now);
}
