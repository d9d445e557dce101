// GET /v1/tokens/{id}?watch=true: the token's status as server-sent events, so a portal waits for
// "Verified" without polling. The first event is the current status; another follows each change
// the issuer's FlavoredToken watch sees; a comment line every 15 s keeps proxies from cutting an
// idle stream; the stream ends after timeoutSeconds (the client reconnects), when the token is
// deleted (`event: deleted`), or when the issuer shuts down. Works with fetch() streaming as well
// as EventSource (which cannot send a bearer: the self-service page uses fetch). Watches are
// bounded per caller and in all, each one held to at most MAX_WATCH_SECONDS.
import { PassThrough } from 'node:stream';
import { z } from 'zod';
import type { FlavoredToken } from '../../flavor/resources.ts';
import { isNewer } from '../../runtime/listwatch.ts';
import { IssuerError } from '../errors.ts';
import { invalidQuery } from '../request.ts';

export const DEFAULT_WATCH_SECONDS = 300;
export const MAX_WATCH_SECONDS = 600;
const HEARTBEAT_MS = 15_000;

const TokenGetQuerySchema = z.strictObject({
  watch: z.enum(['true', 'false'], { message: 'must be true or false' }).optional(),
  timeoutSeconds: z
    .string()
    .regex(/^[0-9]{1,4}$/, { message: `must be a whole number from 1 to ${MAX_WATCH_SECONDS}` })
    .transform(Number)
    .refine((n) => n >= 1 && n <= MAX_WATCH_SECONDS, { message: `must be from 1 to ${MAX_WATCH_SECONDS}` })
    .optional(),
});
export type TokenGetQuery = z.output<typeof TokenGetQuerySchema>;

export function parseTokenGetQuery(query: unknown): TokenGetQuery {
  const parsed = TokenGetQuerySchema.safeParse(query ?? {});
  if (parsed.success) {
    if (parsed.data.timeoutSeconds !== undefined && parsed.data.watch !== 'true')
      throw new IssuerError('InvalidRequest', 'invalid query: timeoutSeconds applies only with watch=true', [
        { field: 'timeoutSeconds', message: 'applies only with watch=true' },
      ]);
    return parsed.data;
  }
  throw invalidQuery(parsed.error);
}

/** One server-sent event: `event:` and one `data:` line of JSON (JSON has no raw newlines). Pure. */
export function sseEvent(event: string, data: unknown): string {
  return `event: ${event}\ndata: ${JSON.stringify(data)}\n\n`;
}

/** Open watches per caller (by its identity, Caller.owner) and in all; beyond either, 429. */
export class WatchSlots {
  readonly #perCaller: number;
  readonly #max: number;
  readonly #open = new Map<string, number>();
  #total = 0;

  constructor(perCaller: number, max: number) {
    this.#perCaller = perCaller;
    this.#max = max;
  }

  /** A release function, or IssuerError RateLimited. */
  acquire(owner: string): () => void {
    const mine = this.#open.get(owner) ?? 0;
    if (mine >= this.#perCaller || this.#total >= this.#max) {
      throw new IssuerError(
        'RateLimited',
        mine >= this.#perCaller
          ? `too many open watches for this caller (at most ${this.#perCaller}): close one first`
          : 'too many open watches on this issuer: retry later',
        undefined,
        { retryAfterSeconds: 5 },
      );
    }
    this.#open.set(owner, mine + 1);
    this.#total += 1;
    let released = false;
    return () => {
      if (released) return;
      released = true;
      this.#total -= 1;
      const left = (this.#open.get(owner) ?? 1) - 1;
      if (left > 0) this.#open.set(owner, left);
      else this.#open.delete(owner);
    };
  }

  get total(): number {
    return this.#total;
  }
}

interface WatchStreamOptions {
  /** The token as the authorised read found it. */
  token: FlavoredToken;
  /** The cache's newer version, if it has one. */
  cached: FlavoredToken | undefined;
  subscribe: (listener: (token: FlavoredToken | undefined) => void) => () => void;
  view: (token: FlavoredToken) => unknown;
  timeoutMs: number;
  heartbeatMs?: number;
  /** Called once when the stream ends, for any reason. */
  onEnd: () => void;
}

/** The event stream for one watch. End it with `.end()`; it cleans up after itself. */
export function tokenEventStream(options: WatchStreamOptions): PassThrough {
  const stream = new PassThrough();
  let last = '';
  const send = (token: FlavoredToken) => {
    const text = JSON.stringify(options.view(token));
    if (text === last) return;
    last = text;
    stream.write(`event: token\ndata: ${text}\n\n`);
  };
  // Subscribed before the first event, so no change between the read and the subscription is lost.
  const unsubscribe = options.subscribe((token) => {
    if (stream.writableEnded) return;
    if (token === undefined) {
      stream.end(sseEvent('deleted', { id: options.token.metadata.name ?? '' }));
      return;
    }
    send(token);
  });
  const cached = options.cached;
  send(
    cached && isNewer(cached.metadata.resourceVersion, options.token.metadata.resourceVersion)
      ? cached
      : options.token,
  );
  const heartbeat = setInterval(() => stream.write(': keep-alive\n\n'), options.heartbeatMs ?? HEARTBEAT_MS);
  const timeout = setTimeout(() => stream.end(sseEvent('timeout', {})), options.timeoutMs);
  let ended = false;
  const cleanUp = () => {
    if (ended) return;
    ended = true;
    clearInterval(heartbeat);
    clearTimeout(timeout);
    unsubscribe();
    options.onEnd();
  };
  stream.on('finish', cleanUp);
  stream.on('close', cleanUp);
  stream.on('error', cleanUp);
  return stream;
}
