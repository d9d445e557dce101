// The operations endpoint of `nodeflavor run`: /metrics (Prometheus), /healthz (the process is
// alive and its event loop turns), /readyz (every enabled part is ready). Plain HTTP on its own
// port, as kubelet probes and Prometheus scrapes expect.
import type { Server } from 'node:http';
import { createRequire } from 'node:module';
import type { Registry } from 'prom-client';

// Not `import { createServer } from 'node:http'`: an ES import of node:http builds its ESM facade
// from every export, which runs the lazy getters of http.WebSocket & co. and loads Node's bundled
// undici (770 KB of source and its compiled code: +13 MiB RSS in a bare process, ~2.5 MiB in the
// idle controller's, which never uses it). require() reads only what it asks for.
const { createServer } = createRequire(import.meta.url)('node:http') as typeof import('node:http');

export interface ReadinessCheck {
  name: string;
  ready: () => boolean;
  /** Why it is not ready, shown after its name (never a secret). */
  reason?: () => string | undefined;
}

export function startOpsServer(options: {
  host: string;
  port: number;
  registry: Registry;
  checks: ReadinessCheck[];
}): Promise<Server> {
  const server = createServer((req, res) => {
    const path = (req.url ?? '/').split('?')[0];
    if (req.method !== 'GET') {
      res.writeHead(405, { Allow: 'GET' }).end();
      return;
    }
    if (path === '/healthz' || path === '/livez') {
      res.writeHead(200, { 'Content-Type': 'text/plain' }).end('ok\n');
      return;
    }
    if (path === '/readyz') {
      const failing = options.checks
        .filter((check) => !check.ready())
        .map((check) => {
          const reason = check.reason?.();
          return reason ? `${check.name} (${reason})` : check.name;
        });
      res
        .writeHead(failing.length === 0 ? 200 : 503, { 'Content-Type': 'text/plain' })
        .end(failing.length === 0 ? 'ok\n' : `not ready: ${failing.join(', ')}\n`);
      return;
    }
    if (path === '/metrics') {
      options.registry.metrics().then(
        (text) => res.writeHead(200, { 'Content-Type': options.registry.contentType }).end(text),
        () => res.writeHead(500).end('metrics unavailable\n'),
      );
      return;
    }
    res.writeHead(404, { 'Content-Type': 'text/plain' }).end('not found\n');
  });
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port, options.host || undefined, () => resolve(server));
  });
}

/** Splits "host:port" / ":port" / "[::1]:port". */
export function splitAddress(address: string): { host: string; port: number } {
  const at = address.lastIndexOf(':');
  return { host: address.slice(0, at).replace(/^\[|\]$/g, ''), port: Number(address.slice(at + 1)) };
}
