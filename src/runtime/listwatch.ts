// A small list/watch cache of our own (client-node's informer stops on errors, stalls without
// one, and cannot trim objects on receipt). It lists in pages, watches from the list's
// resourceVersion with bookmarks, re-lists on 410 Gone, restarts a watch that goes quiet for
// too long, backs off on errors, and keeps each object only as `transform` returns it.

import { kubeFetch, responseLines } from './fetch.ts';
import type { KubeConfig } from './kubeconfig.ts';
import { parseListPage } from './list-page.ts';

export type WatchEventType = 'ADDED' | 'MODIFIED' | 'DELETED';

interface ObjectWithMeta {
  metadata?: { name?: string; namespace?: string; resourceVersion?: string };
}

export type EventHandler<T> = (type: WatchEventType, object: T, previous: T | undefined) => void;

export type RestartReason = 'relist' | 'watch-ended' | 'error' | 'stalled';
type RestartHandler = (reason: RestartReason, error?: Error) => void;

/** Adds `item` to `list`; returns the function that takes it out again. */
function removableFrom<T>(list: T[], item: T): () => void {
  list.push(item);
  return () => {
    const index = list.indexOf(item);
    if (index >= 0) list.splice(index, 1);
  };
}

export interface ListWatchOptions<T extends ObjectWithMeta> {
  kubeConfig: KubeConfig;
  /** Collection path, e.g. /api/v1/nodes or /apis/nodeflavor.io/v1alpha1/flavoredtokens. */
  path: string;
  labelSelector?: string;
  fieldSelector?: string;
  /** Trims an object on receipt; only its result is kept in the cache. */
  /** Keeps each object as it returns it; undefined: the object is not kept (as if deleted). */
  transform?: (raw: unknown) => T | undefined;
  pageSize?: number;
  /** Restart the watch if nothing (not even a bookmark) arrived for this long. */
  inactivityMs?: number;
  /** The owner's handler; others sharing the cache add theirs with addEventHandler. */
  onEvent?: EventHandler<T>;
  onRestart?: RestartHandler;
}

class GoneError extends Error {}

export class HttpStatusError extends Error {
  readonly status: number;
  constructor(status: number, message: string) {
    super(message);
    this.status = status;
  }
}

/**
 * A transform for caches of small objects: managedFields are often half their size and unused.
 * The metadata is copied without them rather than `delete`d from: a deletion turns the object
 * into a dictionary of its properties, and a cached FlavoredToken then held ~380 bytes more (a
 * fifth of it: bench/cache-cost.ts) than one whose metadata shares its shape with every other.
 */
export function withoutManagedFields<T>(raw: unknown): T {
  const object = raw as { metadata?: { managedFields?: unknown } };
  if (!object.metadata || !('managedFields' in object.metadata)) return raw as T;
  const { managedFields: _dropped, ...metadata } = object.metadata;
  return { ...object, metadata } as T;
}

/**
 * Whether resourceVersion `a` is newer than `b`. They are opaque to clients in general, but every
 * API server backed by etcd hands out etcd revisions (client-go's mutation cache compares them as
 * integers too); anything else is never called newer, so an assumption is simply not made or kept.
 */
export function isNewer(a: string | undefined, b: string | undefined): boolean {
  if (!a || !b || !/^\d+$/.test(a) || !/^\d+$/.test(b)) return false;
  return BigInt(a) > BigInt(b);
}

export function objectKey(object: ObjectWithMeta): string {
  const meta = object.metadata ?? {};
  return meta.namespace ? `${meta.namespace}/${meta.name}` : (meta.name ?? '');
}

export class ListWatch<T extends ObjectWithMeta> {
  private readonly options: ListWatchOptions<T>;
  private readonly cache = new Map<string, T>();
  /** Our own writes' results, served until the watch delivers them (see assume). */
  private readonly assumed = new Map<string, T>();
  private resourceVersion: string | undefined;
  private stopped = false;
  private abort: AbortController | undefined;
  private synced = false;
  private readonly syncWaiters: (() => void)[] = [];
  private failures = 0;
  private readonly handlers: EventHandler<T>[] = [];
  private readonly restartHandlers: RestartHandler[] = [];

  constructor(options: ListWatchOptions<T>) {
    this.options = options;
    if (options.onEvent) this.handlers.push(options.onEvent);
  }

  /**
   * Another reader of the same cache (one watch per resource per process, as client-go's shared
   * informers): its handler first hears every object already cached as ADDED, as client-go's
   * AddEventHandler replays them (a reader that joins after the first list builds the same
   * indexes as one that was there), then every event. Returns the way to stop hearing them.
   */
  addEventHandler(handler: EventHandler<T>): () => void {
    for (const object of this.list()) {
      try {
        handler('ADDED', object, undefined);
      } catch (error) {
        this.restarted('error', error as Error);
      }
    }
    return removableFrom(this.handlers, handler);
  }

