import assert from 'node:assert/strict';
import { afterEach, beforeEach, describe, mock, test } from 'node:test';
import fc from 'fast-check';
import { type QueueOptions, WorkQueue } from '../../src/runtime/queue.ts';

/** Runs every pending microtask and promise continuation (setImmediate is not faked). */
const flush = async (rounds = 3) => {
  for (let i = 0; i < rounds; i++) await new Promise<void>((resolve) => setImmediate(resolve));
};

interface Call {
  key: string;
  resolve: () => void;
  reject: (error: Error) => void;
}

/**
 * A reconcile function the test drives by hand: every call waits until the test completes or
 * fails it. Tracks how many calls per key are in flight, and the most ever seen at once.
 */
function harness(options: Partial<QueueOptions> = {}) {
  const inFlight = new Map<string, number>();
  const calls: Call[] = [];
  const open: Call[] = [];
  const processed: string[] = [];
  const errors: { key: string; attempt: number }[] = [];
  const depths: number[] = [];
  let maxPerKey = 0;
  let running = 0;
  let maxRunning = 0;
  const queue = new WorkQueue({
    name: 'test',
    onError: (key, _error, attempt) => errors.push({ key, attempt }),
    onDepthChange: (depth) => depths.push(depth),
    ...options,
    reconcile: (key) => {
      processed.push(key);
      const now = (inFlight.get(key) ?? 0) + 1;
      inFlight.set(key, now);
      maxPerKey = Math.max(maxPerKey, now);
      running += 1;
      maxRunning = Math.max(maxRunning, running);
      return new Promise<void>((resolve, reject) => {
        const settle = () => {
          inFlight.set(key, (inFlight.get(key) ?? 1) - 1);
          running -= 1;
          open.splice(open.indexOf(call), 1);
        };
        const call: Call = {
          key,
          resolve: () => {
            settle();
            resolve();
          },
          reject: (error) => {
            settle();
            reject(error);
          },
        };
        calls.push(call);
        open.push(call);
      });
    },
  });
  const openCall = (key: string) => {
    const call = open.find((c) => c.key === key);
    assert.ok(call, `no reconcile of ${key} in flight`);
    return call;
  };
  return {
    queue,
    calls,
    processed,
    errors,
    depths,
    open,
    maxPerKey: () => maxPerKey,
    maxRunning: () => maxRunning,
    complete: async (key: string) => {
      openCall(key).resolve();
      await flush();
    },
    fail: async (key: string) => {
      openCall(key).reject(new Error(`boom ${key}`));
      await flush();
    },
    completeAll: async () => {
      while (open.length > 0) {
        for (const call of [...open]) call.resolve();
        await flush();
      }
    },
  };
}

