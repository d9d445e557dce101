// Kubernetes Events (core/v1) for Nodes and FlavoredTokens, so `kubectl describe` tells an admin
// why a node stays quarantined. Identical events for one object within `dedupeMs` are dropped:
// a reconcile loop that keeps failing for the same reason must not flood etcd.
import type { KubeConfig } from '@kubernetes/client-node';
import { kubeJson } from './fetch.ts';

export interface InvolvedObject {
  apiVersion: string;
  kind: string;
  name: string;
  uid?: string;
  namespace?: string;
}

export class EventRecorder {
  private readonly kubeConfig: KubeConfig;
  private readonly component: string;
  private readonly namespace: string;
  private readonly dedupeMs: number;
  private readonly recent = new Map<string, number>();

  constructor(kubeConfig: KubeConfig, options: { component: string; namespace?: string; dedupeMs?: number }) {
    this.kubeConfig = kubeConfig;
    this.component = options.component;
    // Events about cluster-scoped objects live in "default", where kubectl describe looks.
    this.namespace = options.namespace ?? 'default';
    this.dedupeMs = options.dedupeMs ?? 10 * 60_000;
  }

  /**
   * Records without making the caller wait: an Event is for humans, and a reconcile must not
   * spend a round trip (or fail) on it. Failures go to `onError`.
   */
  emit(object: InvolvedObject, type: 'Normal' | 'Warning', reason: string, message: string): void {
    this.record(object, type, reason, message).catch((error: Error) => this.onError?.(error));
  }

  onError: ((error: Error) => void) | undefined;

  async record(
    object: InvolvedObject,
    type: 'Normal' | 'Warning',
    reason: string,
    message: string,
  ): Promise<void> {
    const key = `${object.kind}/${object.name}/${object.uid ?? ''}/${reason}/${message}`;
    const now = Date.now();
    const last = this.recent.get(key);
    if (last !== undefined && now - last < this.dedupeMs) return;
    this.recent.set(key, now);
    if (this.recent.size > 10_000) {
      for (const [k, at] of this.recent) if (now - at > this.dedupeMs) this.recent.delete(k);
    }
    const timestamp = new Date(now).toISOString();
    const namespace = object.namespace ?? this.namespace;
    await kubeJson(this.kubeConfig, 'POST', `/api/v1/namespaces/${namespace}/events`, {
      action: 'record an Event',
      body: {
        apiVersion: 'v1',
        kind: 'Event',
        metadata: { generateName: `${object.name}.`, namespace },
        involvedObject: object,
        type,
        reason,
        message: message.slice(0, 1024),
        source: { component: this.component },
        reportingComponent: this.component,
        reportingInstance: this.component,
        firstTimestamp: timestamp,
        lastTimestamp: timestamp,
        count: 1,
      },
    });
  }
}
