// The self-service page as served (fastify inject): off unless enabled; every file with the
// strict CSP and no-store; and the page's own files keep the rules the CSP enforces and the
// docs promise: no inline script or style, no event-handler attributes, no browser storage or
// cookies, no credential in a URL; and the pure decision of which formats of the join material
// it offers, with what instructions (formats.js). The page in a real browser: test/e2e/portal.test.ts.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { parseIssuerConfig } from '../../src/tokenissuer/config.ts';
import { FORMATS, materialFormats } from '../../src/tokenissuer/portal/formats.js';
import { PORTAL_CSP } from '../../src/tokenissuer/portal-routes.ts';
import { buildIssuerApp } from '../../src/tokenissuer/server.ts';
import { clusterInfoKubeconfig, FakeReviews, FakeTokenKube, fakeKeyRing } from './support/issuer-fakes.ts';

const dir = join(import.meta.dirname, '..', '..', 'src', 'tokenissuer', 'portal');
const html = readFileSync(join(dir, 'index.html'), 'utf8');
/** The scripts without their comment lines (which name what they must not do). */
const withoutComments = (file: string) => readFileSync(join(dir, file), 'utf8').replace(/^\s*\/\/.*$/gm, '');
const script = withoutComments('portal.js');
const formatsScript = withoutComments('formats.js');

async function app(enabled: boolean) {
  const { app } = buildIssuerApp(
    parseIssuerConfig({ tls: { certPem: 'x', keyPem: 'y' }, logLevel: 'silent', portal: { enabled } }),
    {
      kube: new FakeTokenKube(await clusterInfoKubeconfig()),
      reviews: new FakeReviews(),
      keyRing: fakeKeyRing(),
    },
  );
  return app;
}

