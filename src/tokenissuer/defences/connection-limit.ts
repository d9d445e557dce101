// Caps on open connections: per client socket address (one client cannot hold them all) and in
// all (memory stays bounded). Counted when the TCP connection arrives, before any TLS: a connection
// over a cap is closed at once and costs no handshake. A trusted proxy carries many clients'
// connections, so it is held to the total cap only. The socket's own address is all there is at
// this point (X-Forwarded-For comes later, inside TLS).
import type { Server } from 'node:net';
import { addressKey, normaliseAddress, type TrustedProxies } from './client-address.ts';

type ConnectionVerdict = 'accept' | 'per_address' | 'total';

/** The counts, and the decision for one more connection (pure). */
export class ConnectionCounts {
  readonly #perAddress = new Map<string, number>();
  readonly #maxPerAddress: number;
  readonly #max: number;
  #total = 0;

  constructor(limits: { maxPerAddress: number; max: number }) {
    this.#maxPerAddress = limits.maxPerAddress;
    this.#max = limits.max;
  }

  get total(): number {
    return this.#total;
  }

  /** Counts the connection in if it fits; `exempt` skips the per-address cap. */
  admit(key: string, exempt: boolean): ConnectionVerdict {
    if (this.#total >= this.#max) return 'total';
    const open = this.#perAddress.get(key) ?? 0;
    if (!exempt && open >= this.#maxPerAddress) return 'per_address';
    this.#perAddress.set(key, open + 1);
    this.#total += 1;
    return 'accept';
  }

  release(key: string): void {
    const open = this.#perAddress.get(key) ?? 0;
    if (open <= 1) this.#perAddress.delete(key);
    else this.#perAddress.set(key, open - 1);
    this.#total = Math.max(0, this.#total - 1);
  }
}

interface ConnectionEvents {
  refused(reason: Exclude<ConnectionVerdict, 'accept'>): void;
  open(total: number): void;
}

/** Applies the caps to `server`'s incoming connections (before TLS and HTTP see them). */
export function limitConnections(
  server: Server,
  limits: { maxPerAddress: number; max: number },
  proxies: TrustedProxies,
  events: ConnectionEvents,
): ConnectionCounts {
  const counts = new ConnectionCounts(limits);
  // prependListener: ahead of tls' own listener, so a refused socket is never handshaken.
  server.prependListener('connection', (socket: import('node:net').Socket) => {
    const address = normaliseAddress(socket.remoteAddress ?? '');
    const key = addressKey(address);
    const verdict = counts.admit(key, proxies.trusts(address));
    if (verdict !== 'accept') {
      events.refused(verdict);
      socket.destroy();
      return;
    }
    events.open(counts.total);
    socket.once('close', () => {
      counts.release(key);
      events.open(counts.total);
    });
  });
  return counts;
}
