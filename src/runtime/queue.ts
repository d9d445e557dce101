// A work queue in the client-go mould: keys, not events (level-based reconciling); a key is
// never processed by two workers at once; a key added while it is being processed is run again
// afterwards (nothing lost); failures retry with per-key exponential backoff; `addAfter`
// schedules a key for later (expiry, grace periods, a reconciler's own requeue).

export interface QueueOptions {
  name: string;
  concurrency?: number;
  baseDelayMs?: number;
  maxDelayMs?: number;
  /** Called for each key; throwing (or rejecting) means "retry with backoff". */
  reconcile: (key: string) => Promise<void>;
  onError?: (key: string, error: Error, attempt: number) => void;
  onDepthChange?: (depth: number) => void;
  /** Keys being reconciled now: with depth 0 and this 0 the queue is idle. */
  onActiveChange?: (active: number) => void;
  onRetry?: () => void;
}

export class WorkQueue {
  private readonly options: Required<
    Omit<QueueOptions, 'onError' | 'onDepthChange' | 'onActiveChange' | 'onRetry'>
  > &
    Pick<QueueOptions, 'onError' | 'onDepthChange' | 'onActiveChange' | 'onRetry'>;
  /** Keys waiting to run, in insertion order (a Set dedups). */
  private readonly pending = new Set<string>();
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
  }

  get depth(): number {
    return this.pending.size;
  }

  /** Nothing waiting or running. */
  private get idle(): boolean {
    return this.depth === 0 && this.running === 0;
  }

  add(key: string): void {
    if (this.processing.has(key)) {
      this.dirty.add(key);
      return;
    }
    if (!this.pending.has(key)) {
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

  /** Resolves when nothing is pending or running (tests, benchmarks, shutdown). */
  whenIdle(): Promise<void> {
    if (this.idle) return Promise.resolve();
    return new Promise((resolve) => this.idleWaiters.push(resolve));
  }

  private pump(): void {
    while (!this.stopped && this.running < this.options.concurrency) {
      const key = this.pending.values().next().value;
      if (key === undefined) break;
      this.pending.delete(key);
      this.options.onDepthChange?.(this.depth);
      this.processing.add(key);
      this.running += 1;
      this.options.onActiveChange?.(this.running);
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
      this.options.onActiveChange?.(this.running);
      this.addAfter(key, delay);
      if (this.dirty.delete(key)) this.add(key);
      this.pump();
      return;
    }
    this.processing.delete(key);
    this.running -= 1;
    this.options.onActiveChange?.(this.running);
    if (this.dirty.delete(key)) this.add(key);
    this.pump();
  }
}