  /** Another reader's restart handler (its metrics count this watch's restarts too). */
  addRestartHandler(handler: RestartHandler): () => void {
    return removableFrom(this.restartHandlers, handler);
  }

  private restarted(reason: RestartReason, error?: Error): void {
    this.options.onRestart?.(reason, error);
    for (const handler of this.restartHandlers) handler(reason, error);
  }

  /** Starts listing and watching; resolves once the first full list is in the cache. */
  start(): Promise<void> {
    void this.run();
    return this.waitForSync();
  }

  stop(): void {
    this.stopped = true;
    this.abort?.abort();
    for (const wake of this.syncWaiters.splice(0)) wake();
  }

  get hasSynced(): boolean {
    return this.synced;
  }

  waitForSync(): Promise<void> {
    if (this.synced || this.stopped) return Promise.resolve();
    return new Promise((resolve) => this.syncWaiters.push(resolve));
  }

  get(key: string): T | undefined {
    return this.assumed.get(key) ?? this.cache.get(key);
  }

  list(): T[] {
    if (this.assumed.size === 0) return [...this.cache.values()];
    return [...this.cache].map(([key, object]) => this.assumed.get(key) ?? object);
  }

  /**
   * Serves the object our own write just returned until the watch brings that version (or a
   * newer one), as client-go's MutationCache does: a reconcile that runs in between then starts
   * from what we wrote instead of the version we wrote over, which would only earn a 409.
   * Watch handlers are not called; the watch event of the write still comes and calls them.
   */
  assume(raw: unknown): void {
    const object = this.transform(raw);
    if (object === undefined) return;
    const key = objectKey(object);
    const cached = this.cache.get(key);
    if (!cached || !isNewer(object.metadata?.resourceVersion, cached.metadata?.resourceVersion)) return;
    this.assumed.set(key, object);
  }

  keys(): string[] {
    return [...this.cache.keys()];
  }

  get size(): number {
    return this.cache.size;
  }

  private async run(): Promise<void> {
    while (!this.stopped) {
      try {
        if (this.resourceVersion === undefined) await this.relist();
        await this.watch();
        this.failures = 0;
        if (!this.stopped) this.restarted('watch-ended');
      } catch (error) {
        if (this.stopped) return;
        if (error instanceof GoneError) {
          this.resourceVersion = undefined;
          this.restarted('relist');
          continue;
        }
        const reason: RestartReason = (error as Error).name === 'StalledWatch' ? 'stalled' : 'error';
        this.restarted(reason, error as Error);
        if (reason === 'error') {
          this.failures += 1;
          await this.backoff();
        }
      }
    }
  }

  private async backoff(): Promise<void> {
    const base = Math.min(30_000, 250 * 2 ** Math.min(this.failures, 7));
    const pause = base / 2 + Math.random() * (base / 2);
    await new Promise<void>((resolve) => {
      const timer = setTimeout(resolve, pause);
      timer.unref();
    });
  }

  private transform(raw: unknown): T | undefined {
    return this.options.transform ? this.options.transform(raw) : (raw as T);
  }

  private async relist(): Promise<void> {
    const fresh = new Map<string, T>();
    let continueToken: string | undefined;
    let listVersion = '';
    let restartList = false;
    do {
      this.abort = new AbortController();
      const response = await kubeFetch(this.options.kubeConfig, this.options.path, {
        query: {
          limit: this.options.pageSize ?? 500,
          continue: continueToken,
          labelSelector: this.options.labelSelector,
          fieldSelector: this.options.fieldSelector,
        },
        headers: { Accept: 'application/json' },
        signal: this.abort.signal,
      });
      if (response.status === 410 && continueToken !== undefined) {
        // The continue token expired mid-list: start the list over (a do/while `continue`
        // would test the now-empty token and end the list half-read).
        continueToken = undefined;
        fresh.clear();
        listVersion = '';
        restartList = true;
        continue;
      }
      if (response.status !== 200) {
        throw new HttpStatusError(
          response.status,
          `list ${this.options.path}: HTTP ${response.status}: ${await statusMessage(response)}`,
        );
      }
      // Item by item, each trimmed at once: a whole page's objects would outlive the young
      // generation (list-page.ts).
      const page = parseListPage(await response.text(), (raw) => this.transform(raw));
      for (const object of page.items) if (object !== undefined) fresh.set(objectKey(object), object);
      listVersion = page.metadata?.resourceVersion ?? listVersion;
      continueToken = page.metadata?.continue || undefined;
      restartList = false;
    } while (continueToken || restartList);

    const previous = new Map(this.cache);
    this.cache.clear();
    this.assumed.clear(); // the list is at least as new as anything we wrote before it
    for (const [key, object] of fresh) this.cache.set(key, object);
    this.resourceVersion = listVersion;
    for (const [key, object] of fresh) {
      const old = previous.get(key);
      if (!old) this.emit('ADDED', object, undefined);
      else if (old.metadata?.resourceVersion !== object.metadata?.resourceVersion)
        this.emit('MODIFIED', object, old);
    }
    for (const [key, old] of previous) if (!fresh.has(key)) this.emit('DELETED', old, old);
    if (!this.synced) {
      this.synced = true;
      for (const wake of this.syncWaiters.splice(0)) wake();
    }
  }

