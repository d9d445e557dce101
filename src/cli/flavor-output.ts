// How kubectl-flavor prints things: kubectl-like tables, JSON and YAML. Pure.
import { stringify } from 'yaml';
import { QUARANTINE_TAINT_KEY, TOKEN_LABEL_KEY } from '../flavor/admission.ts';
import { type NodeFacts, readVerificationRecord } from '../flavor/verdict.ts';
import type { TokenStatusView } from '../tokenissuer/issuance/issue.ts';

export function table(headers: string[], rows: string[][]): string {
  const widths = headers.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? '').length)));
  const line = (cells: string[]) =>
    cells
      .map((cell, i) => (i === cells.length - 1 ? cell : cell.padEnd(widths[i] ?? 0)))
      .join('   ')
      .trimEnd();
  return [line(headers), ...rows.map(line)].join('\n') + '\n';
}

export function asJson(value: unknown): string {
  return JSON.stringify(value, null, 2) + '\n';
}

export function asYaml(value: unknown): string {
  return stringify(value, { lineWidth: 0 });
}

/** `3h`, `12m`, `40s`, or `-` once past. */
function relativeTime(iso: string | null, now: Date): string {
  if (iso === null) return '<none>';
  const seconds = Math.round((Date.parse(iso) - now.getTime()) / 1000);
  if (seconds <= 0) return 'expired';
  if (seconds < 120) return `${seconds}s`;
  if (seconds < 7200) return `${Math.round(seconds / 60)}m`;
  if (seconds < 172_800) return `${Math.round(seconds / 3600)}h`;
  return `${Math.round(seconds / 86_400)}d`;
}

export function tokensTable(tokens: TokenStatusView[], now: Date): string {
  const rows = tokens
    .slice()
    .sort((a, b) => (a.createdAt ?? '').localeCompare(b.createdAt ?? ''))
    .map((t) => [
      t.id,
      t.tokenID ?? '<none>',
      t.flavor,
      `${t.uses}/${t.maxUses === 0 ? '∞' : t.maxUses}`,
      relativeTime(t.expiresAt, now),
      t.state,
    ]);
  return table(['NAME', 'TOKEN-ID', 'FLAVOR', 'USES', 'EXPIRES-IN', 'STATE'], rows);
}

/**
 * What the controller made of each node: its verification record (annotation
 * nodeflavor.io/verified: flavor, token ID, time), else whether it still waits in quarantine, and
 * why (`reasonOf`: the failure reason, see explain.ts).
 */
export function nodesTable(
  nodes: NodeFacts[],
  reasonOf: (node: NodeFacts) => string = () => '<none>',
): string {
  const rows = nodes
    .slice()
    .sort((a, b) => a.name.localeCompare(b.name))
    .map((node) => {
      const record = readVerificationRecord(node);
      const quarantined = node.taints.some((t) => t.key === QUARANTINE_TAINT_KEY);
      if (record && !quarantined)
        return [node.name, record.flavorClass, 'verified', record.verifiedAt, record.tokenID, '<none>'];
      const waiting = Object.hasOwn(node.labels, TOKEN_LABEL_KEY) || quarantined;
      return [
        node.name,
        '<none>',
        waiting ? 'unverified' : 'unmanaged',
        '<none>',
        record?.tokenID ?? '<none>',
        waiting ? reasonOf(node) : '<none>',
      ];
    });
  return table(['NODE', 'FLAVOR', 'STATE', 'VERIFIED-AT', 'TOKEN-ID', 'REASON'], rows);
}
