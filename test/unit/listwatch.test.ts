// ListWatch against a tiny fake API endpoint on 127.0.0.1 (node:http): it serves list pages with
// limit/continue and a streaming watch the test writes events into. Real HTTP, real client-node
// KubeConfig, real undici: only the API server is small.
import assert from 'node:assert/strict';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, beforeEach, describe, test } from 'node:test';
import { KubeConfig } from '@kubernetes/client-node';
import {
  HttpStatusError,
  isNewer,
  ListWatch,
  type ListWatchOptions,
  objectKey,
  type RestartReason,
  type WatchEventType,
} from '../../src/runtime/listwatch.ts';

const PATH = '/apis/example.com/v1/things';
/** Long enough that no watch in these tests stalls unless the test wants it to. */
const QUIET_MS = 5_000;
/** Every wait in this file ends by this deadline: a hang fails the test instead of the suite. */
const DEADLINE_MS = 3_000;

interface Thing {
  apiVersion?: string;
  kind?: string;
  metadata: { name: string; namespace?: string; resourceVersion: string; uid?: string };
  spec?: Record<string, unknown>;
}

interface SeenRequest {
  kind: 'list' | 'watch';
  query: URLSearchParams;
}

/** Resolves when `check()` holds, re-checked whenever `poke()` is called. */
class Conditions {
  private waiters: { check: () => boolean; resolve: () => void }[] = [];
  poke(): void {
    for (const w of [...this.waiters]) {
      if (w.check()) {
        this.waiters.splice(this.waiters.indexOf(w), 1);
        w.resolve();
      }
    }
  }
  until(check: () => boolean, what: string): Promise<void> {
    if (check()) return Promise.resolve();
    return new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => {
        this.waiters.splice(this.waiters.indexOf(waiter), 1);
        reject(new Error(`timed out waiting for ${what}`));
      }, DEADLINE_MS);
      const waiter = {
        check,
        resolve: () => {
          clearTimeout(timer);
          resolve();
        },
      };
      this.waiters.push(waiter);
    });
  }
}

class FakeApi {
  readonly server: Server;
  readonly objects = new Map<string, Thing>();
  readonly requests: SeenRequest[] = [];
  readonly openWatches: ServerResponse[] = [];
  readonly closedWatches: number[] = [];
  readonly changed = new Conditions();
  private rv = 100;
  /** Return true to take over the response (status codes, silence). */
  onList?: (query: URLSearchParams, res: ServerResponse, nth: number) => boolean;
  onWatch?: (query: URLSearchParams, res: ServerResponse, nth: number) => boolean;

  constructor() {
    this.server = createServer((req, res) => this.handle(req, res));
  }

  async listen(): Promise<number> {
    await new Promise<void>((resolve) => this.server.listen(0, '127.0.0.1', resolve));
    return (this.server.address() as AddressInfo).port;
  }

