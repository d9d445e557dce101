// A work queue in the client-go mould: keys, not events (level-based reconciling); a key is
// never processed by two workers at once; a key added while it is being processed is run again
// afterwards (nothing lost); failures retry with per-key exponential backoff; `addAfter`
// schedules a key for later (expiry, grace periods); `addLowPriority` schedules bookkeeping that
// waits, coalesced, until no key of normal priority is waiting (or it has waited too long).

export interface QueueOptions {
  name: string;
  concurrency?: number;
  baseDelayMs?: number;
  maxDelayMs?: number;
  /** Called for each key; throwing (or rejecting) means "retry with backoff". */
  reconcile: (key: string) => Promise<void>;
  onError?: (key: string, error: Error, attempt: number) => void;
  onDepthChange?: (depth: number) => void;
  onRetry?: () => void;
  /** A low-priority key runs before normal ones once it has waited this long (no starvation). */
  lowPriorityMaxWaitMs?: number;
}

export class WorkQueue {
  private readonly options: Required<Omit<QueueOptions, 'onError' | 'onDepthChange' | 'onRetry'>> &
    Pick<QueueOptions, 'onError' | 'onDepthChange' | 'onRetry'>;
  /** Keys waiting to run, in insertion order (a Set dedups). */
  private readonly pending = new Set<string>();
  /** Low-priority keys waiting, with when each began to wait (insertion order: oldest first). */
  private readonly lowPending = new Map<string, number>();
  private readonly lowTimers = new Map<string, NodeJS.Timeout>();
  private readonly processing = new Set<string>();
  /** Keys added again while processing: they go back to pending when done. */
  private readonly dirty = new Set<string>();
  private readonly failures = new Map<string, number>();
  private readonly timers = new Map<string, { timer: NodeJS.Timeout; due: number }>();
  private running = 0;
  private stopped = true;
  private idleWaiters: (() => void)[] = [];

  constructor(options: QueueOptions) {
    this.options = {
      concurrency: 4,
      baseDelayMs: 200,
      maxDelayMs: 60_000,
      lowPriorityMaxWaitMs: 10_000,
      ...options,
    };
  }

  start(): void {
    this.stopped = false;
    this.pump();
  }

  stop(): void {
    this.stopped = true;
    for (const { timer } of this.timers.values()) clearTimeout(timer);
    this.timers.clear();
    for (const timer of this.lowTimers.values()) clearTimeout(timer);
    this.lowTimers.clear();
  }

  get depth(): number {
    return this.pending.size + this.lowPending.size;
  }

  /** Nothing waiting, running or scheduled at low priority (bookkeeping still to come). */
  private get idle(): boolean {
    return this.depth === 0 && this.running === 0 && this.lowTimers.size === 0;
  }

  add(key: string): void {
    if (this.processing.has(key)) {
      this.dirty.add(key);
      return;
    }
    if (!this.pending.has(key)) {
      // A normal run covers the low-priority one (reconciles are level-based).
      this.lowPending.delete(key);
      const low = this.lowTimers.get(key);
      if (low) clearTimeout(low);
      this.lowTimers.delete(key);
      this.pending.add(key);
      this.options.onDepthChange?.(this.depth);
    }
    this.pump();
  }

  /** Adds the key after a delay; of several schedules for one key, the earliest wins. */
  addAfter(key: string, delayMs: number): void {
    const existing = this.timers.get(key);
    if (delayMs <= 0) {
      if (existing) clearTimeout(existing.timer);
      this.timers.delete(key);
      this.add(key);
      return;
    }
    const due = Date.now() + delayMs;
    if (existing && existing.due <= due) return;
    if (existing) clearTimeout(existing.timer);
    const timer = setTimeout(() => {
      this.timers.delete(key);
      this.add(key);
    }, delayMs);
    timer.unref();
    this.timers.set(key, { timer, due });
  }

  /**
   * Adds the key after `delayMs` at low priority: it runs only when no normal key waits (or
   * after lowPriorityMaxWaitMs). Several adds of one key before it runs coalesce into one run; a
   * normal add of the key meanwhile runs it at normal priority and the low one is dropped.
   */
  addLowPriority(key: string, delayMs: number): void {
    if (this.lowTimers.has(key) || this.lowPending.has(key) || this.pending.has(key)) return;
    const enqueue = () => {
      this.lowTimers.delete(key);
      if (this.processing.has(key)) this.dirty.add(key);
      else if (!this.pending.has(key) && !this.lowPending.has(key)) {
        this.lowPending.set(key, Date.now());
        this.options.onDepthChange?.(this.depth);
      }
      this.pump(); // also wakes whenIdle() once this timer was the last thing scheduled
    };
    if (delayMs <= 0) {
      enqueue();
      return;
    }
    const timer = setTimeout(enqueue, delayMs);
    timer.unref();
    this.lowTimers.set(key, timer);
  }

  /** Resolves when nothing is pending or running (tests, benchmarks, shutdown). */
  whenIdle(): Promise<void> {
    if (this.idle) return Promise.resolve();
    return new Promise((resolve) => this.idleWaiters.push(resolve));
  }

  /** The next key to run: normal first, unless the oldest low-priority key has waited too long. */
  private next(): string | undefined {
    const [oldLow, since] = this.lowPending.entries().next().value ?? [];
    if (
      oldLow !== undefined &&
      (this.pending.size === 0 || Date.now() - (since ?? 0) >= this.options.lowPriorityMaxWaitMs)
    )
      return oldLow;
    return this.pending.values().next().value;
  }

  private pump(): void {
    while (!this.stopped && this.running < this.options.concurrency) {
      const key = this.next();
      if (key === undefined) break;
      this.pending.delete(key);
      this.lowPending.delete(key);
      this.options.onDepthChange?.(this.depth);
      this.processing.add(key);
      this.running += 1;
      void this.process(key);
    }
    if (this.idle) {
      for (const wake of this.idleWaiters.splice(0)) wake();
    }
  }

  private async process(key: string): Promise<void> {
    try {
      await this.options.reconcile(key);
      this.failures.delete(key);
    } catch (error) {
      const attempt = (this.failures.get(key) ?? 0) + 1;
      this.failures.set(key, attempt);
      this.options.onError?.(key, error as Error, attempt);
      this.options.onRetry?.();
      const delay = Math.min(this.options.maxDelayMs, this.options.baseDelayMs * 2 ** (attempt - 1));
      this.processing.delete(key);
      this.running -= 1;
      this.addAfter(key, delay);
      if (this.dirty.delete(key)) this.add(key);
      this.pump();
      return;
    }
    this.processing.delete(key);
    this.running -= 1;
    if (this.dirty.delete(key)) this.add(key);
    this.pump();
  }
}
