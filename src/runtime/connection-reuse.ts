// client-node 2.0.1 builds a new undici Agent for every request (KubeConfig.createDispatcher), so
// every call pays a fresh TLS handshake with the API server and leaves a connection behind (seen
// in the P3 benchmark: 6 new connections per issued token). We keep one dispatcher per distinct
// set of TLS options instead; everything else about authentication stays client-node's own
// (headers, exec plugins, token files are still applied per request).
import { createHash } from 'node:crypto';
import type { KubeConfig } from './kubeconfig.ts';

type Dispatcher = { close?: () => Promise<void> } | undefined;
type CreateDispatcher = (cluster: unknown, options: Record<string, unknown>) => Dispatcher;
const MAX_DISPATCHERS = 8;
const pooled = new WeakSet<KubeConfig>();

function fingerprint(cluster: unknown, options: Record<string, unknown>): string {
  const { server, proxyUrl, skipTLSVerify, tlsServerName } = (cluster ?? {}) as Record<string, unknown>;
  const material = [
    server,
    proxyUrl,
    skipTLSVerify,
    tlsServerName,
    ...['ca', 'cert', 'key', 'pfx', 'passphrase', 'servername', 'rejectUnauthorized'].map((k) => options[k]),
  ];
  const hash = createHash('sha256');
  for (const part of material) hash.update(Buffer.isBuffer(part) ? part : String(part ?? '')).update('\0');
  return hash.digest('hex');
}

/** Makes this KubeConfig reuse connections; returns it (idempotent). */
export function withConnectionReuse<T extends KubeConfig>(kubeConfig: T): T {
  if (pooled.has(kubeConfig)) return kubeConfig;
  const target = kubeConfig as unknown as { createDispatcher: CreateDispatcher };
  if (typeof target.createDispatcher !== 'function') return kubeConfig; // a client-node without it
  const original = target.createDispatcher.bind(kubeConfig);
  const cache = new Map<string, Dispatcher>();
  target.createDispatcher = (cluster, options) => {
    const key = fingerprint(cluster, options);
    if (!cache.has(key)) {
      if (cache.size >= MAX_DISPATCHERS) {
        // Rotated client certificates make new keys: drop the oldest dispatcher.
        const [oldest, dispatcher] = cache.entries().next().value as [string, Dispatcher];
        cache.delete(oldest);
        void dispatcher?.close?.().catch(() => undefined);
      }
      cache.set(key, original(cluster, options));
    }
    return cache.get(key);
  };
  pooled.add(kubeConfig);
  return kubeConfig;
}