describe('WorkQueue', () => {
  beforeEach(() => mock.timers.enable({ apis: ['setTimeout', 'Date'], now: 0 }));
  afterEach(() => mock.timers.reset());

  test('a key added several times before it runs is processed once', async () => {
    const h = harness();
    h.queue.add('a');
    h.queue.add('a');
    h.queue.add('b');
    h.queue.add('a');
    assert.equal(h.queue.depth, 2);
    h.queue.start();
    await h.completeAll();
    await h.queue.whenIdle();
    assert.deepEqual(h.processed, ['a', 'b']);
    assert.equal(h.queue.depth, 0);
  });

  test('reports the keys being reconciled: with depth 0, idle only when none runs (a failure included)', async () => {
    const active: number[] = [];
    const h = harness({ concurrency: 2, onActiveChange: (n) => active.push(n) });
    h.queue.start();
    h.queue.add('a');
    h.queue.add('b');
    assert.equal(h.queue.depth, 0);
    assert.deepEqual(active, [1, 2], 'both run: the depth says 0, the active count says 2');
    await h.complete('a');
    await h.fail('b');
    assert.deepEqual(active, [1, 2, 1, 0]);
  });

  test('keys run in the order they were first added', async () => {
    const h = harness({ concurrency: 1 });
    for (const k of ['c', 'a', 'b', 'a', 'c']) h.queue.add(k);
    h.queue.start();
    for (const k of ['c', 'a', 'b']) await h.complete(k);
    assert.deepEqual(h.processed, ['c', 'a', 'b']);
  });

  test('a key is never processed twice at once; an add while it runs queues one more run', async () => {
    const h = harness({ concurrency: 4 });
    h.queue.start();
    h.queue.add('a');
    assert.equal(h.processed.length, 1);
    h.queue.add('a');
    h.queue.add('a');
    await flush();
    assert.equal(h.processed.length, 1, 'no second run while the first is in flight');
    assert.equal(h.queue.depth, 0, 'the re-add waits aside, not in pending');
    await h.complete('a');
    assert.deepEqual(h.processed, ['a', 'a'], 'run again after, once');
    await h.complete('a');
    await h.queue.whenIdle();
    assert.deepEqual(h.processed, ['a', 'a']);
    assert.equal(h.maxPerKey(), 1);
  });

  test('a key added while its run fails runs again at once, not only after the backoff', async () => {
    const h = harness({ baseDelayMs: 1000 });
    h.queue.start();
    h.queue.add('a');
    h.queue.add('a');
    await h.fail('a');
    assert.equal(h.processed.length, 2);
    assert.equal(h.maxPerKey(), 1);
  });

  test('failures retry with exponential backoff, capped at maxDelayMs, reset by a success', async () => {
    const h = harness({ baseDelayMs: 100, maxDelayMs: 500 });
    h.queue.start();
    h.queue.add('a');
    const waits: number[] = [];
    for (let attempt = 1; attempt <= 5; attempt++) {
      await h.fail('a');
      const before = h.processed.length;
      let waited = 0;
      while (h.processed.length === before) {
        assert.ok(waited < 10_000, 'no retry came');
        mock.timers.tick(1);
        waited += 1;
        await flush(1);
      }
      waits.push(waited);
    }
    assert.deepEqual(waits, [100, 200, 400, 500, 500]);
    assert.deepEqual(
      h.errors.map((e) => e.attempt),
      [1, 2, 3, 4, 5],
    );
    await h.complete('a');
    // A success forgets the failures: the next failure waits the base delay again.
    h.queue.add('a');
    await h.fail('a');
    mock.timers.tick(99);
    await flush();
    assert.equal(h.processed.length, 7);
    mock.timers.tick(1);
    await flush();
    assert.equal(h.processed.length, 8);
    assert.equal(h.errors.at(-1)?.attempt, 1);
  });

  test('backoff is per key: one failing key does not delay another', async () => {
    const h = harness({ baseDelayMs: 1000, concurrency: 1 });
    h.queue.start();
    h.queue.add('bad');
    h.queue.add('good');
    await h.fail('bad');
    assert.deepEqual(h.processed, ['bad', 'good']);
    await h.complete('good');
    h.queue.add('good');
    assert.deepEqual(h.processed, ['bad', 'good', 'good']);
  });

  test('onError and onRetry are told about each failure', async () => {
    let retries = 0;
    const h = harness({ onRetry: () => retries++ });
    h.queue.start();
    h.queue.add('a');
    await h.fail('a');
    assert.deepEqual(h.errors, [{ key: 'a', attempt: 1 }]);
    assert.equal(retries, 1);
  });

  const addAfterCases: Record<string, { schedules: [number, ...number[]]; runsAt: number; todo?: string }> = {
    'a later schedule does not postpone an earlier one': { schedules: [300, 1000], runsAt: 300 },
    'an earlier schedule replaces a later one': { schedules: [1000, 300], runsAt: 300 },
    'the same delay twice runs once': { schedules: [500, 500], runsAt: 500 },
    'a zero delay adds at once and wins over a later schedule': {
      schedules: [1000, 0],
      runsAt: 0,
    },
    'a negative delay adds at once': { schedules: [-5], runsAt: 0 },
  };
  for (const [name, c] of Object.entries(addAfterCases)) {
    test(`addAfter: ${name}`, { todo: c.todo }, async () => {
      const h = harness();
      h.queue.start();
      for (const delay of c.schedules) h.queue.addAfter('a', delay);
      if (c.runsAt > 0) {
        mock.timers.tick(c.runsAt - 1);
        await flush();
        assert.equal(h.processed.length, 0, 'not before its time');
        mock.timers.tick(1);
      }
      await flush();
      assert.deepEqual(h.processed, ['a'], 'runs at the earliest time');
      await h.complete('a');
      mock.timers.tick(10_000);
      await flush();
      assert.deepEqual(h.processed, ['a'], 'and only once');
    });
  }

  test('addAfter for a key being processed runs it again after the run', async () => {
    const h = harness();
    h.queue.start();
    h.queue.add('a');
    h.queue.addAfter('a', 100);
    mock.timers.tick(100);
    await flush();
    assert.equal(h.processed.length, 1);
    await h.complete('a');
    assert.equal(h.processed.length, 2);
    assert.equal(h.maxPerKey(), 1);
  });

  test('never runs more than `concurrency` reconciles at once, and runs them all', async () => {
    const h = harness({ concurrency: 2 });
    h.queue.start();
    for (const k of ['a', 'b', 'c', 'd', 'e']) h.queue.add(k);
    assert.equal(h.open.length, 2);
    assert.equal(h.queue.depth, 3);
    await h.complete('a');
    assert.equal(h.open.length, 2);
    assert.deepEqual(h.processed, ['a', 'b', 'c']);
    await h.completeAll();
    assert.deepEqual(h.processed, ['a', 'b', 'c', 'd', 'e']);
    assert.equal(h.maxRunning(), 2);
  });

  test('whenIdle resolves at once when empty, and after the last run otherwise', async () => {
    const h = harness();
    await h.queue.whenIdle();
    h.queue.start();
    h.queue.add('a');
    h.queue.add('b');
    let idle = false;
    const waiting = h.queue.whenIdle().then(() => {
      idle = true;
    });
    await h.complete('a');
    assert.equal(idle, false);
    await h.complete('b');
    await waiting;
    assert.equal(idle, true);
  });

  test('onDepthChange follows the pending count', async () => {
    const h = harness({ concurrency: 1 });
    h.queue.add('a');
    h.queue.add('b');
    h.queue.add('a');
    h.queue.start();
    await h.completeAll();
    assert.deepEqual(h.depths, [1, 2, 1, 0]);
  });

  test('stop: nothing further runs, scheduled adds are dropped, in-flight runs finish', async () => {
    const h = harness({ baseDelayMs: 100 });
    h.queue.start();
    h.queue.add('a');
    h.queue.addAfter('later', 50);
    h.queue.stop();
    h.queue.add('b');
    mock.timers.tick(1000);
    await flush();
    await h.fail('a'); // its retry is scheduled after stop ...
    mock.timers.tick(1000);
    await flush();
    assert.deepEqual(h.processed, ['a'], '... and does not run either');
    assert.equal(h.open.length, 0);
  });

  test('start after stop resumes the pending keys', async () => {
    const h = harness();
    h.queue.stop();
    h.queue.add('a');
    await flush();
    assert.deepEqual(h.processed, []);
    h.queue.start();
    assert.deepEqual(h.processed, ['a']);
  });
});