  async close(): Promise<void> {
    for (const res of this.openWatches) res.destroy();
    this.server.closeAllConnections();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  get resourceVersion(): string {
    return String(this.rv);
  }

  /** Creates or changes an object in the store (no event is sent: use `send`). */
  put(name: string, spec: Record<string, unknown> = {}): Thing {
    this.rv += 1;
    const thing: Thing = {
      apiVersion: 'example.com/v1',
      kind: 'Thing',
      metadata: { name, resourceVersion: String(this.rv), uid: `uid-${name}` },
      spec,
    };
    this.objects.set(name, thing);
    return thing;
  }

  remove(name: string): Thing {
    const thing = this.objects.get(name);
    assert.ok(thing);
    this.objects.delete(name);
    this.rv += 1;
    return { ...thing, metadata: { ...thing.metadata, resourceVersion: String(this.rv) } };
  }

  count(kind: SeenRequest['kind']): number {
    return this.requests.filter((r) => r.kind === kind).length;
  }

  queries(kind: SeenRequest['kind']): URLSearchParams[] {
    return this.requests.filter((r) => r.kind === kind).map((r) => r.query);
  }

  /** Waits for the n-th (1-based) request of a kind. */
  async request(kind: SeenRequest['kind'], n: number): Promise<URLSearchParams> {
    await this.changed.until(() => this.count(kind) >= n, `${kind} request #${n}`);
    return this.queries(kind)[n - 1] as URLSearchParams;
  }

  /** Waits for an open watch stream, then writes one event line into it. */
  async send(type: string, object: unknown): Promise<void> {
    await this.changed.until(() => this.openWatches.length > 0, 'an open watch');
    const res = this.openWatches.at(-1) as ServerResponse;
    res.write(`${JSON.stringify({ type, object })}\n`);
  }

  async sendRaw(text: string): Promise<void> {
    await this.changed.until(() => this.openWatches.length > 0, 'an open watch');
    (this.openWatches.at(-1) as ServerResponse).write(text);
  }

  /** Ends the open watch stream cleanly, as the API server does at timeoutSeconds. */
  async endWatch(): Promise<void> {
    await this.changed.until(() => this.openWatches.length > 0, 'an open watch');
    (this.openWatches.at(-1) as ServerResponse).end();
  }

  private handle(req: IncomingMessage, res: ServerResponse): void {
    const url = new URL(req.url ?? '/', 'http://127.0.0.1');
    if (url.pathname !== PATH) {
      res.writeHead(404).end();
      return;
    }
    const query = url.searchParams;
    const kind = query.get('watch') ? 'watch' : 'list';
    this.requests.push({ kind, query });
    const nth = this.count(kind);
    this.changed.poke();
    if (kind === 'list') {
      if (this.onList?.(query, res, nth)) return;
      this.list(query, res);
      return;
    }
    if (this.onWatch?.(query, res, nth)) return;
    res.writeHead(200, { 'Content-Type': 'application/json', 'Transfer-Encoding': 'chunked' });
    res.flushHeaders();
    this.openWatches.push(res);
    res.on('close', () => {
      this.openWatches.splice(this.openWatches.indexOf(res), 1);
      this.closedWatches.push(nth);
      this.changed.poke();
    });
    this.changed.poke();
  }

  private list(query: URLSearchParams, res: ServerResponse): void {
    const all = [...this.objects.values()].sort((a, b) => a.metadata.name.localeCompare(b.metadata.name));
    const limit = Number(query.get('limit') ?? all.length) || all.length;
    const start = Number(query.get('continue') ?? 0);
    const items = all.slice(start, start + limit);
    const next = start + limit < all.length ? String(start + limit) : undefined;
    res.writeHead(200, { 'Content-Type': 'application/json' });
    res.end(
      JSON.stringify({
        apiVersion: 'example.com/v1',
        kind: 'ThingList',
        metadata: { resourceVersion: this.resourceVersion, ...(next ? { continue: next } : {}) },
        items,
      }),
    );
  }
}

function status(res: ServerResponse, code: number, message: string): true {
  res.writeHead(code, { 'Content-Type': 'application/json' });
  res.end(JSON.stringify({ kind: 'Status', apiVersion: 'v1', status: 'Failure', message, code }));
  return true;
}

interface Seen {
  type: WatchEventType;
  name: string;
  rv: string;
  previousRv: string | undefined;
}

describe('ListWatch', () => {
  let api: FakeApi;
  let kubeConfig: KubeConfig;
  let watchers: ListWatch<Thing>[];
  let events: Seen[];
  let restarts: { reason: RestartReason; error?: Error }[];

  beforeEach(async () => {
    api = new FakeApi();
    const port = await api.listen();
    kubeConfig = new KubeConfig();
    kubeConfig.loadFromOptions({
      clusters: [{ name: 'c', server: `http://127.0.0.1:${port}`, skipTLSVerify: true }],
      users: [{ name: 'u' }],
      contexts: [{ name: 'c', cluster: 'c', user: 'u' }],
      currentContext: 'c',
    });
    watchers = [];
    events = [];
    restarts = [];
  });

  afterEach(async () => {
    for (const w of watchers) w.stop();
    await api.close();
  });

  function listWatch(options: Partial<ListWatchOptions<Thing>> = {}): ListWatch<Thing> {
    const lw = new ListWatch<Thing>({
      kubeConfig,
      path: PATH,
      inactivityMs: QUIET_MS,
      onEvent: (type, object, previous) => {
        events.push({
          type,
          name: object.metadata.name,
          rv: object.metadata.resourceVersion,
          previousRv: previous?.metadata.resourceVersion,
        });
        api.changed.poke();
      },
      onRestart: (reason, error) => {
        restarts.push({ reason, ...(error ? { error } : {}) });
        api.changed.poke();
      },
      ...options,
    });
    watchers.push(lw);
    return lw;
  }

  const untilEvents = (n: number) => api.changed.until(() => events.length >= n, `${n} events`);
  const untilRestart = (reason: RestartReason) =>
    api.changed.until(() => restarts.some((r) => r.reason === reason), `a '${reason}' restart`);
  const cached = (lw: ListWatch<Thing>) =>
    Object.fromEntries(lw.list().map((t) => [t.metadata.name, t.metadata.resourceVersion]));

  test('lists in pages (limit/continue), fills the cache, and start() resolves after the last page', async () => {
    for (const name of ['a', 'b', 'c', 'd', 'e']) api.put(name);
    const lw = listWatch({ pageSize: 2, labelSelector: 'team=x', fieldSelector: 'metadata.name!=z' });
    assert.equal(lw.hasSynced, false);
    await lw.start();
    assert.equal(lw.hasSynced, true);
    assert.equal(lw.size, 5, 'the whole list is cached when start() resolves');
    assert.deepEqual(lw.keys().sort(), ['a', 'b', 'c', 'd', 'e']);
    const lists = api.queries('list');
    assert.deepEqual(
      lists.map((q) => [q.get('limit'), q.get('continue')]),
      [
        ['2', null],
        ['2', '2'],
        ['2', '4'],
      ],
    );
    for (const q of lists) {
      assert.equal(q.get('labelSelector'), 'team=x');
      assert.equal(q.get('fieldSelector'), 'metadata.name!=z');
    }
    assert.deepEqual(
      events.map((e) => [e.type, e.name, e.previousRv]),
      ['a', 'b', 'c', 'd', 'e'].map((n) => ['ADDED', n, undefined]),
    );
    const watch = await api.request('watch', 1);
    assert.equal(watch.get('resourceVersion'), api.resourceVersion, 'watches from the list version');
    assert.equal(watch.get('allowWatchBookmarks'), 'true');
    assert.equal(watch.get('labelSelector'), 'team=x');
    assert.equal(watch.get('fieldSelector'), 'metadata.name!=z');
  });

  test('ADDED, MODIFIED and DELETED events update the cache and carry the previous object', async () => {
    const a = api.put('a');
    const b = api.put('b');
    const lw = listWatch();
    await lw.start();
    events.length = 0;
    const c = api.put('c');
    await api.send('ADDED', c);
    const a2 = api.put('a', { changed: true });
    await api.send('MODIFIED', a2);
    await api.send('DELETED', api.remove('b'));
    await untilEvents(3);
    assert.deepEqual(events, [
      { type: 'ADDED', name: 'c', rv: c.metadata.resourceVersion, previousRv: undefined },
      {
        type: 'MODIFIED',
        name: 'a',
        rv: a2.metadata.resourceVersion,
        previousRv: a.metadata.resourceVersion,
      },
      {
        type: 'DELETED',
        name: 'b',
        rv: String(Number(a2.metadata.resourceVersion) + 1),
        previousRv: b.metadata.resourceVersion,
      },
    ]);
    assert.deepEqual(cached(lw), { a: a2.metadata.resourceVersion, c: c.metadata.resourceVersion });
    assert.deepEqual(lw.get('a')?.spec, { changed: true });
    assert.equal(lw.get('b'), undefined);
  });

  test('assume() serves our own write until the watch brings that version, never an older one', async () => {
    api.put('a');
    const lw = listWatch();
    await lw.start();
    events.length = 0;
    const older = api.put('a', { by: 'someone else' }); // written before ours, not yet delivered
    const ours = api.put('a', { by: 'us' });
    lw.assume(ours);
    assert.deepEqual(lw.get('a')?.spec, { by: 'us' }, 'our write is served at once');
    assert.deepEqual(
      lw.list().map((t) => t.spec),
      [{ by: 'us' }],
    );
    assert.equal(events.length, 0, 'assume calls no handler: the watch event will');
    await api.send('MODIFIED', older);
    await untilEvents(1);
    assert.deepEqual(lw.get('a')?.spec, { by: 'us' }, 'an older event does not hide our newer write');
    await api.send('MODIFIED', ours);
    await untilEvents(2);
    const newer = api.put('a', { by: 'a later writer' });
    await api.send('MODIFIED', newer);
    await untilEvents(3);
    assert.deepEqual(lw.get('a')?.spec, { by: 'a later writer' }, 'once caught up, the watch rules again');
  });

  test('assume() ignores a version that is not newer than the cache, and a deletion ends it', async () => {
    const a = api.put('a', { v: 1 });
    api.put('b');
    const lw = listWatch();
    await lw.start();
    events.length = 0;
    lw.assume({ ...a, spec: { v: 'stale' } });
    assert.deepEqual(lw.get('a')?.spec, { v: 1 }, 'same resourceVersion as the cache: not assumed');
    lw.assume({ ...a, metadata: { ...a.metadata, resourceVersion: 'opaque' }, spec: { v: 'opaque' } });
    assert.deepEqual(lw.get('a')?.spec, { v: 1 }, 'a resourceVersion that is not a revision is never newer');
    const b2 = api.put('b', { v: 2 });
    lw.assume(b2);
    await api.send('DELETED', api.remove('b'));
    await untilEvents(1);
    assert.equal(lw.get('b'), undefined, 'deleted: the assumed write is gone with it');
  });

  test('isNewer compares etcd revisions as integers, beyond 2^53, and nothing else', () => {
    assert.equal(isNewer('10', '9'), true);
    assert.equal(isNewer('9', '10'), false);
    assert.equal(isNewer('9007199254740993', '9007199254740992'), true);
    assert.equal(isNewer('5', '5'), false);
    assert.equal(isNewer('abc', '1'), false);
    assert.equal(isNewer(undefined, '1'), false);
  });

  test('a torn or non-JSON line restarts the watch from the last version applied, so no event is lost', async () => {
    const a = api.put('a');
    const lw = listWatch();
    await lw.start();
    await api.sendRaw('{"type":"ADDED","object":{"metadata":{"name":"secret-data\n');
    const next = await api.request('watch', 2);
    assert.equal(next.get('resourceVersion'), a.metadata.resourceVersion, 'resumes where it was');
    assert.equal(api.count('list'), 1, 'no re-list');
    assert.deepEqual(
      restarts.map((r) => r.reason),
      ['error'],
    );
    assert.doesNotMatch(String(restarts[0]?.error?.message), /secret-data/, 'the line is not quoted');
    // The resumed watch delivers what the torn line carried.
    await api.send('ADDED', api.put('b'));
    await untilEvents(2);
    assert.deepEqual(lw.keys().sort(), ['a', 'b']);
  });

  test('a handler added after the first list hears the cached objects as ADDED first, then events', async () => {
    api.put('a');
    api.put('b');
    const lw = listWatch();
    await lw.start();
    const heard: string[] = [];
    lw.addEventHandler((type, object, previous) => {
      heard.push(`${type} ${object.metadata.name}${previous ? ' (had a previous)' : ''}`);
      api.changed.poke();
    });
    assert.deepEqual(heard.sort(), ['ADDED a', 'ADDED b'], 'replayed at once, as client-go does');
    await api.send('ADDED', api.put('c'));
    await api.changed.until(() => heard.length >= 3, 'the watch event');
    assert.equal(heard[2], 'ADDED c');
  });

  test("another reader's restart handler hears each restart with the owner's, until removed", async () => {
    api.put('a');
    const lw = listWatch();
    const heard: RestartReason[] = [];
    const remove = lw.addRestartHandler((reason) => heard.push(reason));
    await lw.start();
    await api.sendRaw('not json\n');
    await api.request('watch', 2);
    remove();
    await api.sendRaw('not json either\n');
    await api.request('watch', 3);
    assert.deepEqual(
      restarts.map((r) => r.reason),
      ['error', 'error'],
    );
    assert.deepEqual(heard, ['error'], 'nothing after it was removed');
  });

  test('a BOOKMARK advances the resourceVersion the next watch starts from', async () => {
    api.put('a');
    const lw = listWatch();
    await lw.start();
    await api.send('BOOKMARK', {
      kind: 'Thing',
      apiVersion: 'example.com/v1',
      metadata: { resourceVersion: '500' },
    });
    await api.endWatch();
    const next = await api.request('watch', 2);
    assert.equal(next.get('resourceVersion'), '500');
    assert.equal(api.count('list'), 1, 'no re-list');
    assert.deepEqual(
      events.map((e) => e.type),
      ['ADDED'],
      'a bookmark is no event',
    );
    assert.deepEqual(lw.keys(), ['a']);
  });

  test('a watch the server ends is resumed from the last resourceVersion seen (watch-ended)', async () => {
    api.put('a');
    const lw = listWatch();
    await lw.start();
    const a2 = api.put('a', { v: 2 });
    await api.send('MODIFIED', a2);
    await untilEvents(2);
    await api.endWatch();
    const next = await api.request('watch', 2);
    assert.equal(next.get('resourceVersion'), a2.metadata.resourceVersion);
    assert.deepEqual(
      restarts.map((r) => r.reason),
      ['watch-ended'],
    );
    assert.equal(api.count('list'), 1);
    // The resumed watch delivers as before.
    await api.send('ADDED', api.put('b'));
    await untilEvents(3);
    assert.deepEqual(lw.keys().sort(), ['a', 'b']);
  });

  test('an ERROR 410 event re-lists; objects deleted while disconnected become DELETED events', async () => {
    const a = api.put('a');
    const b = api.put('b');
    api.put('keep');
    const lw = listWatch();
    await lw.start();
    events.length = 0;
    // While the watch is "behind": b goes, a changes, c comes; no events are sent for them.
    api.remove('b');
    const a2 = api.put('a', { v: 2 });
    const c = api.put('c');
    await api.send('ERROR', {
      kind: 'Status',
      apiVersion: 'v1',
      status: 'Failure',
      code: 410,
      reason: 'Expired',
    });
    await api.request('list', 2);
    await untilEvents(3);
    assert.ok(restarts.some((r) => r.reason === 'relist'));
    const byName = Object.fromEntries(events.map((e) => [e.name, e]));
    assert.deepEqual(byName['a'], {
      type: 'MODIFIED',
      name: 'a',
      rv: a2.metadata.resourceVersion,
      previousRv: a.metadata.resourceVersion,
    });
    assert.deepEqual(byName['c'], {
      type: 'ADDED',
      name: 'c',
      rv: c.metadata.resourceVersion,
      previousRv: undefined,
    });
    assert.deepEqual(byName['b'], {
      type: 'DELETED',
      name: 'b',
      rv: b.metadata.resourceVersion,
      previousRv: b.metadata.resourceVersion,
    });
    assert.equal(events.length, 3, 'an unchanged object gives no event');
    assert.deepEqual(lw.keys().sort(), ['a', 'c', 'keep']);
    const watch = await api.request('watch', 2);
    assert.equal(watch.get('resourceVersion'), api.resourceVersion, 'watches from the new list');
  });

  test('HTTP 410 on the watch request re-lists too', async () => {
    api.put('a');
    api.onWatch = (_q, res, nth) => nth === 1 && status(res, 410, 'too old resource version');
    const lw = listWatch();
    await lw.start();
    await api.request('list', 2);
    await untilRestart('relist');
    const watch = await api.request('watch', 2);
    assert.equal(watch.get('resourceVersion'), api.resourceVersion);
    assert.deepEqual(lw.keys(), ['a']);
  });

  test('a watch silent for longer than inactivityMs is restarted (stalled), from the same resourceVersion', async () => {
    api.put('a');
    const lw = listWatch({ inactivityMs: 300 });
    const started = Date.now();
    await lw.start();
    const next = await api.request('watch', 2);
    const elapsed = Date.now() - started;
    assert.ok(elapsed >= 290, `restarted after ${elapsed} ms, before inactivityMs`);
    const stalled = restarts.find((r) => r.reason === 'stalled');
    assert.ok(stalled, JSON.stringify(restarts));
    assert.match(stalled.error?.message ?? '', /silent/);
    assert.equal(next.get('resourceVersion'), api.queries('watch')[0]?.get('resourceVersion'));
    assert.equal(api.count('list'), 1, 'a stall is no reason to re-list');
    await api.changed.until(() => api.closedWatches.includes(1), 'the stalled watch to be closed');
  });

  test('transform is applied on list and watch, and only its result is cached', async () => {
    api.put('a', { keep: 1, drop: 'x'.repeat(1000) });
    const transform = (raw: unknown): Thing => {
      const t = raw as Thing;
      return {
        metadata: { name: t.metadata.name, resourceVersion: t.metadata.resourceVersion },
        spec: { keep: t.spec?.['keep'] },
      };
    };
    const seen: Thing[] = [];
    const lw = listWatch({
      transform,
      onEvent: (_type, object) => {
        seen.push(object);
        api.changed.poke();
      },
    });
    await lw.start();
    const b = api.put('b', { keep: 2, drop: 'y' });
    await api.send('ADDED', b);
    await api.changed.until(() => seen.length >= 2, 'two events');
    assert.deepEqual(lw.get('a'), { metadata: { name: 'a', resourceVersion: '101' }, spec: { keep: 1 } });
    assert.deepEqual(lw.get('b'), {
      metadata: { name: 'b', resourceVersion: b.metadata.resourceVersion },
      spec: { keep: 2 },
    });
    assert.deepEqual(seen, [lw.get('a'), lw.get('b')], 'handlers get the transformed object');
    assert.equal(seen[1], lw.get('b'), 'the very object cached');
  });

  test('a throwing onEvent handler does not stop the watch', async () => {
    const names: string[] = [];
    const lw = listWatch({
      onEvent: (_type, object) => {
        names.push(object.metadata.name);
        api.changed.poke();
        if (object.metadata.name === 'bad') throw new Error('handler broke');
      },
    });
    await lw.start();
    await api.send('ADDED', api.put('bad'));
    await api.send('ADDED', api.put('good'));
    await api.changed.until(() => names.length >= 2, 'both events');
    assert.deepEqual(names, ['bad', 'good']);
    assert.deepEqual(lw.keys().sort(), ['bad', 'good']);
    assert.deepEqual(
      restarts.map((r) => [r.reason, r.error?.message]),
      [['error', 'handler broke']],
    );
    assert.equal(api.count('watch'), 1, 'the same watch goes on');
    assert.equal(api.openWatches.length, 1);
  });

  test('handlers added by other readers hear every event after the owner, on one watch, until removed', async () => {
    api.put('a');
    const lw = listWatch();
    const heard: string[] = [];
    const remove = lw.addEventHandler((type, object) => {
      heard.push(`${type} ${object.metadata.name}`);
      api.changed.poke();
      if (object.metadata.name === 'bad') throw new Error('second handler broke');
    });
    const alsoHeard: string[] = [];
    lw.addEventHandler((type, object) => alsoHeard.push(`${type} ${object.metadata.name}`));
    await lw.start();
    await api.send('ADDED', api.put('bad'));
    await api.changed.until(() => heard.length >= 2, 'the added handler to hear the watch event');
    remove();
    await api.send('ADDED', api.put('c'));
    await untilEvents(3);
    assert.deepEqual(heard, ['ADDED a', 'ADDED bad'], 'nothing after it was removed');
    assert.deepEqual(
      alsoHeard,
      ['ADDED a', 'ADDED bad', 'ADDED c'],
      'a throwing handler does not starve the next',
    );
    assert.deepEqual(
      events.map((e) => e.name),
      ['a', 'bad', 'c'],
    );
    assert.equal(api.count('list'), 1, 'one list for every reader');
    assert.equal(api.count('watch'), 1, 'one watch for every reader');
  });

  test('a failing list is retried (error, with backoff) and start() resolves once it succeeds', async () => {
    api.put('a');
    api.onList = (_q, res, nth) => nth === 1 && status(res, 500, 'etcd is sad');
    const lw = listWatch();
    await lw.start();
    assert.equal(api.count('list'), 2);
    const error = restarts.find((r) => r.reason === 'error')?.error;
    assert.ok(error instanceof HttpStatusError);
    assert.equal(error.status, 500);
    assert.match(error.message, /HTTP 500: etcd is sad/);
    assert.deepEqual(lw.keys(), ['a']);
  });

  test('a continue token that expires mid-list (410) restarts the list from the beginning', {}, async () => {
    for (const name of ['a', 'b', 'c', 'd', 'e']) api.put(name);
    api.onList = (q, res) =>
      q.get('continue') === '2' && api.count('list') === 2 && status(res, 410, 'continue expired');
    const lw = listWatch({ pageSize: 2 });
    await lw.start();
    assert.deepEqual(lw.keys().sort(), ['a', 'b', 'c', 'd', 'e'], 'the cache holds the whole list');
    assert.deepEqual(
      api.queries('list').map((q) => q.get('continue')),
      [null, '2', null, '2', '4'],
    );
  });

  test('stop() closes the watch and nothing further is requested', async () => {
    api.put('a');
    const lw = listWatch({ inactivityMs: 150 });
    await lw.start();
    await api.request('watch', 1);
    lw.stop();
    await api.changed.until(() => api.closedWatches.includes(1), 'the watch to be closed');
    const before = api.requests.length;
    // Long enough for a stall restart (150 ms) or an error backoff to have shown up, had stop() failed.
    await new Promise((resolve) => setTimeout(resolve, 400));
    assert.equal(api.requests.length, before, 'a request after stop()');
    assert.equal(api.openWatches.length, 0);
    assert.ok(!restarts.some((r) => r.reason === 'stalled'));
    // The cache stays readable.
    assert.deepEqual(lw.keys(), ['a']);
  });

  test('stop() before the first list completes releases start()', async () => {
    api.onList = () => true; // never answers
    const lw = listWatch();
    const started = lw.start();
    await api.request('list', 1);
    lw.stop();
    await started;
    assert.equal(lw.hasSynced, false);
  });
});

describe('objectKey', () => {
  const cases: Record<string, { object: Parameters<typeof objectKey>[0]; key: string }> = {
    'cluster-scoped: the name': { object: { metadata: { name: 'n1' } }, key: 'n1' },
    'namespaced: namespace/name': {
      object: { metadata: { name: 's', namespace: 'kube-system' } },
      key: 'kube-system/s',
    },
    'no metadata: empty': { object: {}, key: '' },
  };
  for (const [name, c] of Object.entries(cases)) {
    test(name, () => {
      assert.equal(objectKey(c.object), c.key);
    });
  }
});
