// Why an unflavored Node is refused (annotation nodeflavor.io/refused), written by the node
// reconciler in the same Node write that keeps it quarantined: the reason (an Event reason) and
// its message, and since when. Durable where the join reconciler reads it to say, on the join's
// record, what became of the join (ADR 0016): no refusal travels between reconcilers in memory.
// It proves nothing and decides nothing (it is shown, never trusted); the guard keeps kubelets
// off it like every nodeflavor.io/ key. Pure.
import { LIMITS } from './resources.ts';

export const REFUSED_ANNOTATION = 'nodeflavor.io/refused';

export interface RefusalRecord {
  reason: string;
  message: string;
  since: string;
}

/** The annotation's value for `failure`, keeping the time of a refusal with the same reason. */
export function refusalAnnotation(
  failure: { reason: string; message: string },
  current: string | undefined,
  now: string,
): string {
  const previous = parseRefusalRecord(current);
  if (previous?.reason === failure.reason) return current as string;
  const record: RefusalRecord = {
    reason: failure.reason,
    message: failure.message.slice(0, LIMITS.messageLength),
    since: now,
  };
  return JSON.stringify(record);
}

/** Parses the annotation (text anyone with write access could have set: shown, never trusted). */
export function parseRefusalRecord(raw: string | undefined): RefusalRecord | undefined {
  if (!raw) return undefined;
  try {
    const value = JSON.parse(raw) as Partial<RefusalRecord>;
    if (typeof value.reason !== 'string' || !/^[A-Za-z][A-Za-z0-9]{0,63}$/.test(value.reason))
      return undefined;
    if (typeof value.message !== 'string' || typeof value.since !== 'string') return undefined;
    return {
      reason: value.reason,
      message: value.message.slice(0, LIMITS.messageLength),
      since: value.since,
    };
  } catch {
    return undefined;
  }
}