describe('WorkQueue model', () => {
  beforeEach(() => mock.timers.enable({ apis: ['setTimeout', 'Date'], now: 0 }));
  afterEach(() => mock.timers.reset());

  type Op =
    | { op: 'add'; key: string }
    | { op: 'addAfter'; key: string; ms: number }
    | { op: 'complete'; key: string }
    | { op: 'fail'; key: string }
    | { op: 'tick'; ms: number };
  const key = fc.constantFrom('a', 'b', 'c', 'd');
  const opArb: fc.Arbitrary<Op> = fc.oneof(
    fc.record({ op: fc.constant('add' as const), key }),
    fc.record({ op: fc.constant('addAfter' as const), key, ms: fc.integer({ min: 0, max: 300 }) }),
    fc.record({ op: fc.constant('complete' as const), key }),
    fc.record({ op: fc.constant('fail' as const), key }),
    fc.record({ op: fc.constant('tick' as const), ms: fc.integer({ min: 1, max: 200 }) }),
  );

  test('random add/complete/fail: never two runs of a key at once, every add followed by a run', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.array(opArb, { maxLength: 60 }),
        fc.integer({ min: 1, max: 3 }),
        async (ops, conc) => {
          const h = harness({ concurrency: conc, baseDelayMs: 10, maxDelayMs: 80 });
          /** Index (into h.processed) of the first run that started after each key's last add. */
          const lastAdd = new Map<string, number>();
          h.queue.start();
          for (const step of ops) {
            switch (step.op) {
              case 'add':
                lastAdd.set(step.key, h.processed.length);
                h.queue.add(step.key);
                break;
              case 'addAfter':
                // Due later (or earlier, if already scheduled sooner), but always after now; the
                // drain below brings every schedule due.
                lastAdd.set(step.key, h.processed.length);
                h.queue.addAfter(step.key, step.ms);
                break;
              case 'complete':
              case 'fail': {
                const call = h.open.find((c) => c.key === step.key);
                if (!call) break;
                if (step.op === 'complete') call.resolve();
                else call.reject(new Error('boom'));
                break;
              }
              case 'tick':
                mock.timers.tick(step.ms);
                break;
            }
            await flush(1);
            assert.ok(h.maxPerKey() <= 1, 'a key ran twice at once');
            assert.ok(h.open.length <= conc, 'concurrency exceeded');
          }
          // Drain: complete everything, let every timer fire, until nothing is left.
          for (let round = 0; round < 100 && (h.open.length > 0 || h.queue.depth > 0 || round < 2); round++) {
            await h.completeAll();
            mock.timers.tick(1000);
            await flush();
          }
          await h.queue.whenIdle();
          assert.equal(h.open.length, 0);
          assert.ok(h.maxPerKey() <= 1);
          for (const [k, index] of lastAdd) {
            assert.ok(h.processed.slice(index).includes(k), `${k} not processed after its last add`);
          }
          h.queue.stop();
        },
      ),
      { numRuns: 300, seed: 4242 },
    );
  });
});
