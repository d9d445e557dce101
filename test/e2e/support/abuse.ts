// Abusive and well-behaved clients of the token issuer, for the abuse tests and the abuse bench.
// On loopback every client would share 127.0.0.1; each picks its own source address from
// 127.0.0.0/8 (all of it is loopback on Linux), so "one client" and "another client" are real
// peers with their own addresses as the issuer sees them.
import { Agent, request as httpsRequest } from 'node:https';
import { type Socket, connect as tcpConnect } from 'node:net';
import { connect as tlsConnect } from 'node:tls';
import type { KubeConfig } from '@kubernetes/client-node';
import { kubeFetch } from '../../../src/runtime/fetch.ts';

export interface Answer {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  text: string;
  /** Time from sending to the end of the answer. */
  ms: number;
}

export interface CallOptions {
  /** Source address (127.0.0.x). */
  from: string;
  ca: string;
  method?: string;
  token?: string;
  headers?: Record<string, string>;
  body?: string;
  /** A keep-alive agent to reuse connections; default: a new connection for this call. */
  agent?: Agent;
}

/** One HTTPS request to `url` + `path` from `options.from`. */
export function call(url: string, path: string, options: CallOptions): Promise<Answer> {
  const headers: Record<string, string> = { ...options.headers };
  if (options.token) headers.authorization = `Bearer ${options.token}`;
  if (options.body !== undefined) {
    headers['content-type'] ??= 'application/json';
    headers['content-length'] = String(Buffer.byteLength(options.body));
  }
  const started = performance.now();
  return new Promise((resolve, reject) => {
    const req = httpsRequest(
      new URL(path, url),
      {
        method: options.method ?? 'GET',
        headers,
        ca: options.ca,
        localAddress: options.from,
        ...(options.agent ? { agent: options.agent } : { agent: false }),
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (chunk: Buffer) => chunks.push(chunk));
        res.on('end', () =>
          resolve({
            status: res.statusCode ?? 0,
            headers: res.headers,
            text: Buffer.concat(chunks).toString('utf8'),
            ms: performance.now() - started,
          }),
        );
        res.on('error', reject);
      },
    );
    req.on('error', reject);
    req.end(options.body);
  });
}

/** A keep-alive agent for many calls from one source address. */
export function clientAgent(from: string, ca: string, maxSockets: number): Agent {
  return new Agent({ keepAlive: true, maxSockets, localAddress: from, ca });
}

export interface Closed {
  /** From the connection's opening to the server closing it. */
  afterMs: number;
  /** Everything the server sent (an error answer, if any). */
  received: string;
}

/**
 * A connection that sends what it is told, as slowly as it is told, and reports when the server
 * closes it. `tls: false` opens a bare TCP connection that never starts its TLS handshake.
 */
export class RawClient {
  readonly #socket: Socket;
  readonly opened = performance.now();
  /** Resolves once connected (TLS established for a TLS client); rejects if closed first. */
  readonly connected: Promise<void>;
  /** Resolves when the server (or an error) closes the connection. */
  readonly closed: Promise<Closed>;
  #timer: NodeJS.Timeout | undefined;

  constructor(url: string, options: { from: string; ca: string; tls?: boolean }) {
    const { hostname, port } = new URL(url);
    const target = { host: hostname, port: Number(port), localAddress: options.from };
    this.#socket = options.tls === false ? tcpConnect(target) : tlsConnect({ ...target, ca: options.ca });
    const chunks: Buffer[] = [];
    this.#socket.on('data', (chunk: Buffer) => chunks.push(chunk));
    this.#socket.on('error', () => undefined); // a reset is one way of being cut off
    this.closed = new Promise((resolve) =>
      this.#socket.once('close', () => {
        this.stopTrickle();
        resolve({
          afterMs: performance.now() - this.opened,
          received: Buffer.concat(chunks).toString('utf8'),
        });
      }),
    );
    this.connected = new Promise((resolve, reject) => {
      this.#socket.once(options.tls === false ? 'connect' : 'secureConnect', () => resolve());
      void this.closed.then(() => reject(new Error('closed before it was established')));
    });
    this.connected.catch(() => undefined);
  }

  send(text: string): void {
    if (this.#socket.writable) this.#socket.write(text);
  }

  /** Sends `piece` every `everyMs` until the connection closes (a slowloris client). */
  trickle(piece: string, everyMs: number): void {
    this.stopTrickle();
    this.#timer = setInterval(() => this.send(piece), everyMs);
  }

  stopTrickle(): void {
    if (this.#timer) clearInterval(this.#timer);
    this.#timer = undefined;
  }

  destroy(): void {
    this.stopTrickle();
    this.#socket.destroy();
  }
}

/** A raw HTTP/1.1 answer as status, headers and body (enough for our small JSON answers). */
export function parseAnswer(raw: string, ms: number): Answer {
  const split = raw.indexOf('\r\n\r\n');
  const head = split >= 0 ? raw.slice(0, split) : raw;
  const [statusLine = '', ...lines] = head.split('\r\n');
  const headers: Record<string, string> = {};
  for (const line of lines) {
    const colon = line.indexOf(':');
    if (colon > 0) headers[line.slice(0, colon).trim().toLowerCase()] = line.slice(colon + 1).trim();
  }
  return {
    status: Number(/^HTTP\/1\.1 (\d{3})/.exec(statusLine)?.[1] ?? 0),
    headers,
    text: split >= 0 ? raw.slice(split + 4) : '',
    ms,
  };
}

/**
 * Requests that reach the server at the same moment: every connection (TLS handshake included)
 * is opened first, then each writes its whole request in the same tick. Each request should say
 * `Connection: close`, so that the answer ends with the connection.
 */
export async function simultaneous(
  url: string,
  options: { from: string; ca: string },
  requests: string[],
): Promise<Answer[]> {
  const clients = requests.map(() => new RawClient(url, options));
  await Promise.all(clients.map((c) => c.connected));
  const sent = performance.now();
  clients.forEach((client, i) => {
    client.send(requests[i] ?? '');
  });
  return Promise.all(
    clients.map(async (client) => parseAnswer((await client.closed).received, performance.now() - sent)),
  );
}

/** A GET with a bearer, as raw HTTP/1.1 that closes the connection after the answer. */
export function rawGet(path: string, token: string, headers: Record<string, string> = {}): string {
  const extra = Object.entries(headers)
    .map(([name, value]) => `${name}: ${value}\r\n`)
    .join('');
  return `GET ${path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer ${token}\r\n${extra}Connection: close\r\n\r\n`;
}

/** TokenReviews the API server has answered so far (its own request counter, every client). */
export async function tokenReviewsSoFar(kubeConfig: KubeConfig): Promise<number> {
  const text = await (await kubeFetch(kubeConfig, '/metrics')).text();
  let total = 0;
  for (const match of text.matchAll(/^apiserver_request_total\{([^}]*)\} (\d+(?:\.\d+)?(?:e\+\d+)?)$/gm)) {
    if (/resource="tokenreviews"/.test(match[1] ?? '')) total += Number(match[2]);
  }
  return total;
}

/** A bearer token that no authenticator accepts, different every time (a JWT-shaped one). */
export function badBearer(i: number): string {
  const part = (text: string) => Buffer.from(text).toString('base64url');
  return `${part('{"alg":"RS256"}')}.${part(`{"sub":"nobody-${i}-${Math.random()}"}`)}.${part('not-a-signature')}`;
}
