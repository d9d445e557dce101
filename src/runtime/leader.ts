// Leader election on a coordination.k8s.io/v1 Lease, as client-go's leaderelection does it:
// acquire when the lease is free or its holder has not renewed within leaseDuration (measured on
// OUR clock from when we last saw the record change, so clock skew between replicas does not
// matter), renew every retryPeriod, and release the lease on a clean shutdown so a standby takes
// over at once.
//
// Nothing here waits on the API server without a deadline. A leader steps down the moment its
// renewDeadline passes without a successful renewal, whatever its requests are doing (a watchdog
// timer, not the end of a request that may never come), and every leadership is a *term* with an
// AbortSignal that fires on stepping down: work done under the term (fencedKubeConfig) is cut
// off with it, so a replica that lost the Lease writes nothing more. Since a standby acquires
// only leaseDuration after it last saw a renewal, and the leader gave up at renewDeadline, the
// gap between them (3 s with the defaults) is what keeps two leaders' writes apart. For that the
// leader counts its renew deadline from when it *sent* the renewal (the renewTime it writes), never
// from when the answer came: a standby starts its count only once it sees the new renewTime, so an
// answer that arrives late must not stretch the leader's term past what the standby grants.

import { FenceClosedError } from './deadlines.ts';
import { kubeFetch } from './fetch.ts';
import type { KubeConfig } from './kubeconfig.ts';

interface LeaderElectionTimings {
  leaseDurationMs: number;
  renewDeadlineMs: number;
  retryPeriodMs: number;
}

const DEFAULT_LEADER_TIMINGS: LeaderElectionTimings = {
  leaseDurationMs: 10_000,
  renewDeadlineMs: 7_000,
  retryPeriodMs: 2_000,
};

interface LeaderElectionOptions extends Partial<LeaderElectionTimings> {
  kubeConfig: KubeConfig;
  namespace: string;
  name: string;
  identity: string;
  /** `term` fires when this leadership ends. */
  onStartedLeading?: (term: AbortSignal) => void;
  /** `why`: a sentence for the log (never a secret). */
  onStoppedLeading?: (why: string) => void;
  onError?: (error: Error) => void;
}

/** The settings of `nodeflavor run` an elector takes (src/config.ts). */
interface ElectionConfig {
  namespace: string;
  leaderElectionId: string;
  leaderElectLeaseDuration: number;
  leaderElectRenewDeadline: number;
  leaderElectRetryPeriod: number;
}

/** The elector a process campaigns with, from its settings; `announce` logs each term. */
export function electorFor(
  kubeConfig: KubeConfig,
  config: ElectionConfig,
  identity: string,
  log: { info: (o: object, m: string) => void; warn: (o: object, m: string) => void },
  announce: boolean,
): LeaderElector {
  return new LeaderElector({
    kubeConfig,
    namespace: config.namespace,
    name: config.leaderElectionId,
    identity,
    leaseDurationMs: config.leaderElectLeaseDuration,
    renewDeadlineMs: config.leaderElectRenewDeadline,
    retryPeriodMs: config.leaderElectRetryPeriod,
    ...(announce
      ? {
          onStartedLeading: () => log.info({ identity }, 'became the leader'),
          onStoppedLeading: (why: string) => log.warn({ identity, why }, 'stopped leading'),
        }
      : {}),
    onError: (error) => log.warn({ err: error.message }, 'leader election'),
  });
}

/** Who may write the objects every replica shares: the leader, during its term. */
export interface Leadership {
  /** The current term's signal while leading, else undefined. */
  term(): AbortSignal | undefined;
  /** Called with the new term on gaining leadership, and with undefined on losing it. */
  subscribe(listener: (term: AbortSignal | undefined) => void): () => void;
}

/**
 * Runs `start` for each term this process begins, the one it holds now included, and `stop` when a
 * term ends. Call it once the caches have synced: work starts only on warm caches. Returns the
 * unsubscribe.
 */
export function followTerms(
  leadership: Leadership,
  start: (term: AbortSignal) => void,
  stop: () => void,
): () => void {
  const unsubscribe = leadership.subscribe((term) => (term ? start(term) : stop()));
  const current = leadership.term();
  if (current) start(current);
  return unsubscribe;
}

