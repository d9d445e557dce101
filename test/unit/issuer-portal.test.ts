// The self-service page as served (fastify inject): off unless enabled; every file with the
// strict CSP and no-store; and the page's own files keep the rules the CSP enforces and the
// docs promise: no inline script or style, no event-handler attributes, no browser storage or
// cookies, no credential in a URL; and the pure decision of which formats of the join material
// it offers, with what instructions (formats.js); and, with the page's script running on a fake
// document (support/fake-page.ts), the Idempotency-Key its token requests carry: one per intent;
// and binding a token to a TPM (ADR 0014): which field a pasted EK PEM is, the formats of attested
// material (no secret; the cloud-init first; the template and the script), the API's field errors
// next to their inputs, and the attestation facts of the token's status.
// The page in a real browser: test/e2e/portal.test.ts.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { JOIN_TEMPLATE_PATH as SCRIPT_TEMPLATE_PATH } from '../../src/tokenissuer/attestation/attest-script.ts';
import { parseIssuerConfig } from '../../src/tokenissuer/config.ts';
import {
  ATTESTED_NOTICE,
  ekBinding,
  FORMATS,
  JOIN_TEMPLATE_PATH,
  materialFormats,
  PLAIN_LABELS,
  PLAIN_NOTICE,
} from '../../src/tokenissuer/portal/formats.js';
import { PORTAL_CSP } from '../../src/tokenissuer/portal/portal-routes.ts';
import { buildIssuerApp } from '../../src/tokenissuer/server.ts';
import { type FakeElement, FakePage, portalHtml, type SentRequest, until } from './support/fake-page.ts';
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
    assert.match(html, /<label hidden><input type="radio" name="format" value="attestScript" disabled \/>/);
  });

  it("the plain names and notice are the HTML's own (the page shows them before any answer)", () => {
    for (const format of FORMATS)
      assert.ok(
        html.includes(`<span id="format-name-${format}">${PLAIN_LABELS[format]}</span>`),
        `${format}: ${PLAIN_LABELS[format]}`,
      );
    const notice = /<p id="material-notice" class="warning">([^<]*)<\/p>/.exec(html)?.[1] ?? '';
    assert.equal(notice.replace(/\s+/g, ' ').trim(), PLAIN_NOTICE);
    const plain = materialFormats({ joinCommand, discovery: 'file', discoveryKubeconfig: kubeconfig });
    assert.deepEqual(plain.labels, PLAIN_LABELS);
    assert.equal(plain.notice, PLAIN_NOTICE);
    assert.equal(plain.attested, false);
  });
});

