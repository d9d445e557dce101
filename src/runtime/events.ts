// Kubernetes Events (core/v1) for Nodes, FlavoredTokens and the key Secret, aggregated the way
// client-go's recorder (and so cert-manager) aggregates them: one Event per object, type and
// reason, whose count and lastTimestamp grow as the reason recurs (`kubectl describe` shows
// "x3 over 10m") and whose message is the latest. The Event's name is derived from that key, so
// every replica and every restart finds the same one. Identical occurrences within `dedupeMs`
// are not written at all: a reconcile loop that keeps failing for the same reason must not
// turn into a stream of writes.
import { createHash } from 'node:crypto';
import { fencedKubeConfig } from './deadlines.ts';
import { kubeJson } from './fetch.ts';
import { KubeError } from './kube-error.ts';
import type { KubeConfig } from './kubeconfig.ts';

export interface InvolvedObject {
  apiVersion: string;
  kind: string;
  name: string;
  uid?: string;
  namespace?: string;
}

export type EventType = 'Normal' | 'Warning';

const MAX_MESSAGE = 1024;
const MAX_NAME = 253;

/**
 * The name of the one Event about `object` with this type and reason: the object's name (as
 * kubectl and client-go name Events), a dot and a digest of kind, UID, type and reason. Pure.
 */
export function aggregatedEventName(object: InvolvedObject, type: EventType, reason: string): string {
  const digest = createHash('sha256')
    .update(
      JSON.stringify([object.kind, object.namespace ?? '', object.name, object.uid ?? '', type, reason]),
    )
    .digest('hex')
    .slice(0, 16);
  const prefix = object.name.slice(0, MAX_NAME - digest.length - 1).replace(/[^a-z0-9.-]/g, '-');
  return `${prefix}.${digest}`;
}

/** True when a stored Event already says `message` and was last seen within `dedupeMs`. Pure. */
export function isRecentRepeat(
  stored: { message?: string; lastTimestamp?: string },
  message: string,
  at: Date,
  dedupeMs: number,
): boolean {
  const last = Date.parse(stored.lastTimestamp ?? '');
  return (
    stored.message === message.slice(0, MAX_MESSAGE) &&
    Number.isFinite(last) &&
    at.getTime() - last < dedupeMs
  );
}

/** The merge patch that records one more occurrence of an existing Event. Pure. */
export function occurrencePatch(count: number, message: string, at: Date) {
  return { count, lastTimestamp: at.toISOString(), message: message.slice(0, MAX_MESSAGE) };
}

interface Aggregate {
  count: number;
}

export class EventRecorder {
  private kubeConfig: KubeConfig;
  private readonly component: string;
  private readonly namespace: string;
  private readonly dedupeMs: number;
  private readonly now: () => Date;
  /** Last write per (key, message): identical occurrences within dedupeMs are dropped. */
  private readonly recent = new Map<string, number>();
  /** Counts this process last wrote, per Event name (a hint: the stored count is re-read on a miss). */
  private readonly aggregates = new Map<string, Aggregate>();

  constructor(
    kubeConfig: KubeConfig,
    options: { component: string; namespace?: string; dedupeMs?: number; now?: () => Date },
  ) {
    this.kubeConfig = kubeConfig;
    this.component = options.component;
    // Events about cluster-scoped objects live in "default", where kubectl describe looks.
    this.namespace = options.namespace ?? 'default';
    this.dedupeMs = options.dedupeMs ?? 10 * 60_000;
    this.now = options.now ?? (() => new Date());
  }

  /**
   * Records without making the caller wait: an Event is for humans, and a reconcile must not
   * spend a round trip (or fail) on it. Failures go to `onError`.
   */
  emit(object: InvolvedObject, type: EventType, reason: string, message: string): void {
    this.record(object, type, reason, message).catch((error: Error) => this.onError?.(error));
  }

  onError: ((error: Error) => void) | undefined;

