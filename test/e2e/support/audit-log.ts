// Reading a kube-apiserver audit log (level Metadata: who did what to which object, when, and the
// answer; never a body) for fault tests that must prove what a replica wrote and when.
import { existsSync, readFileSync } from 'node:fs';

export interface AuditEvent {
  verb: string;
  username: string;
  sourceIPs: string[];
  resource: string;
  namespace?: string;
  name?: string;
  code: number;
  /** When the API server received the request (ms since the epoch). */
  receivedAt: number;
  uri: string;
}

const WRITE_VERBS = new Set(['create', 'update', 'patch', 'delete', 'deletecollection']);

export function isWrite(event: AuditEvent): boolean {
  return WRITE_VERBS.has(event.verb);
}

/** The completed requests in an audit log file (none when it does not exist yet). */
export function readAuditEvents(path: string): AuditEvent[] {
  if (!existsSync(path)) return [];
  const events: AuditEvent[] = [];
  for (const line of readFileSync(path, 'utf8').split('\n')) {
    if (line.trim() === '') continue;
    let raw: {
      stage?: string;
      verb?: string;
      user?: { username?: string };
      sourceIPs?: string[];
      objectRef?: { resource?: string; subresource?: string; namespace?: string; name?: string };
      responseStatus?: { code?: number };
      requestReceivedTimestamp?: string;
      requestURI?: string;
    };
    try {
      raw = JSON.parse(line);
    } catch {
      continue; // a line being written
    }
    if (raw.stage !== 'ResponseComplete') continue;
    const ref = raw.objectRef ?? {};
    events.push({
      verb: raw.verb ?? '',
      username: raw.user?.username ?? '',
      sourceIPs: raw.sourceIPs ?? [],
      resource: ref.subresource ? `${ref.resource}/${ref.subresource}` : (ref.resource ?? ''),
      ...(ref.namespace ? { namespace: ref.namespace } : {}),
      ...(ref.name ? { name: ref.name } : {}),
      code: raw.responseStatus?.code ?? 0,
      receivedAt: Date.parse(raw.requestReceivedTimestamp ?? ''),
      uri: raw.requestURI ?? '',
    });
  }
  return events;
}

export function describeEvent(event: AuditEvent): string {
  const at = new Date(event.receivedAt).toISOString();
  return `${at} ${event.verb} ${event.resource}${event.name ? ` ${event.name}` : ''} → ${event.code}`;
}
