// One pass at a time, coalesced: a request while a pass runs asks for exactly one more pass after
// it (however many requests came in). Failures are counted for the caller's backoff; when the
// passes settle, `onSettled` schedules the next one. Used by the admission registration and by
// the self-managed webhook TLS, which both reconcile one object on events and timers.
interface CoalescedRunOptions {
  pass: () => Promise<void>;
  onSuccess?: () => void;
  onError: (error: Error, failures: number) => void;
  onSettled: () => void;
  isStopped: () => boolean;
}

export class CoalescedRun {
  private readonly options: CoalescedRunOptions;
  private running = false;
  private rerun = false;
  private failureCount = 0;

  constructor(options: CoalescedRunOptions) {
    this.options = options;
  }

  /** Consecutive failed passes (0 after a success). */
  get failures(): number {
    return this.failureCount;
  }

  get busy(): boolean {
    return this.running;
  }

  request(): void {
    if (this.options.isStopped()) return;
    if (this.running) {
      this.rerun = true;
      return;
    }
    this.running = true;
    void (async () => {
      do {
        this.rerun = false;
        try {
          await this.options.pass();
          this.failureCount = 0;
          this.options.onSuccess?.();
        } catch (error) {
          this.failureCount += 1;
          this.options.onError(error as Error, this.failureCount);
        }
      } while (this.rerun && !this.options.isStopped());
      this.running = false;
      this.options.onSettled();
    })();
  }
}
