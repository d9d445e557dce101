// A loopback TCP proxy for fault tests and the two-API-server control plane. It spreads
// connections over its upstreams round robin (one L4 load balancer in front of several
// kube-apiservers, or webhook replicas) and, on command, fails the way production networks do:
//   - 'stall': connections are accepted and held, bytes go nowhere in either direction (an API
//     server that accepts connections but never answers, a partition). Bytes a client sent
//     while stalled are delivered on resume, unless the client gave up on that connection
//     first: then they are dropped with it, as a partition drops what a reset connection sent.
//   - 'refuse': every connection is dropped at once, new ones included (an API server that is down).
//   - 'forward': back to normal; held bytes flow on.
// TLS passes through untouched: clients still verify the upstream's certificate.
import { connect, createServer, type Server, type Socket } from 'node:net';

export type ProxyMode = 'forward' | 'stall' | 'refuse';

export interface Upstream {
  host: string;
  port: number;
}

export interface TcpProxyOptions {
  upstreams: Upstream[];
  /** Connect upstream from this local address (e.g. 127.0.0.2), so the upstream can tell us apart. */
  localAddress?: string;
  /** Listen on this port (default: any free one) on 127.0.0.1. */
  port?: number;
}

interface Link {
  client: Socket;
  upstream: Socket;
  /** Held while stalled: client → upstream, upstream → client. */
  toUpstream: Buffer[];
  toClient: Buffer[];
  clientEnded: boolean;
  upstreamEnded: boolean;
}

export class TcpProxy {
  private readonly server: Server;
  private readonly options: TcpProxyOptions;
  private readonly links = new Set<Link>();
  private next = 0;
  private current: ProxyMode = 'forward';
  /** Connections accepted per upstream (index as in options.upstreams). */
  readonly connections: number[];

  private constructor(server: Server, options: TcpProxyOptions) {
    this.server = server;
    this.options = options;
    this.connections = options.upstreams.map(() => 0);
  }

  static async start(options: TcpProxyOptions): Promise<TcpProxy> {
    if (options.upstreams.length === 0) throw new Error('a proxy needs at least one upstream');
    const server = createServer({ pauseOnConnect: false });
    const proxy = new TcpProxy(server, options);
    server.on('connection', (client) => proxy.accept(client));
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(options.port ?? 0, '127.0.0.1', () => resolve());
    });
    return proxy;
  }

  get port(): number {
    const address = this.server.address();
    if (typeof address !== 'object' || address === null) throw new Error('the proxy is not listening');
    return address.port;
  }

  /** https://127.0.0.1:<port>, for a kubeconfig or a webhook URL. */
  get url(): string {
    return `https://127.0.0.1:${this.port}`;
  }

  get mode(): ProxyMode {
    return this.current;
  }

  setMode(mode: ProxyMode): void {
    this.current = mode;
    if (mode === 'refuse') for (const link of this.links) this.reset(link);
    if (mode === 'forward') for (const link of this.links) this.flush(link);
  }

  async close(): Promise<void> {
    for (const link of this.links) this.reset(link);
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  private accept(client: Socket): void {
    if (this.current === 'refuse') {
      abort(client);
      return;
    }
    const index = this.next++ % this.options.upstreams.length;
    this.connections[index] = (this.connections[index] ?? 0) + 1;
    const target = this.options.upstreams[index] as Upstream;
    const upstream = connect({
      host: target.host,
      port: target.port,
      ...(this.options.localAddress ? { localAddress: this.options.localAddress } : {}),
    });
    const link: Link = {
      client,
      upstream,
      toUpstream: [],
      toClient: [],
      clientEnded: false,
      upstreamEnded: false,
    };
    this.links.add(link);
    client.setNoDelay(true);
    upstream.setNoDelay(true);
    client.on('data', (chunk: Buffer) => {
      if (this.current === 'forward') upstream.write(chunk);
      else link.toUpstream.push(chunk);
    });
    upstream.on('data', (chunk: Buffer) => {
      if (this.current === 'forward') client.write(chunk);
      else link.toClient.push(chunk);
    });
    client.on('end', () => {
      link.clientEnded = true;
      // A client that gives up while stalled takes what it sent with it: nothing arrives later.
      if (this.current === 'forward') upstream.end();
      else this.reset(link);
    });
    upstream.on('end', () => {
      link.upstreamEnded = true;
      if (this.current === 'forward') client.end();
    });
    const gone = () => this.reset(link);
    client.on('error', gone);
    upstream.on('error', gone);
    client.on('close', gone);
    upstream.on('close', () => {
      if (this.current === 'forward' || link.toClient.length === 0) gone();
    });
  }

  private flush(link: Link): void {
    const toUpstream = link.toUpstream.splice(0);
    if (!link.upstream.destroyed) for (const chunk of toUpstream) link.upstream.write(chunk);
    for (const chunk of link.toClient.splice(0)) link.client.write(chunk);
    if (link.clientEnded) link.upstream.end();
    if (link.upstreamEnded) link.client.end();
  }

  private reset(link: Link): void {
    if (!this.links.delete(link)) return;
    link.toUpstream.length = 0;
    link.toClient.length = 0;
    abort(link.client);
    abort(link.upstream);
  }
}

/**
 * Drops a connection. destroy(), not resetAndDestroy(): on Node 24 a socket reset after its
 * peer had half-closed it stayed a handle for ever, and the process spun at exit waiting for it.
 */
function abort(socket: Socket): void {
  if (!socket.destroyed) socket.destroy();
}