  /**
   * This recorder, with its dedupe window and counts, writing through another KubeConfig (a
   * leader's fenced one: its Events stop with its term). Shares this one's state.
   */
  through(kubeConfig: KubeConfig): EventRecorder {
    const view = Object.create(this) as EventRecorder;
    view.kubeConfig = kubeConfig;
    view.onError = undefined;
    return view;
  }

  async record(object: InvolvedObject, type: EventType, reason: string, message: string): Promise<void> {
    const at = this.now();
    const name = aggregatedEventName(object, type, reason);
    const dedupeKey = `${name}/${message}`;
    const last = this.recent.get(dedupeKey);
    if (last !== undefined && at.getTime() - last < this.dedupeMs) return;
    this.recent.set(dedupeKey, at.getTime());
    this.forgetOld(at.getTime());
    const namespace = object.namespace ?? this.namespace;
    const path = `/api/v1/namespaces/${namespace}/events`;
    const known = this.aggregates.get(name);
    if (known && (await this.bump(path, name, known.count + 1, message, at))) return;
    try {
      await kubeJson(this.kubeConfig, 'POST', path, {
        action: 'record an Event',
        body: {
          apiVersion: 'v1',
          kind: 'Event',
          metadata: { name, namespace },
          involvedObject: object,
          type,
          reason,
          message: message.slice(0, MAX_MESSAGE),
          source: { component: this.component },
          reportingComponent: this.component,
          reportingInstance: this.component,
          firstTimestamp: at.toISOString(),
          lastTimestamp: at.toISOString(),
          count: 1,
        },
      });
      this.aggregates.set(name, { count: 1 });
    } catch (error) {
      if (!(error instanceof KubeError && error.status === 409)) throw error;
      // Another replica, or this process before a restart, recorded it: one more occurrence,
      // unless it is the same message within dedupeMs (a restart or failover re-judging a node
      // that has not changed is no new occurrence, and must not write).
      const stored = await kubeJson<{ count?: number; message?: string; lastTimestamp?: string }>(
        this.kubeConfig,
        'GET',
        `${path}/${name}`,
        { action: 'read an Event' },
      );
      if (isRecentRepeat(stored, message, at, this.dedupeMs)) {
        this.aggregates.set(name, { count: stored.count ?? 1 });
        return;
      }
      await this.bump(path, name, (stored.count ?? 1) + 1, message, at);
    }
  }

  /** Patches the Event's count; false when it is gone (expired by the API server's event TTL). */
  private async bump(path: string, name: string, count: number, message: string, at: Date): Promise<boolean> {
    try {
      await kubeJson(this.kubeConfig, 'PATCH', `${path}/${name}`, {
        action: 'record an Event',
        contentType: 'application/merge-patch+json',
        body: occurrencePatch(count, message, at),
      });
      this.aggregates.set(name, { count });
      return true;
    } catch (error) {
      if (error instanceof KubeError && error.status === 404) {
        this.aggregates.delete(name);
        return false;
      }
      throw error;
    }
  }

  private forgetOld(now: number): void {
    if (this.recent.size <= 10_000) return;
    for (const [key, at] of this.recent) if (now - at > this.dedupeMs) this.recent.delete(key);
    if (this.aggregates.size > 10_000) this.aggregates.clear();
  }
}

/**
 * A leadership term's writers: the KubeConfig fenced by the term and the Events recorded through
 * it, so the writes and Events of a term that ended are cut off with it (and their failures, then
 * expected, are not logged).
 */
export function termWriters<T extends KubeConfig>(
  kubeConfig: T,
  recorder: EventRecorder,
  term: AbortSignal,
  log: { warn: (details: object, message: string) => void },
): { kubeConfig: T; events: EventRecorder } {
  const termKubeConfig = fencedKubeConfig(kubeConfig, term);
  const events = recorder.through(termKubeConfig);
  events.onError = (error) => {
    if (!term.aborted) log.warn({ err: error.message }, 'could not record an Event');
  };
  return { kubeConfig: termKubeConfig, events };
}
