// The self-service page as served (fastify inject): off unless enabled; every file with the
// strict CSP and no-store; and the page's own files keep the rules the CSP enforces and the
// docs promise: no inline script or style, no event-handler attributes, no browser storage or
// cookies, no credential in a URL; and the pure decision of which formats of the join material
// it offers, with what instructions (formats.js); and, with the page's script running on a fake
// document (support/fake-page.ts), the Idempotency-Key its token requests carry: one per intent.
// The page in a real browser: test/e2e/portal.test.ts.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { parseIssuerConfig } from '../../src/tokenissuer/config.ts';
import { FORMATS, materialFormats } from '../../src/tokenissuer/portal/formats.js';
import { PORTAL_CSP } from '../../src/tokenissuer/portal-routes.ts';
import { buildIssuerApp } from '../../src/tokenissuer/server.ts';
import { FakePage, portalHtml, type SentRequest, until } from './support/fake-page.ts';
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

describe("the page's token requests carry an Idempotency-Key, one per intent", () => {
  const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;
  const json = (status: number, body: unknown) =>
    new Response(JSON.stringify(body), { status, headers: { 'Content-Type': 'application/json' } });
  const issued = (id: string) =>
    json(201, {
      id,
      tokenID: id.slice(3),
      joinConfiguration: 'kind: JoinConfiguration',
      cloudInit: '#cloud-config',
      joinCommand: 'kubeadm join --config join.yaml',
      discovery: 'file',
      discoveryKubeconfig: 'apiVersion: v1',
      discoveryKubeconfigPath: '/etc/kubernetes/nodeflavor-discovery.conf',
    });
  const failed = (status: number, code: string, message: string) =>
    json(status, { error: { code, message } });
  let pages = 0;

  /** The page, loaded and signed in; `posts` answers its POST /v1/tokens in turn. */
  async function signedIn(posts: (Response | Error)[]) {
    const page = new FakePage(portalHtml());
    const uninstall = page.install();
    page.answer = (request: SentRequest) => {
      const path = new URL(request.url, 'https://issuer.example').pathname;
      if (request.method === 'POST' && path === '/v1/tokens')
        return posts.shift() ?? new Error('no more answers');
      if (path === '/v1/flavors') return json(200, { items: [{ name: 'sweet', description: null }] });
      if (path === '/v1/tokens') return json(200, { items: [], continue: null });
      // The watch of a token just issued: it is verified at once, which ends the watch.
      const view = {
        id: path.slice(11),
        nodes: [],
        phase: 'Verified',
        reason: null,
        message: null,
        phaseSince: null,
      };
      return new Response(`event: token\ndata: ${JSON.stringify(view)}\n\n`, { status: 200 });
    };
    await import(`../../src/tokenissuer/portal/portal.js?page=${++pages}`);
    page.loaded();
    page.element('bearer').value = 'portal-bearer';
    page.element('signin-form').dispatch('submit');
    await until('the request form', () => !page.element('request-section').hidden);
    const tokenPosts = () => page.sent.filter((r) => r.method === 'POST');
    /** Submits the form and waits for the answer to be shown (or the error). */
    const submit = async () => {
      const before = tokenPosts().length;
      page.element('request-form').dispatch('submit');
      assert.equal(tokenPosts().length, before + 1, 'the submission sent no request');
      await until('the answer', () => !page.element('request-button').disabled);
      return tokenPosts().at(-1) as SentRequest;
    };
    return { page, uninstall, submit };
  }

  it('a retry of the same request reuses its key; an answered, changed or refused request starts a new one', async () => {
    const { page, uninstall, submit } = await signedIn([
      new TypeError('Failed to fetch'), // the answer is lost: was a token made?
      issued('ft-aaaaa1'),
      failed(503, 'Unavailable', 'the Kubernetes API is unavailable: retry'),
      failed(
        409,
        'Conflict',
        'this Idempotency-Key was first used more than 3600 s ago: use a new Idempotency-Key for a new request',
      ),
      issued('ft-aaaaa2'),
    ]);
    try {
      page.element('node').value = 'edge-1';
      const lost = await submit();
      const key = lost.headers['Idempotency-Key'] ?? '';
      assert.match(key, UUID, 'the token request carries a random Idempotency-Key');
      assert.deepEqual(JSON.parse(lost.body ?? ''), {
        flavorClassName: 'sweet',
        maxUses: 1,
        ttl: '2h',
        nodeName: 'edge-1',
      });
      assert.equal(page.element('request-error').textContent, 'Failed to fetch');

      const retried = await submit();
      assert.equal(retried.headers['Idempotency-Key'], key, 'the retry of the same request reuses the key');
      assert.equal(retried.body, lost.body);
      assert.equal(page.element('material').value, 'kind: JoinConfiguration');

      const next = await submit();
      const nextKey = next.headers['Idempotency-Key'] ?? '';
      assert.match(nextKey, UUID);
      assert.notEqual(nextKey, key, 'a new request after an answered one gets a new key');

      page.element('node').value = 'edge-2';
      const changed = await submit();
      assert.notEqual(changed.headers['Idempotency-Key'], nextKey, 'a changed request is a new intent');

      const again = await submit();
      assert.notEqual(
        again.headers['Idempotency-Key'],
        changed.headers['Idempotency-Key'],
        'after a 409 the key is not used again',
      );
      assert.equal(again.body, changed.body);
      assert.equal(
        new Set(page.sent.filter((r) => r.method === 'POST').map((r) => r.headers['Idempotency-Key'])).size,
        4,
      );
    } finally {
      page.element('signout-button').dispatch('click');
      uninstall();
    }
  });

  it('signing out ends the intent: the next user of the page gets a key of their own', async () => {
    const { page, uninstall, submit } = await signedIn([
      failed(503, 'Unavailable', 'retry'),
      failed(503, 'Unavailable', 'retry'),
    ]);
    try {
      page.element('node').value = 'edge-1';
      const first = await submit();
      page.element('signout-button').dispatch('click');
      page.element('bearer').value = 'other-bearer';
      page.element('signin-form').dispatch('submit');
      await until('the request form', () => !page.element('request-section').hidden);
      page.element('node').value = 'edge-1';
      const second = await submit();
      assert.equal(second.headers.Authorization, 'Bearer other-bearer');
      assert.notEqual(second.headers['Idempotency-Key'], first.headers['Idempotency-Key']);
    } finally {
      page.element('signout-button').dispatch('click');
      uninstall();
    }
  });
});