/** The leadership of a process that runs without election (--no-leader-elect): always leading. */
export function soleLeadership(): Leadership {
  const term = new AbortController().signal;
  return { term: () => term, subscribe: () => () => undefined };
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
function microTime(date: Date): string {
  return date.toISOString().replace(/\.(\d{3})Z$/, '.$1000Z');
}

/** What one attempt found: we hold the lease, or another holder does until `expiresAt` (our clock). */
type Attempt = { held: true } | { held: false; expiresAt: number };

export class LeaderElector implements Leadership {
  private readonly options: LeaderElectionOptions & LeaderElectionTimings;
  private currentTerm: AbortController | undefined;
  private stopped = false;
  private observedRecord = '';
  private observedAt = 0;
  private lastRenewal = 0;
  private timer: NodeJS.Timeout | undefined;
  private watchdog: NodeJS.Timeout | undefined;
  private readonly listeners = new Set<(term: AbortSignal | undefined) => void>();

  constructor(options: LeaderElectionOptions) {
    const timings = { ...DEFAULT_LEADER_TIMINGS, ...definedTimings(options) };
    checkTimings(timings);
    this.options = { ...options, ...timings };
  }

  get isLeader(): boolean {
    return this.currentTerm !== undefined;
  }

  term(): AbortSignal | undefined {
    return this.currentTerm?.signal;
  }

  subscribe(listener: (term: AbortSignal | undefined) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  start(): void {
    void this.tick();
  }

  /** Stops campaigning; a leader releases the lease so a standby need not wait for expiry. */
  async stop(): Promise<void> {
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
    if (this.currentTerm) {
      this.stepDown('shutting down');
      // Bounded like a renewal: a hung API server must not hold up the shutdown.
      await this.release(AbortSignal.timeout(this.options.renewDeadlineMs)).catch((error: Error) =>
        this.options.onError?.(error),
      );
    }
  }

  private path(): string {
    return `/apis/coordination.k8s.io/v1/namespaces/${this.options.namespace}/leases/${this.options.name}`;
  }

  private schedule(delayMs: number): void {
    if (this.stopped) return;
    this.timer = setTimeout(() => void this.tick(), Math.max(0, delayMs));
  }

  private async tick(): Promise<void> {
    if (this.stopped) return;
    const { renewDeadlineMs, retryPeriodMs } = this.options;
    // A leader's attempt may last only until its renew deadline; a standby's, one renew deadline.
    const budget = this.currentTerm ? this.lastRenewal + renewDeadlineMs - Date.now() : renewDeadlineMs;
    let next = retryPeriodMs;
    try {
      if (budget <= 0) throw new Error('the renew deadline passed before the attempt started');
      const sentAt = Date.now();
      const attempt = await this.tryAcquireOrRenew(AbortSignal.timeout(budget), new Date(sentAt));
      if (this.stopped) return;
      if (attempt.held) {
        // From when it was sent (see the top of the file), so a slow answer buys no extra time.
        this.lastRenewal = sentAt;
        const left = sentAt + renewDeadlineMs - Date.now();
        if (left <= 0) throw new Error('the lease was renewed, but the answer came after the renew deadline');
        this.armWatchdog(left);
        if (!this.currentTerm) this.startTerm();
      } else {
        if (this.currentTerm) this.stepDown('another replica holds the lease');
        // Try again exactly when the holder's lease runs out, if that is sooner than a retry period.
        next = Math.min(retryPeriodMs, attempt.expiresAt - Date.now() + 1);
      }
    } catch (error) {
      this.options.onError?.(error as Error);
      if (this.currentTerm && Date.now() - this.lastRenewal >= renewDeadlineMs)
        this.stepDown('the lease could not be renewed within the renew deadline');
    }
    this.schedule(next);
  }

  /** Steps down at the renew deadline, `delayMs` from now, even while a renewal request hangs. */
  private armWatchdog(delayMs: number): void {
    if (this.watchdog) clearTimeout(this.watchdog);
    this.watchdog = setTimeout(
      () => this.stepDown('the lease could not be renewed within the renew deadline'),
      delayMs,
    );
    this.watchdog.unref();
  }

  private startTerm(): void {
    const term = new AbortController();
    this.currentTerm = term;
    this.options.onStartedLeading?.(term.signal);
    for (const listener of this.listeners) listener(term.signal);
  }

  private stepDown(why: string): void {
    const term = this.currentTerm;
    if (!term) return;
    this.currentTerm = undefined;
    if (this.watchdog) clearTimeout(this.watchdog);
    // First: whatever runs under the term is cut off before anyone is told.
    term.abort(new FenceClosedError(`this replica stopped leading (${why}): the request was cancelled`));
    this.options.onStoppedLeading?.(why);
    for (const listener of this.listeners) listener(undefined);
  }

  /** One attempt, begun at `now` (the renewTime it writes). */
  private async tryAcquireOrRenew(signal: AbortSignal, now: Date): Promise<Attempt> {
    const { kubeConfig, identity } = this.options;
    const response = await kubeFetch(kubeConfig, this.path(), { signal });
    if (response.status === 404) {
      await response.body?.cancel();
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
          signal,
        },
      );
      const text = await created.text();
      if (created.status === 409) return { held: false, expiresAt: Number.POSITIVE_INFINITY }; // lost the race
      if (created.status !== 201) throw new Error(`create Lease: HTTP ${created.status}: ${text}`);
      return { held: true };
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
    const expiresAt = this.observedAt + durationMs;
    if (holder !== '' && holder !== identity && expiresAt > Date.now()) return { held: false, expiresAt };
    const transitions = (lease.spec.leaseTransitions ?? 0) + (holder === identity ? 0 : 1);
    const acquireTime =
      holder === identity && lease.spec.acquireTime ? new Date(lease.spec.acquireTime) : now;
    const updated = await kubeFetch(kubeConfig, this.path(), {
      method: 'PUT',
      headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({ ...lease, spec: this.spec(acquireTime, now, transitions) }),
      signal,
    });
    const text = await updated.text();
    if (updated.status === 409) return { held: false, expiresAt: Number.POSITIVE_INFINITY }; // re-read next round
    if (updated.status !== 200) throw new Error(`update Lease: HTTP ${updated.status}: ${text}`);
    const written = JSON.parse(text) as Lease;
    this.observedRecord = `${written.spec.holderIdentity ?? ''}|${written.spec.renewTime ?? ''}`;
    this.observedAt = Date.now();
    return { held: true };
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

  private async release(signal: AbortSignal): Promise<void> {
    const response = await kubeFetch(this.options.kubeConfig, this.path(), { signal });
    if (response.status !== 200) {
      await response.body?.cancel();
      return;
    }
    const lease = (await response.json()) as Lease;
    if (lease.spec.holderIdentity !== this.options.identity) return;
    // An expired-looking record with no holder lets the next candidate acquire immediately.
    const released = await kubeFetch(this.options.kubeConfig, this.path(), {
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
      signal,
    });
    await released.body?.cancel();
  }
}

function definedTimings(options: Partial<LeaderElectionTimings>): Partial<LeaderElectionTimings> {
  const out: Partial<LeaderElectionTimings> = {};
  if (options.leaseDurationMs !== undefined) out.leaseDurationMs = options.leaseDurationMs;
  if (options.renewDeadlineMs !== undefined) out.renewDeadlineMs = options.renewDeadlineMs;
  if (options.retryPeriodMs !== undefined) out.retryPeriodMs = options.retryPeriodMs;
  return out;
}

/** client-go's rules: a leader gives up before a standby may take over, and renews in between. */
export function checkTimings(t: LeaderElectionTimings): void {
  if (!(t.leaseDurationMs > t.renewDeadlineMs))
    throw new RangeError('the lease duration must be longer than the renew deadline');
  if (!(t.renewDeadlineMs > t.retryPeriodMs))
    throw new RangeError('the renew deadline must be longer than the retry period');
  if (!(t.retryPeriodMs > 0)) throw new RangeError('the retry period must be positive');
}
