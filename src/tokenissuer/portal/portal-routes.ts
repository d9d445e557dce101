// The self-service page for node administrators (config portal.enabled, off by default): four
// static files under /portal/ (the page, its script and the pure module that script imports, its
// style), read once at start-up. The page is a client of the same /v1 API as any portal and holds
// the caller's bearer token in JavaScript memory only, so no cookie, storage or URL ever carries
// a credential, and a cross-site request cannot borrow one (CSRF has nothing to ride on). The
// headers below pin it down: only its own scripts and style, no inline code, no framing, no form
// posts, no referrer, nothing cached.
import { readFileSync } from 'node:fs';
import type { FastifyInstance, FastifyReply } from 'fastify';

/** The page's Content-Security-Policy: its own files only, and fetch() to its own origin. */
export const PORTAL_CSP =
  "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self'; " +
  "base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

/** Headers every portal file is served with. */
const PORTAL_HEADERS: Readonly<Record<string, string>> = {
  'Content-Security-Policy': PORTAL_CSP,
  // The page shows join material: never keep a copy in a cache, shared or not.
  'Cache-Control': 'no-store',
  'X-Content-Type-Options': 'nosniff',
  'X-Frame-Options': 'DENY',
  'Referrer-Policy': 'no-referrer',
  'Cross-Origin-Opener-Policy': 'same-origin',
  'Cross-Origin-Resource-Policy': 'same-origin',
  'Permissions-Policy': 'camera=(), microphone=(), geolocation=(), payment=(), usb=()',
};

const ASSETS = [
  { route: '/portal/', file: 'index.html', type: 'text/html; charset=utf-8' },
  { route: '/portal/portal.js', file: 'portal.js', type: 'text/javascript; charset=utf-8' },
  { route: '/portal/formats.js', file: 'formats.js', type: 'text/javascript; charset=utf-8' },
  { route: '/portal/portal.css', file: 'portal.css', type: 'text/css; charset=utf-8' },
] as const;

function send(reply: FastifyReply, type: string, body: Buffer): FastifyReply {
  return reply.headers(PORTAL_HEADERS).type(type).send(body);
}

export function registerPortal(app: FastifyInstance): void {
  const dir = new URL('./', import.meta.url);
  for (const asset of ASSETS) {
    const body = readFileSync(new URL(asset.file, dir));
    app.get(asset.route, async (_request, reply) => send(reply, asset.type, body));
  }
  app.get('/portal', async (_request, reply) => reply.headers(PORTAL_HEADERS).redirect('/portal/', 308));
}
