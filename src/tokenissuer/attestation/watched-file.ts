// A configuration file read once and re-read when it changes, never synchronously on a request's
// path: the first use reads it (and fails with the reason if it cannot), later uses answer what
// was read and, at most once per `recheckMs`, look in the background whether the file changed
// (its inode, size or modification time: a mounted ConfigMap is updated by swapping a symlink, so
// it is looked up by path each time). A changed file that cannot be read or parsed keeps the last
// good value and is reported; the next look tries again.
import { readFile, stat } from 'node:fs/promises';

export const FILE_RECHECK_MS = 10_000;

interface WatchedFileOptions {
  recheckMs?: number;
  now?: () => number;
  /** A reload that failed (the last good value stays in use). */
  onError?: (path: string, error: Error) => void;
}

export class WatchedFile<T> {
  readonly path: string;
  readonly #parse: (bytes: Buffer) => T | Promise<T>;
  readonly #recheckMs: number;
  readonly #now: () => number;
  readonly #onError: ((path: string, error: Error) => void) | undefined;
  #loaded: { value: T; stamp: string } | undefined;
  #first: Promise<T> | undefined;
  #checkedAt = Number.NEGATIVE_INFINITY;
  #checking: Promise<void> | undefined;

  constructor(path: string, parse: (bytes: Buffer) => T | Promise<T>, options: WatchedFileOptions = {}) {
    this.path = path;
    this.#parse = parse;
    this.#recheckMs = options.recheckMs ?? FILE_RECHECK_MS;
    this.#now = options.now ?? Date.now;
    this.#onError = options.onError;
  }

  /** The file's value; throws only while it has never been read successfully. */
  async current(): Promise<T> {
    if (!this.#loaded) {
      // Concurrent first uses share one read; a failed one is tried again by the next use.
      this.#first ??= this.#load().finally(() => {
        this.#first = undefined;
      });
      return this.#first;
    }
    if (this.#now() - this.#checkedAt >= this.#recheckMs && !this.#checking)
      this.#checking = this.#recheck().finally(() => {
        this.#checking = undefined;
      });
    return this.#loaded.value;
  }

  /** Waits for a background look that is under way (tests). */
  async settled(): Promise<void> {
    await this.#checking;
  }

  async #load(): Promise<T> {
    this.#checkedAt = this.#now();
    const stamp = await stampOf(this.path);
    const value = await this.#parse(await readFile(this.path));
    this.#loaded = { value, stamp };
    return value;
  }

  async #recheck(): Promise<void> {
    this.#checkedAt = this.#now();
    try {
      if ((await stampOf(this.path)) === this.#loaded?.stamp) return;
      await this.#load();
    } catch (error) {
      this.#onError?.(this.path, error as Error);
    }
  }
}

async function stampOf(path: string): Promise<string> {
  const info = await stat(path, { bigint: true });
  return `${info.ino}:${info.size}:${info.mtimeNs}`;
}