describe('the self-service page', () => {
  it('is not served unless enabled', async () => {
    const off = await app(false);
    for (const url of [
      '/portal',
      '/portal/',
      '/portal/portal.js',
      '/portal/formats.js',
      '/portal/portal.css',
    ])
      assert.equal((await off.inject({ method: 'GET', url })).statusCode, 404, url);
  });

  it('serves its four files with the strict CSP, no-store and the other protective headers', async () => {
    const on = await app(true);
    for (const [url, type] of [
      ['/portal/', 'text/html'],
      ['/portal/portal.js', 'text/javascript'],
      ['/portal/formats.js', 'text/javascript'],
      ['/portal/portal.css', 'text/css'],
    ] as const) {
      const response = await on.inject({ method: 'GET', url });
      assert.equal(response.statusCode, 200, url);
      assert.ok(String(response.headers['content-type']).startsWith(type), url);
      assert.equal(
        response.headers['content-security-policy'],
        "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self'; " +
          "base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
      );
      assert.equal(response.headers['cache-control'], 'no-store');
      assert.equal(response.headers['x-content-type-options'], 'nosniff');
      assert.equal(response.headers['x-frame-options'], 'DENY');
      assert.equal(response.headers['referrer-policy'], 'no-referrer');
      assert.equal(response.headers['set-cookie'], undefined, 'no cookie, ever');
    }
    const redirect = await on.inject({ method: 'GET', url: '/portal' });
    assert.equal(redirect.statusCode, 308);
    assert.equal(redirect.headers.location, '/portal/');
    assert.equal(PORTAL_CSP.includes("'unsafe-inline'"), false);
  });

  it('the HTML has no inline script, inline style or event-handler attribute', () => {
    for (const tag of html.match(/<script\b[^>]*>/g) ?? []) assert.match(tag, /\bsrc="\/portal\//, tag);
    assert.doesNotMatch(html, /<script\b[^>]*>(?!<\/script>)/, 'no code between script tags');
    assert.doesNotMatch(html, /<style\b/i);
    assert.doesNotMatch(html, /\sstyle=/i);
    assert.doesNotMatch(html, /\son[a-z]+=/i);
    assert.doesNotMatch(html, /<form\b[^>]*\baction=/i, 'forms are handled by the script, never posted');
  });

  it('the script keeps the bearer out of storage, cookies, URLs and HTML parsing', () => {
    for (const forbidden of [
      /localStorage/,
      /sessionStorage/,
      /indexedDB/,
      /document\.cookie/,
      /\.innerHTML\b/,
      /\.outerHTML\b/,
      /insertAdjacentHTML/,
      /document\.write/,
      /\beval\(/,
      /new Function\(/,
      /EventSource/,
    ]) {
      assert.doesNotMatch(script, forbidden, String(forbidden));
      assert.doesNotMatch(formatsScript, forbidden, String(forbidden));
    }
    // formats.js decides and renders nothing: no DOM, no network, no bearer.
    assert.doesNotMatch(formatsScript, /\b(?:document|window|fetch|session|navigator)\b/);
    // The bearer goes only into an Authorization header.
    const uses = script.match(/session(\?)?\.bearer/g) ?? [];
    assert.ok(uses.length >= 2);
    for (const line of script.split('\n').filter((l) => /session\??\.bearer/.test(l)))
      assert.match(line, /Authorization: `Bearer \$\{session\??\.bearer|session = |bearer \}/, line);
    assert.match(script, /credentials: 'omit'/);
  });
});

describe("the page's formats of the join material", () => {
  const path = '/etc/kubernetes/nodeflavor-discovery.conf';
  const joinCommand = 'kubeadm join --config join.yaml';
  const kubeconfig = 'apiVersion: v1\nkind: Config\nclusters: []\n';

  it('file discovery: offers the discovery kubeconfig third, and every text names where it goes', () => {
    const { formats, usage } = materialFormats({
      joinCommand,
      discovery: 'file',
      discoveryKubeconfig: kubeconfig,
      discoveryKubeconfigPath: path,
    });
    assert.deepEqual(formats, ['joinConfiguration', 'cloudInit', 'discoveryKubeconfig']);
    assert.deepEqual(Object.keys(usage).sort(), [...formats].sort());
    assert.equal(
      usage.joinConfiguration,
      `Save the discovery kubeconfig (format "Discovery kubeconfig"; it holds no secret, only the API ` +
        `server's address and CA) on the node at ${path}, and this configuration as join.yaml, then run: ` +
        joinCommand,
    );
    assert.match(
      usage.discoveryKubeconfig ?? '',
      /^Save it on the node at \/etc\/kubernetes\/nodeflavor-discovery\.conf,/,
    );
    assert.match(usage.discoveryKubeconfig ?? '', /no secret/);
    assert.match(usage.cloudInit ?? '', /writes the discovery kubeconfig and the configuration, and joins/);
  });

  it('token discovery: two formats and the instructions of before, though the answer carries the file', () => {
    const { formats, usage } = materialFormats({
      joinCommand,
      discovery: 'token',
      discoveryKubeconfig: kubeconfig,
      discoveryKubeconfigPath: path,
    });
    assert.deepEqual(formats, ['joinConfiguration', 'cloudInit']);
    assert.equal(usage.discoveryKubeconfig, undefined);
    assert.equal(usage.joinConfiguration, `Save it on the node as join.yaml, then run: ${joinCommand}`);
    assert.equal(
      usage.cloudInit,
      'Give this to the new machine as its cloud-init user data: it writes the configuration and joins.',
    );
    for (const text of Object.values(usage))
      assert.doesNotMatch(text, /discovery kubeconfig|nodeflavor-discovery/);
  });

  it('an answer without the discovery fields (an older issuer) is token discovery', () => {
    assert.deepEqual(materialFormats({ joinCommand }).formats, ['joinConfiguration', 'cloudInit']);
  });

  it('file discovery without the file offers no empty format, and still says the join needs it', () => {
    for (const discoveryKubeconfig of [undefined, '']) {
      const { formats, usage } = materialFormats({
        joinCommand,
        discovery: 'file',
        ...(discoveryKubeconfig === undefined ? {} : { discoveryKubeconfig }),
      });
      assert.deepEqual(formats, ['joinConfiguration', 'cloudInit']);
      assert.match(
        usage.joinConfiguration ?? '',
        /discovery kubeconfig .* at the path its discovery\.file\.kubeConfigPath names/,
      );
    }
  });

  it("offers only formats the page has a choice for, in the page's order", () => {
    const radios = [...html.matchAll(/<input type="radio" name="format" value="([A-Za-z]+)"/g)].map(
      (m) => m[1],
    );
    assert.deepEqual(radios, [...FORMATS]);
    // The third choice starts hidden and disabled: the page offers it once an answer says so.
    assert.match(
      html,
      /<label hidden><input type="radio" name="format" value="discoveryKubeconfig" disabled \/>/,
    );
  });
});