describe("the page's formats of attested material (a token bound to a TPM)", () => {
  const path = '/etc/kubernetes/nodeflavor-discovery.conf';
  const script = '/usr/local/sbin/nodeflavor-attest';
  const answer = {
    joinCommand: script,
    discovery: 'file',
    discoveryKubeconfig: 'apiVersion: v1\nkind: Config\n',
    discoveryKubeconfigPath: path,
    attested: true,
    attestScript: '#!/bin/bash\n',
  };

  it('offers the cloud-init first, then the script, the template and the discovery kubeconfig', () => {
    const { formats, usage, labels, notice, attested } = materialFormats(answer);
    assert.equal(attested, true);
    assert.deepEqual(formats, ['cloudInit', 'attestScript', 'joinConfiguration', 'discoveryKubeconfig']);
    assert.deepEqual(Object.keys(usage).sort(), [...formats].sort());
    assert.match(labels.cloudInit ?? '', /^cloud-init \(use this/);
    assert.match(labels.joinConfiguration ?? '', /template .*not usable alone/);
    assert.match(labels.attestScript ?? '', /^Attestation script/);
    assert.match(usage.cloudInit ?? '', /installs .* and runs the script/);
    assert.ok(usage.cloudInit?.includes(script));
    assert.match(usage.joinConfiguration ?? '', /^A template, not usable alone: .*placeholders/);
    assert.ok(usage.joinConfiguration?.includes(JOIN_TEMPLATE_PATH));
    assert.ok(usage.attestScript?.includes(`installs as ${script} and runs`));
    assert.ok(usage.attestScript?.includes(`and the discovery kubeconfig at ${path}`));
    assert.match(usage.discoveryKubeconfig ?? '', /before running the attestation script/);
    // No "copy it like a password": it holds no secret and works only on the one machine.
    assert.equal(notice, ATTESTED_NOTICE);
    assert.match(notice, /^No secret in it: this material works only on the machine with the TPM/);
    assert.match(notice, /Anyone may read it, .* reach the machine unaltered/);
    for (const text of Object.values(usage)) assert.doesNotMatch(text, /join\.yaml|trust with a password/);
  });

  it('with token discovery: no discovery kubeconfig; without a script: no script format', () => {
    assert.deepEqual(materialFormats({ ...answer, discovery: 'token' }).formats, [
      'cloudInit',
      'attestScript',
      'joinConfiguration',
    ]);
    assert.doesNotMatch(
      materialFormats({ ...answer, discovery: 'token' }).usage.attestScript ?? '',
      /discovery kubeconfig/,
    );
    assert.deepEqual(materialFormats({ ...answer, attestScript: null }).formats, [
      'cloudInit',
      'joinConfiguration',
      'discoveryKubeconfig',
    ]);
  });

  it("names the template's path where the issued script reads it", () => {
    assert.equal(JOIN_TEMPLATE_PATH, SCRIPT_TEMPLATE_PATH);
  });
});

describe('which field a pasted EK PEM is (ekBinding)', () => {
  const cert = '-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----';
  const key = '-----BEGIN PUBLIC KEY-----\nMIIB\n-----END PUBLIC KEY-----';

  it('an EK certificate by its BEGIN line, an EK public key by its own', () => {
    assert.deepEqual(ekBinding(cert), { field: 'ekCertificate', pem: `${cert}\n` });
    assert.deepEqual(ekBinding(`${key}\n`), { field: 'ekPublicKey', pem: `${key}\n` });
  });

  it('nothing pasted (or blanks) is no binding', () => {
    assert.equal(ekBinding(''), null);
    assert.equal(ekBinding(' \n\t'), null);
  });

  it('keeps only the first PEM block of what was pasted (a prompt, openssl -text output, a chain)', () => {
    const pasted = `root@edge-17:~# tpm2_nvread 0x1c00002 | openssl x509 -inform der\n${cert}\n${key}\nroot@edge-17:~#`;
    assert.deepEqual(ekBinding(pasted), { field: 'ekCertificate', pem: `${cert}\n` });
    const dump = `Certificate:\n    Data:\n        Version: 3 (0x2)\n${key}`;
    assert.deepEqual(ekBinding(dump), { field: 'ekPublicKey', pem: `${key}\n` });
  });

  it('says why text is neither: no PEM, another kind of PEM, a cut-off block', () => {
    const problem = (text: string) => {
      const verdict = ekBinding(text);
      assert.ok(verdict && 'problem' in verdict, text);
      return verdict.problem;
    };
    assert.match(problem('MIIBIjANBgkqhkiG9w0BAQEFAAOCAQ8AMIIBCgKCAQEA'), /^is not PEM: paste the text from/);
    assert.match(
      problem('-----BEGIN RSA PUBLIC KEY-----\nMIIB\n-----END RSA PUBLIC KEY-----'),
      /^is a -----BEGIN RSA PUBLIC KEY-----, not an EK certificate/,
    );
    assert.match(
      problem('-----BEGIN CERTIFICATE-----\nMIIB'),
      /cut short: its -----END CERTIFICATE----- line/,
    );
    assert.match(problem(`-----BEGIN CERTIFICATE-----\nMIIB\n-----END PUBLIC KEY-----`), /cut short/);
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

describe('the page binds a token to a TPM', () => {
  const json = (status: number, body: unknown) =>
    new Response(JSON.stringify(body), { status, headers: { 'Content-Type': 'application/json' } });
  const cert = '-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n';
  const attestedAnswer = {
    id: 'ft-bbbbb1',
    tokenID: 'bbbbb1',
    bootstrapToken: null,
    flavorToken: null,
    joinConfiguration: 'kind: JoinConfiguration # NODEFLAVOR-ATTESTED-BOOTSTRAP-TOKEN',
    cloudInit: '#cloud-config\nruncmd: [/usr/local/sbin/nodeflavor-attest]',
    joinCommand: '/usr/local/sbin/nodeflavor-attest',
    discovery: 'token',
    discoveryKubeconfig: 'apiVersion: v1',
    discoveryKubeconfigPath: '/etc/kubernetes/nodeflavor-discovery.conf',
    attested: true,
    attestScript: '#!/bin/bash\n# nodeflavor attested join',
  };
  const plainAnswer = {
    ...attestedAnswer,
    id: 'ft-ccccc1',
    bootstrapToken: 'ccccc1.0123456789abcdef',
    flavorToken: 'x'.repeat(52),
    joinCommand: 'kubeadm join --config join.yaml',
    cloudInit: '#cloud-config',
    attested: false,
    attestScript: null,
  };
  const attestation = {
    ekCertificateIssuer: 'CN=swtpm-localca',
    allowRejoin: true,
    attestations: 2,
    attestedAt: '2026-12-02T13:00:00Z',
    lastRefusal: {
      reason: 'EKMismatch',
      message: "this machine's TPM is not the one token bbbbb1 is bound to",
      at: '2026-12-02T13:05:00Z',
    },
  };
  let pages = 0;

  async function signedIn(posts: Response[]) {
    const page = new FakePage(portalHtml());
    const uninstall = page.install();
    page.answer = (request: SentRequest) => {
      const path = new URL(request.url, 'https://issuer.example').pathname;
      if (request.method === 'POST' && path === '/v1/tokens') return posts.shift() ?? new Error('no more');
      if (path === '/v1/flavors') return json(200, { items: [{ name: 'sweet', description: null }] });
      if (path === '/v1/tokens') return json(200, { items: [], continue: null });
      const id = path.slice(11);
      const view = {
        id,
        nodes: [],
        phase: 'Verified',
        reason: null,
        message: null,
        phaseSince: null,
        attestation: id === attestedAnswer.id ? attestation : null,
      };
      return new Response(`event: token\ndata: ${JSON.stringify(view)}\n\n`, { status: 200 });
    };
    await import(`../../src/tokenissuer/portal/portal.js?tpm=${++pages}`);
    page.loaded();
    page.element('bearer').value = 'portal-bearer';
    page.element('signin-form').dispatch('submit');
    await until('the request form', () => !page.element('request-section').hidden);
    const submit = async () => {
      page.element('request-form').dispatch('submit');
      await until('the answer', () => !page.element('request-button').disabled);
      return page.sent.filter((r) => r.method === 'POST').at(-1);
    };
    /** The radios named `name` (the fake page keeps each in its label, whose `hidden` says whether it is offered). */
    const radios = (name: string) =>
      (
        Reflect.get(globalThis, 'document') as { querySelectorAll(s: string): FakeElement[] }
      ).querySelectorAll(`input[name="${name}"]`);
    const radio = (format: string) => {
      const found = radios('format').find((r) => r.value === format);
      assert.ok(found, format);
      return found;
    };
    return { page, uninstall, submit, radio, radios };
  }

  it('sends the pasted certificate as ekCertificate, shows the attested formats and the attestation facts', async () => {
    const { page, uninstall, submit, radio } = await signedIn([
      json(201, attestedAnswer),
      json(201, plainAnswer),
    ]);
    try {
      page.element('node').value = 'edge-1';
      page.element('ek').value = `root@edge-1:~# tpm2_nvread 0x1c00002 | openssl x509 -inform der\n${cert}`;
      page.element('ek').dispatch('input');
      assert.match(page.element('ek-kind').textContent, /^An EK certificate/);
      page.element('allow-rejoin').checked = true;
      const sent = await submit();
      assert.deepEqual(JSON.parse(sent?.body ?? ''), {
        flavorClassName: 'sweet',
        maxUses: 1,
        ttl: '2h',
        nodeName: 'edge-1',
        attestation: { ekCertificate: cert, allowRejoin: true },
      });
      // The cloud-init comes first and is shown; the script and the template are offered.
      assert.equal(page.element('material').value, attestedAnswer.cloudInit);
      assert.match(page.element('format-name-cloudInit').textContent, /^cloud-init \(use this/);
      assert.match(page.element('format-name-joinConfiguration').textContent, /template/);
      assert.match(page.element('material-notice').textContent, /^No secret in it/);
      assert.equal(radio('attestScript').parent?.hidden, false, 'the script is offered');
      assert.equal(radio('attestScript').disabled, false);
      assert.equal(radio('cloudInit').checked, true);
      assert.equal(radio('joinConfiguration').checked, false);
      radio('attestScript').checked = true;
      radio('cloudInit').checked = false;
      radio('attestScript').dispatch('change');
      assert.equal(page.element('material').value, attestedAnswer.attestScript);
      assert.match(page.element('material-usage').textContent, /^The script the cloud-init installs/);
      // The status: how often the machine proved itself, and the last refusal.
      await until('the attestation facts', () => !page.element('attestation-facts').hidden);
      assert.match(
        page.element('attestation-facts').textContent,
        /^Tied to one machine's TPM \(its EK certificate, from CN=swtpm-localca; re-join allowed\): attested 2 times, last at /,
      );
      assert.match(
        page.element('attestation-refusal').textContent,
        /^Last refusal: EKMismatch: this machine's TPM is not the one token bbbbb1 is bound to \(.*\)\. The material was tried on a machine with another TPM\.$/,
      );

      // The next token is a plain one: the plain names, notice and first format again, no facts.
      page.element('ek').value = '';
      page.element('allow-rejoin').checked = false;
      await submit();
      assert.equal(page.element('material').value, plainAnswer.joinConfiguration);
      assert.equal(page.element('format-name-joinConfiguration').textContent, 'kubeadm JoinConfiguration');
      assert.equal(page.element('format-name-cloudInit').textContent, 'cloud-init');
      assert.equal(page.element('material-notice').textContent, PLAIN_NOTICE);
      assert.equal(radio('attestScript').parent?.hidden, true, 'no script format for plain material');
      assert.equal(radio('attestScript').disabled, true);
      await until('the plain status', () => page.element('token-id').textContent === plainAnswer.id);
      assert.equal(page.element('attestation-facts').hidden, true);
      assert.equal(page.element('attestation-refusal').hidden, true);
    } finally {
      page.element('signout-button').dispatch('click');
      uninstall();
    }
  });

  it("shows the API's field errors next to their inputs, and refuses text that is no EK before sending", async () => {
    const refused = json(400, {
      error: {
        code: 'InvalidRequest',
        message:
          'invalid request: nodeName is required with attestation.allowRejoin: a machine re-joins under its one name',
        fields: [
          {
            field: 'nodeName',
            message: 'is required with attestation.allowRejoin: a machine re-joins under its one name',
          },
        ],
      },
    });
    const { page, uninstall, submit, radios } = await signedIn([refused]);
    try {
      const posts = () => page.sent.filter((r) => r.method === 'POST').length;
      page.element('ek').value = 'MIIBIjANBgkqhkiG9w0BAQEFAAOCAQ8AMIIBCgKCAQEA';
      page.element('node').value = 'edge-1';
      page.element('request-form').dispatch('submit');
      assert.equal(posts(), 0, 'nothing sent');
      assert.match(page.element('ek-error').textContent, /^The pasted EK is not PEM/);
      assert.equal(page.element('ek').attributes.get('aria-invalid'), 'true');

      page.element('ek').value = '';
      page.element('allow-rejoin').checked = true;
      page.element('request-form').dispatch('submit');
      assert.equal(posts(), 0, 'nothing sent');
      assert.match(page.element('ek-error').textContent, /^Allow re-join applies to a token bound to a TPM/);

      // Any name, allowRejoin: the API's refusal, shown next to the node name.
      page.element('ek').value = cert;
      for (const mode of radios('node-mode')) mode.checked = mode.value === 'any';
      const sent = await submit();
      assert.equal(JSON.parse(sent?.body ?? '').nodeName, undefined);
      assert.equal(page.element('ek-error').hidden, true, 'the EK error of before is gone');
      assert.equal(
        page.element('node-error').textContent,
        'Node name is required with attestation.allowRejoin: a machine re-joins under its one name',
      );
      assert.equal(page.element('node-error').hidden, false);
      assert.equal(page.element('node').attributes.get('aria-invalid'), 'true');
      assert.match(page.element('request-error').textContent, /^invalid request: nodeName is required/);
      assert.equal(page.element('material-section').hidden, true);
    } finally {
      page.element('signout-button').dispatch('click');
      uninstall();
    }
  });
});
