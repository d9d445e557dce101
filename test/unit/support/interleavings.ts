// Every interleaving of a few concurrent actors' API calls, run one after another: each actor
// talks to the fake API through a gate, and the scheduler lets one gated call through at a time,
// choosing which by a script. Running every script (a depth-first walk over the choices) covers
// every order in which the actors' calls can reach the API server, the way a model checker does.
// Between gated calls an actor runs until it is blocked again (the fakes answer in microtasks,
// so one macrotask turn settles everyone).

type Settled = { ok: true; value: unknown } | { ok: false; error: unknown };

/** Waits for `actor`'s turn to make `call` (what `gated` proxies call before each gated method). */
export type Turn = (actor: string, call: string) => Promise<void>;

interface Waiting {
  actor: string;
  call: string;
  go: () => void;
}

/** One run under one script. */
class Scheduler {
  readonly #script: readonly number[];
  readonly #waiting: Waiting[] = [];
  /** At each decision, how many actors were waiting to make a call. */
  readonly options: number[] = [];
  /** The calls in the order they were let through, as `actor:call`. */
  readonly trace: string[] = [];

  constructor(script: readonly number[]) {
    this.#script = script;
  }

  /** Resolves when it is `actor`'s turn to make `call`. */
  turn: Turn = (actor, call) => {
    return new Promise((go) => this.#waiting.push({ actor, call, go }));
  };

  async run(actors: Record<string, () => Promise<unknown>>): Promise<Record<string, Settled>> {
    const results: Record<string, Settled> = {};
    const running = Object.entries(actors).map(([name, body]) =>
      body().then(
        (value) => {
          results[name] = { ok: true, value };
        },
        (error: unknown) => {
          results[name] = { ok: false, error };
        },
      ),
    );
    for (;;) {
      await new Promise((resolve) => setImmediate(resolve));
      if (this.#waiting.length === 0) {
        if (Object.keys(results).length === running.length) break;
        throw new Error(`deadlock: ${Object.keys(actors).filter((a) => !(a in results))} never finished`);
      }
      this.#waiting.sort((a, b) => (a.actor < b.actor ? -1 : a.actor > b.actor ? 1 : 0));
      const choice = this.#script[this.options.length] ?? 0;
      this.options.push(this.#waiting.length);
      const [next] = this.#waiting.splice(Math.min(choice, this.#waiting.length - 1), 1);
      if (!next) break;
      this.trace.push(`${next.actor}:${next.call}`);
      next.go();
    }
    await Promise.all(running);
    return results;
  }
}

/** `target` for `actor`: the methods named in `gated` wait for the scheduler's turn first. */
export function gated<T extends object>(
  target: T,
  actor: string,
  turn: Turn,
  gatedCalls: ReadonlySet<string>,
): T {
  return new Proxy(target, {
    get(object, property, receiver) {
      const value = Reflect.get(object, property, receiver);
      if (typeof value !== 'function' || typeof property !== 'string' || !gatedCalls.has(property))
        return typeof value === 'function' ? value.bind(object) : value;
      return async (...args: unknown[]) => {
        await turn(actor, property);
        return value.apply(object, args);
      };
    },
  });
}

export interface Interleaving {
  /** The gated calls in the order they reached the fake API. */
  trace: string[];
  results: Record<string, Settled>;
}

/**
 * Runs `scenario` once per interleaving of its actors' gated calls. `scenario` builds fresh state,
 * its actors (using `turn` through `gated`), and checks the outcome in `check`.
 */
export async function everyInterleaving<S>(scenario: {
  setup: (turn: Turn) => Promise<{ state: S; actors: Record<string, () => Promise<unknown>> }>;
  check: (state: S, run: Interleaving) => void | Promise<void>;
}): Promise<number> {
  let script: number[] = [];
  let runs = 0;
  for (;;) {
    const scheduler = new Scheduler(script);
    const { state, actors } = await scenario.setup(scheduler.turn);
    const results = await scheduler.run(actors);
    runs++;
    await scenario.check(state, { trace: scheduler.trace, results });
    // The next script: the last choice that has an untried option, advanced; those after it reset.
    const made = scheduler.options.map((_, i) => script[i] ?? 0);
    let i = made.length - 1;
    while (i >= 0 && (made[i] ?? 0) + 1 >= (scheduler.options[i] ?? 0)) i--;
    if (i < 0) return runs;
    script = [...made.slice(0, i), (made[i] ?? 0) + 1];
  }
}
