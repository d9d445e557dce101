// JSON bodies parsed one per event-loop turn. JSON.parse of a review of a few MiB holds the loop
// for tens of milliseconds; many of them finishing at once (a flood from the pod network) would
// otherwise be parsed back to back in one turn, and the process's Lease renewal (its timer, its
// request, its answer) would wait behind all of them. Here a renewal waits behind one at most.

export class ParseQueue {
  private readonly waiting: {
    text: string;
    resolve: (value: unknown) => void;
    reject: (e: Error) => void;
  }[] = [];
  private scheduled = false;

  /** Resolves with the parsed value, or rejects with the SyntaxError, in a later turn. */
  parse(text: string): Promise<unknown> {
    return new Promise((resolve, reject) => {
      this.waiting.push({ text, resolve, reject });
      this.schedule();
    });
  }

  get pending(): number {
    return this.waiting.length;
  }

  private schedule(): void {
    if (this.scheduled || this.waiting.length === 0) return;
    this.scheduled = true;
    // setImmediate, not a microtask: timers and I/O callbacks run before the next parse.
    setImmediate(() => {
      this.scheduled = false;
      const job = this.waiting.shift();
      if (job) {
        try {
          job.resolve(JSON.parse(job.text));
        } catch (error) {
          job.reject(error as Error);
        }
      }
      this.schedule();
    });
  }
}
