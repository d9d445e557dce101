// Leader election on a coordination.k8s.io/v1 Lease, as client-go's leaderelection does it:
// acquire when the lease is free or its holder has not renewed within leaseDuration (measured on
// OUR clock from when we last saw the record change, so clock skew between replicas does not
// matter), renew every retryPeriod, step down if a renewal has not succeeded for renewDeadline,
// and release the lease on a clean shutdown so a standby takes over at once.
import type { KubeConfig } from '@kubernetes/client-node';
import { kubeFetch } from './fetch.ts';

export interface LeaderElectionOptions {
  kubeConfig: KubeConfig;
  namespace: string;
  name: string;
  identity: string;
  leaseDurationMs?: number;
  renewDeadlineMs?: number;
  retryPeriodMs?: number;
  onStartedLeading: () => void;
  onStoppedLeading: () => void;
  onError?: (error: Error) => void;
}

interface Lease {
  metadata: { name: string; namespace: string; resourceVersion?: string };
  spec: {
    holderIdentity?: string;
    leaseDurationSeconds?: number;
    acquireTime?: string;
    renewTime?: string;
    leaseTransitions?: number;
  };
}

/** Kubernetes MicroTime: RFC 3339 with exactly six fractional digits. */
export function microTime(date: Date): string {
  return date.toISOString().replace(/\.(\d{3})Z$/, '.$1000Z');
}

export class LeaderElector {
  private readonly options: Required<Omit<LeaderElectionOptions, 'onError'>> &
    Pick<LeaderElectionOptions, 'onError'>;
  private leading = false;
  private stopped = false;
  private observedRecord = '';
  private observedAt = 0;
  private lastRenewal = 0;
  private timer: NodeJS.Timeout | undefined;

  constructor(options: LeaderElectionOptions) {
    this.options = { leaseDurationMs: 10_000, renewDeadlineMs: 7_000, retryPeriodMs: 2_000, ...options };
  }

  get isLeader(): boolean {
    return this.leading;
  }

  start(): void {
    void this.tick();
  }

  /** Stops campaigning; a leader releases the lease so a standby need not wait for expiry. */
  async stop(): Promise<void> {
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
    if (this.leading) {
      this.leading = false;
      await this.release().catch((error: Error) => this.options.onError?.(error));
      this.options.onStoppedLeading();
    }
  }

  private path(): string {
    return `/apis/coordination.k8s.io/v1/namespaces/${this.options.namespace}/leases/${this.options.name}`;
  }

  private schedule(): void {
    if (this.stopped) return;
    this.timer = setTimeout(() => void this.tick(), this.options.retryPeriodMs);
  }

  private async tick(): Promise<void> {
    try {
      const acquired = await this.tryAcquireOrRenew();
      if (acquired) {
        this.lastRenewal = Date.now();
        if (!this.leading && !this.stopped) {
          this.leading = true;
          this.options.onStartedLeading();
        }
      } else if (this.leading) {
        this.stepDown();
      }
    } catch (error) {
      this.options.onError?.(error as Error);
      if (this.leading && Date.now() - this.lastRenewal > this.options.renewDeadlineMs) this.stepDown();
    }
    this.schedule();
  }

  private stepDown(): void {
    this.leading = false;
    this.options.onStoppedLeading();
  }

  private async tryAcquireOrRenew(): Promise<boolean> {
    const now = new Date();
    const { kubeConfig, identity } = this.options;
    const response = await kubeFetch(kubeConfig, this.path());
    if (response.status === 404) {
      const created = await kubeFetch(
        kubeConfig,
        `/apis/coordination.k8s.io/v1/namespaces/${this.options.namespace}/leases`,
        {
          method: 'POST',
          headers: { 'Content-Type': 'application/json' },
          body: JSON.stringify({
            apiVersion: 'coordination.k8s.io/v1',
            kind: 'Lease',
            metadata: { name: this.options.name, namespace: this.options.namespace },
            spec: this.spec(now, now, 0),
          }),
        },
      );
      if (created.status === 409) return false; // another replica won the race
      if (created.status !== 201)
        throw new Error(`create Lease: HTTP ${created.status}: ${await created.text()}`);
      return true;
    }
    if (response.status !== 200)
      throw new Error(`get Lease: HTTP ${response.status}: ${await response.text()}`);
    const lease = (await response.json()) as Lease;
    const record = `${lease.spec.holderIdentity ?? ''}|${lease.spec.renewTime ?? ''}`;
    if (record !== this.observedRecord) {
      this.observedRecord = record;
      this.observedAt = Date.now();
    }
    const holder = lease.spec.holderIdentity ?? '';
    const durationMs = (lease.spec.leaseDurationSeconds ?? this.options.leaseDurationMs / 1000) * 1000;
    const heldByOther = holder !== '' && holder !== identity && this.observedAt + durationMs > Date.now();
    if (heldByOther) return false;
    const transitions = (lease.spec.leaseTransitions ?? 0) + (holder === identity ? 0 : 1);
    const acquireTime =
      holder === identity && lease.spec.acquireTime ? new Date(lease.spec.acquireTime) : now;
    const updated = await kubeFetch(kubeConfig, this.path(), {
      method: 'PUT',
      headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({ ...lease, spec: this.spec(acquireTime, now, transitions) }),
    });
    if (updated.status === 409) return false; // someone else wrote first: re-read next round
    if (updated.status !== 200)
      throw new Error(`update Lease: HTTP ${updated.status}: ${await updated.text()}`);
    const written = (await updated.json()) as Lease;
    this.observedRecord = `${written.spec.holderIdentity ?? ''}|${written.spec.renewTime ?? ''}`;
    this.observedAt = Date.now();
    return true;
  }

  private spec(acquireTime: Date, renewTime: Date, transitions: number): Lease['spec'] {
    return {
      holderIdentity: this.options.identity,
      leaseDurationSeconds: Math.ceil(this.options.leaseDurationMs / 1000),
      acquireTime: microTime(acquireTime),
      renewTime: microTime(renewTime),
      leaseTransitions: transitions,
    };
  }

  private async release(): Promise<void> {
    const response = await kubeFetch(this.options.kubeConfig, this.path());
    if (response.status !== 200) return;
    const lease = (await response.json()) as Lease;
    if (lease.spec.holderIdentity !== this.options.identity) return;
    // An expired-looking record with no holder lets the next candidate acquire immediately.
    await kubeFetch(this.options.kubeConfig, this.path(), {
      method: 'PUT',
      headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({
        ...lease,
        spec: {
          ...lease.spec,
          holderIdentity: '',
          leaseDurationSeconds: 1,
          renewTime: microTime(new Date()),
        },
      }),
    });
  }
}