  private async watch(): Promise<void> {
    const abort = new AbortController();
    this.abort = abort;
    const inactivityMs = this.options.inactivityMs ?? 120_000;
    let timer: NodeJS.Timeout | undefined;
    const arm = () => {
      if (timer) clearTimeout(timer);
      timer = setTimeout(() => {
        const stalled = new Error(`watch ${this.options.path} was silent for ${inactivityMs / 1000} s`);
        stalled.name = 'StalledWatch';
        abort.abort(stalled);
      }, inactivityMs);
      timer.unref();
    };
    arm();
    try {
      const response = await kubeFetch(this.options.kubeConfig, this.options.path, {
        query: {
          watch: 1,
          resourceVersion: this.resourceVersion,
          allowWatchBookmarks: true,
          // The server ends the watch after this; we resume from the last resourceVersion.
          timeoutSeconds: 300 + Math.floor(Math.random() * 300),
          labelSelector: this.options.labelSelector,
          fieldSelector: this.options.fieldSelector,
        },
        headers: { Accept: 'application/json' },
        signal: abort.signal,
        // No request deadline: a watch is long by design; the inactivity watchdog above bounds it.
        timeoutMs: 0,
      });
      if (response.status === 410) throw new GoneError('resourceVersion too old');
      if (response.status !== 200) {
        throw new HttpStatusError(
          response.status,
          `watch ${this.options.path}: HTTP ${response.status}: ${await statusMessage(response)}`,
        );
      }
      for await (const line of responseLines(response)) {
        arm();
        this.handleLine(line);
      }
    } catch (error) {
      if (abort.signal.aborted && abort.signal.reason instanceof Error) throw abort.signal.reason;
      throw error;
    } finally {
      if (timer) clearTimeout(timer);
    }
  }

  private handleLine(line: string): void {
    let event: {
      type?: string;
      object?: { code?: number; message?: string; metadata?: { resourceVersion?: string } };
    };
    try {
      event = JSON.parse(line);
    } catch {
      // A torn line is an event lost: skipping it would let the next event's resourceVersion
      // carry us past it for good. Restart the watch from the last version we did apply; the
      // server sends it again. The line is not quoted: a watched Secret's data could be in it.
      throw new Error(
        `watch ${this.options.path}: an unparsable line (${line.length} bytes); resuming from the last version applied`,
      );
    }
    const raw = event.object;
    if (!raw) return;
    switch (event.type) {
      case 'BOOKMARK':
        this.resourceVersion = raw.metadata?.resourceVersion ?? this.resourceVersion;
        return;
      case 'ERROR':
        if (raw.code === 410) throw new GoneError(raw.message ?? 'gone');
        throw new Error(`watch ${this.options.path}: ${raw.message ?? 'error event'}`);
      case 'ADDED':
      case 'MODIFIED':
      case 'DELETED': {
        const kept = this.transform(raw);
        const key = kept === undefined ? objectKey(raw as T) : objectKey(kept);
        const previous = this.cache.get(key);
        // An object the transform does not keep is gone from the cache, as if deleted.
        const type = kept === undefined ? 'DELETED' : event.type;
        if (kept === undefined && previous === undefined) {
          this.resourceVersion = raw.metadata?.resourceVersion ?? this.resourceVersion;
          return;
        }
        const object = kept ?? (previous as T);
        if (type === 'DELETED') this.cache.delete(key);
        else this.cache.set(key, object);
        const assumed = this.assumed.get(key);
        if (
          assumed &&
          (type === 'DELETED' ||
            !isNewer(assumed.metadata?.resourceVersion, object.metadata?.resourceVersion))
        )
          this.assumed.delete(key);
        this.resourceVersion = raw.metadata?.resourceVersion ?? this.resourceVersion;
        this.emit(type, object, previous);
        return;
      }
      default:
        return;
    }
  }

  private emit(type: WatchEventType, object: T, previous: T | undefined): void {
    for (const handler of this.handlers) {
      try {
        handler(type, object, previous);
      } catch (error) {
        // Handlers only enqueue keys; a throwing one must not break the watch (or the others).
        this.restarted('error', error as Error);
      }
    }
  }
}

async function statusMessage(response: { text(): Promise<string> }): Promise<string> {
  const text = await response.text().catch(() => '');
  try {
    return (JSON.parse(text) as { message?: string }).message ?? text.slice(0, 200);
  } catch {
    return text.slice(0, 200);
  }
}

/** The names of the caches that have not synced yet (for /readyz and a start-up log). */
export function unsyncedCaches<C extends { [K in keyof C]: { hasSynced: boolean } }>(caches: C): string[] {
  return (Object.keys(caches) as (keyof C & string)[]).filter((name) => !caches[name].hasSynced);
}
