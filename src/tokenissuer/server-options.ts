// The HTTP server's timeouts for slow clients, from config.connections. What they mean, checked
// against Node 24 (lib/_http_server.js, http.md) and fastify 5.12 (lib/server.js):
//   - fastify turns Node's own request timeout off (requestTimeout 0, Node's default is 300 s) and
//     keeps idle connections 72 s; Node checks headersTimeout (default 60 s) and requestTimeout
//     only in a sweep every connectionsCheckingInterval (default 30 s).
//   - headersTimeout runs from a connection's first byte (or, kept alive, the next request's)
//     until its headers end; requestTimeout until the whole request, body included, has arrived.
//     The time a handler takes afterwards does not count. Node refuses headersTimeout >
//     requestTimeout.
//   - keepAliveTimeout is the idle time between requests; Node (≥ 24.6) closes the socket
//     keepAliveTimeoutBuffer (1 s) later and tells clients `Keep-Alive: timeout=…`.
//   - a TCP connection that never completes its TLS handshake is tls' handshakeTimeout (120 s by
//     default): held to the headers timeout here.
// No socket inactivity timeout (fastify's connectionTimeout): it would also cut a response a slow
// Kubernetes API is still producing; the timeouts above already bound what a client can hold.
import type { IssuerConfig } from './config.ts';

interface ServerTimeouts {
  /** For fastify's constructor (it copies these onto the server after creating it). */
  fastify: { requestTimeout: number; keepAliveTimeout: number; connectionTimeout: 0 };
  /** For http(s).createServer. */
  server: {
    headersTimeout: number;
    requestTimeout: number;
    keepAliveTimeout: number;
    connectionsCheckingInterval: number;
  };
  /** For the TLS server. */
  tls: { handshakeTimeout: number };
}

/**
 * How often the header and request timeouts are checked: a quarter of the headers timeout, within
 * [100 ms, 500 ms]. A sweep walks the open connections (at most connections.max), which is cheap.
 */
export function checkingIntervalMs(headersTimeoutMs: number): number {
  return Math.min(500, Math.max(100, Math.floor(headersTimeoutMs / 4)));
}

export function serverTimeouts(connections: IssuerConfig['connections']): ServerTimeouts {
  const headersTimeout = Math.round(connections.headersTimeoutSeconds * 1000);
  const requestTimeout = Math.round(connections.requestTimeoutSeconds * 1000);
  const keepAliveTimeout = Math.round(connections.idleTimeoutSeconds * 1000);
  return {
    fastify: { requestTimeout, keepAliveTimeout, connectionTimeout: 0 },
    server: {
      headersTimeout,
      requestTimeout,
      keepAliveTimeout,
      connectionsCheckingInterval: checkingIntervalMs(headersTimeout),
    },
    tls: { handshakeTimeout: headersTimeout },
  };
}
