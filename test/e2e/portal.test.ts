// The self-service page in headless Chromium (Debian's chromium, driven by playwright-core) against
// the issuer on the real control plane, with the controller running: a node administrator signs in
// with a ServiceAccount token, sees the flavors they may use, requests a token, reads the join
// configuration off the page, a simulated node joins with exactly that text, and the page shows
// "Verified". With file discovery (the default) the node needs two files from the page: the
// JoinConfiguration, whose instructions name where the other goes, and the discovery kubeconfig,
// shown exactly as the API answered it (and copied to the clipboard by the Copy button); with token
// discovery the page offers no discovery kubeconfig. Along the way: the strict CSP is served and
// nothing violates it, the bearer never reaches a URL, a cookie or browser storage, and the join
// material can be removed from the page. Bound to a machine's TPM (ADR 0014): the user pastes the
// machine's EK certificate, the page shows the API's refusal of a re-join without a node name next
// to the node name, then material with no secret in it (the cloud-init first, the attestation
// script, the JoinConfiguration template), and the refusal of that material on another TPM.
// UPDATE_SCREENSHOT=1 writes the README's screenshot (docs/images/portal.png, secrets blanked).
import assert from 'node:assert/strict';
import { X509Certificate } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { type Browser, chromium, type Page } from 'playwright-core';
import type { IssueResponse, PlainIssueResponse } from '../../src/tokenissuer/response.ts';
import type { RunningIssuer } from '../../src/tokenissuer/server.ts';
import { skipUnless } from '../support/skip.ts';
import { applyObjects } from './cluster/apply.ts';
import { freePort } from './cluster/ports.ts';
import type { SimulatedKubelet } from './kubelet-sim/kubelet.ts';
import { postJson } from './support/attestation.ts';
import { controllerHarness } from './support/controller-harness.ts';
import {
  clusterRoleBindingObject,
  serviceAccountObject,
  serviceAccountToken,
  startTestIssuer,
  useFlavorClassesRole,
} from './support/issuer.ts';
import { applyFlavorClass, customObjects, ensureNamespace, joinWith } from './support/nodeflavor.ts';
import { tempDirForThisProcess } from './support/temp-dir.ts';
import { uniqueName, waitFor } from './support/wait.ts';

const CHROMIUM = '/usr/bin/chromium';
/** Software-TPM fixtures (swtpm): manufacturer A's CAs, a TPM's EK certificate, another TPM's EK. */
const TPM_FIXTURES = join(import.meta.dirname, '..', 'unit', 'fixtures', 'tpm');
const NAMESPACE = 'nodeflavor-e2e-portal';
/** Without the background-networking flags Chromium floods the closed network (docs/FACTS). */
const CHROMIUM_ARGS = [
  '--no-sandbox',
  '--disable-gpu',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
  '--no-first-run',
];
const skip = skipUnless(
  'the page test in headless Chromium (test/e2e/portal.test.ts)',
  !existsSync(CHROMIUM) &&
    `${CHROMIUM} is missing: run 'make host-packages' as root (installs Debian's chromium)`,
);

describe('the self-service page in headless Chromium', { skip }, () => {
  const h = controllerHarness({});
  let issuer: RunningIssuer;
  /** A second issuer, with token discovery. */
  let byToken: RunningIssuer | undefined;
  let byTokenId: string | undefined;
  /** A third, set up for attested joins (TPM manufacturer A's CAs), and its CA. */
  let byTpm: RunningIssuer | undefined;
  let byTpmCa = '';
  let byTpmTokenId: string | undefined;
  /** The 400s a test provokes on purpose (Chromium logs each one as a console error). */
  let expectedBadRequests = 0;
  let browser: Browser;
  let page: Page;
  let bearer: string;
  const kubelets: SimulatedKubelet[] = [];
  const requests: { url: string; authorization: string | undefined }[] = [];
  const problems: string[] = [];

  before(async () => {
    await ensureNamespace(h.env, NAMESPACE);
    await applyFlavorClass(h.env, h.sweet, {
      labels: { 'nodeflavor.io/flavor': h.sweet },
      description: 'Nodes in our own racks',
    });
    await applyObjects(
      h.env.kubeconfigPath,
      [
        serviceAccountObject('edge-admin', NAMESPACE),
        useFlavorClassesRole('nodeflavor-e2e-page-use', [h.sweet]),
        clusterRoleBindingObject('nodeflavor-e2e-page', 'nodeflavor-e2e-page-use', 'edge-admin', NAMESPACE),
      ],
      'nodeflavor-e2e-page',
    );
    bearer = await serviceAccountToken(h.env, NAMESPACE, 'edge-admin');
    ({ issuer } = await startTestIssuer(h.env, { portal: { enabled: true }, logLevel: 'silent' }));
    browser = await chromium.launch({ executablePath: CHROMIUM, args: CHROMIUM_ARGS, headless: true });
    // The issuer's certificate is from the test's throwaway CA, which this browser does not know.
    const context = await browser.newContext({
      ignoreHTTPSErrors: true,
      viewport: { width: 1000, height: 1500 },
    });
    // The Copy button writes the clipboard, which the test reads back.
    await context.grantPermissions(['clipboard-read', 'clipboard-write']);
    page = await context.newPage();
    page.on('request', (request) =>
      requests.push({ url: request.url(), authorization: request.headers().authorization }),
    );
    // The browser asks for /favicon.ico by itself (404): that alone is not the page's doing.
    page.on('response', (response) => {
      if (response.status() === 404 && new URL(response.url()).pathname !== '/favicon.ico')
        problems.push(`404 ${response.url()}`);
    });
    page.on('console', (message) => {
      if (message.type() === 'error' && /Failed to load resource: .* 404/.test(message.text())) return;
      if (message.type() === 'error' && /Failed to load resource: .* 400/.test(message.text())) {
        expectedBadRequests -= 1;
        if (expectedBadRequests >= 0) return;
      }
      if (message.type() === 'error') problems.push(message.text());
    });
    page.on('pageerror', (error) => problems.push(error.message));
  });

  after(async () => {
    for (const kubelet of kubelets) kubelet.stop();
    await browser?.close();
    await issuer?.close();
    await byToken?.close();
    await byTpm?.close();
    // The token-discovery token no node used: revoked (its bootstrap Secret goes with it); and the
    // TPM-bound one (which never had a Secret).
    for (const name of [byTokenId, byTpmTokenId])
      if (name)
        await customObjects(h.env.kubeConfig)
          .deleteClusterCustomObject({
            group: 'nodeflavor.io',
            version: 'v1alpha1',
            plural: 'flavoredtokens',
            name,
          })
          .catch(() => undefined);
  });

  it('serves the page with the strict CSP', async () => {
    const response = await page.goto(`${issuer.url}/portal/`);
    assert.equal(response?.status(), 200);
    const headers = response?.headers() ?? {};
    assert.equal(
      headers['content-security-policy'],
      "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self'; " +
        "base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
    );
    assert.equal(headers['cache-control'], 'no-store');
    await page.getByRole('heading', { name: 'Join a node' }).waitFor();
  });

  it('refuses a bad token with a message, and signs in with a good one', async () => {
    await page.getByLabel('Your token', { exact: true }).fill('not-a-token');
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByRole('alert').filter({ hasText: 'not accepted' }).waitFor();
    await page.getByLabel('Your token', { exact: true }).fill(bearer);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByRole('heading', { name: '2. Request a join token' }).waitFor();
    // The flavor this caller may use is offered (and only the ones it may use).
    await page.getByRole('radio', { name: h.sweet }).waitFor();
    assert.equal(await page.getByRole('radio', { name: h.sour }).count(), 0);
    assert.equal(
      await page.getByLabel('Your token', { exact: true }).inputValue(),
      '',
      'the field is emptied at once',
    );
  });

  it('issues, shows the join configuration, and shows "Verified" once the node joins with it', async () => {
    const name = uniqueName('portal-node');
    await page.getByLabel('Node name', { exact: true }).fill(name);
    await page.getByLabel('Valid for').fill('1h');
    const answered = page.waitForResponse(
      (response) =>
        new URL(response.url()).pathname === '/v1/tokens' && response.request().method() === 'POST',
    );
    await page.getByRole('button', { name: 'Request join token' }).click();
    const material = page.getByRole('textbox', { name: 'Join material' });
    await waitFor(
      async () => {
        const error = page.locator('#request-error');
        if (await error.isVisible()) throw new Error(`the page says: ${await error.textContent()}`);
        const value = await material.inputValue();
        if (/kind: "?JoinConfiguration/.test(value)) return true;
        throw new Error(
          `not yet: ${value.length} characters shown; requests ${requests.map((r) => new URL(r.url).pathname).join(' ')}`,
        );
      },
      {
        what: 'the join configuration on the page',
      },
    );
    const answer = (await (await answered).json()) as PlainIssueResponse;
    assert.match(
      (await answered).request().headers()['idempotency-key'] ?? '',
      /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/,
      'the page sends a fresh Idempotency-Key (a UUID) with its token request',
    );
    assert.equal(answer.discovery, 'file', 'file discovery is the default');
    const joinConfiguration = await material.inputValue();
    assert.equal(joinConfiguration, answer.joinConfiguration);
    // The JoinConfiguration alone cannot join: its instructions say where the other file goes.
    const usage = page.locator('#material-usage');
    const joinUsage = (await usage.textContent()) ?? '';
    assert.ok(
      joinUsage.includes(`on the node at ${answer.discoveryKubeconfigPath}`),
      `the instructions name ${answer.discoveryKubeconfigPath}: ${joinUsage}`,
    );
    assert.match(joinUsage, /holds no secret/);
    assert.ok(joinUsage.includes(`as join.yaml, then run: ${answer.joinCommand}`), joinUsage);
    // The third format: the discovery kubeconfig, exactly as the API answered it.
    await page.getByRole('radio', { name: 'Discovery kubeconfig' }).check();
    const discoveryKubeconfig = await material.inputValue();
    assert.equal(discoveryKubeconfig, answer.discoveryKubeconfig);
    const kubeconfigUsage = (await usage.textContent()) ?? '';
    assert.ok(
      kubeconfigUsage.startsWith(`Save it on the node at ${answer.discoveryKubeconfigPath},`),
      kubeconfigUsage,
    );
    await page.getByRole('button', { name: 'Copy' }).click();
    await page.getByRole('status').filter({ hasText: 'Copied.' }).waitFor();
    assert.equal(await page.evaluate('navigator.clipboard.readText()'), answer.discoveryKubeconfig);
    await page.getByRole('status').filter({ hasText: 'Issued' }).waitFor();
    // The node administrator copies both texts to the machine, the discovery kubeconfig at the path
    // the instructions name, and it joins with them as they are.
    kubelets.push(
      await joinWith(
        { joinConfiguration, discoveryKubeconfig, discoveryKubeconfigPath: answer.discoveryKubeconfigPath },
        name,
      ),
    );
    await page
      .getByRole('status')
      .filter({ hasText: `Verified: node ${name}` })
      .waitFor({ timeout: 60_000 });
    await h.waitForFlavor(name, h.sweet);
    const steps = await page.locator('#steps li.done').allTextContents();
    assert.deepEqual(steps, ['Issued', 'Bound to a node', 'Verified']);
    await page.getByRole('cell', { name: 'Verified' }).first().waitFor();
    await page.getByRole('radio', { name: 'kubeadm JoinConfiguration' }).check();
    assert.equal(await material.inputValue(), joinConfiguration);
    await screenshot(page, joinConfiguration);
    // The cloud-init form of the same material, then off the page on request.
    await page.getByRole('radio', { name: 'cloud-init' }).check();
    assert.match(await material.inputValue(), /^#cloud-config/);
    await page.getByRole('button', { name: 'Remove from page' }).click();
    assert.equal(await page.locator('#material').inputValue(), '');
    assert.equal(await page.locator('#material-usage').textContent(), '');
    assert.equal(await page.getByRole('radio', { name: 'Discovery kubeconfig' }).count(), 0);
  });

  it('with token discovery offers no discovery kubeconfig, and the instructions of before', async () => {
    ({ issuer: byToken } = await startTestIssuer(h.env, {
      portal: { enabled: true },
      logLevel: 'silent',
      issuance: { discovery: 'token' },
    }));
    await page.goto(`${byToken.url}/portal/`);
    await page.getByLabel('Your token', { exact: true }).fill(bearer);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByRole('heading', { name: '2. Request a join token' }).waitFor();
    await page.getByRole('radio', { name: 'Any name' }).check();
    await page.getByLabel('Valid for').fill('10m');
    const answered = page.waitForResponse(
      (response) =>
        new URL(response.url()).pathname === '/v1/tokens' && response.request().method() === 'POST',
    );
    await page.getByRole('button', { name: 'Request join token' }).click();
    const answer = (await (await answered).json()) as PlainIssueResponse;
    byTokenId = answer.id;
    assert.equal(answer.discovery, 'token');
    const material = page.getByRole('textbox', { name: 'Join material' });
    await waitFor(async () => (await material.inputValue()) === answer.joinConfiguration, {
      what: 'the token-discovery join configuration on the page',
    });
    assert.equal(
      await page.locator('#material-usage').textContent(),
      `Save it on the node as join.yaml, then run: ${answer.joinCommand}`,
    );
    // Hidden (so out of the accessibility tree and the tab order) and disabled.
    assert.equal(await page.getByRole('radio', { name: 'Discovery kubeconfig' }).count(), 0);
    assert.equal(await page.locator('input[name="format"][value="discoveryKubeconfig"]').isDisabled(), true);
    assert.equal(await page.locator('#material-section').getByRole('radio').count(), 2);
    await page.getByRole('radio', { name: 'cloud-init' }).check();
    assert.equal(await material.inputValue(), answer.cloudInit);
    assert.equal(
      await page.locator('#material-usage').textContent(),
      'Give this to the new machine as its cloud-init user data: it writes the configuration and joins.',
    );
  });

  it("binds a token to the machine's TPM: no secret on the page, the script, refusals where they belong", async () => {
    // The issuer knows TPM manufacturer A (root and intermediate), as --tpm-manufacturer-ca-file.
    const dir = tempDirForThisProcess('nodeflavor-portal-tpm-');
    const manufacturerCaFile = join(dir, 'tpm-manufacturers.pem');
    writeFileSync(
      manufacturerCaFile,
      ['manufacturer-a-root.pem', 'manufacturer-a-intermediate.pem']
        .map((file) => readFileSync(join(TPM_FIXTURES, file), 'utf8'))
        .join(''),
    );
    const port = await freePort();
    const started = await startTestIssuer(h.env, {
      listen: { host: '127.0.0.1', port },
      portal: { enabled: true },
      logLevel: 'silent',
      issuance: { attestation: { url: `https://127.0.0.1:${port}`, manufacturerCaFile } },
    });
    byTpm = started.issuer;
    byTpmCa = started.ca.certPem;
    // What `tpm2_nvread 0x1c00002 | openssl x509 -inform der` prints on the machine.
    const ekCertificate = new X509Certificate(readFileSync(join(TPM_FIXTURES, 'ek-cert.der'))).toString();
    assert.match(ekCertificate, /^-----BEGIN CERTIFICATE-----\n/);

    await page.goto(`${byTpm.url}/portal/`);
    await page.getByLabel('Your token', { exact: true }).fill(bearer);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByRole('heading', { name: '2. Request a join token' }).waitFor();
    await page.getByRole('group', { name: "Bind to this machine's TPM (optional)" }).waitFor();
    await page.getByLabel('EK certificate or EK public key (PEM)').fill(ekCertificate);
    await page.locator('#ek-kind').filter({ hasText: 'An EK certificate' }).waitFor();

    // Re-join without an exact node name: the API's 400, next to the node name.
    await page.getByRole('radio', { name: 'Node names matching a pattern' }).check();
    await page.getByLabel('Node name pattern', { exact: true }).fill('portal-tpm-*');
    await page.getByLabel('Allow re-join after re-install').check();
    const posted = () =>
      page.waitForResponse(
        (response) =>
          new URL(response.url()).pathname === '/v1/tokens' && response.request().method() === 'POST',
      );
    const refusedAnswer = posted();
    expectedBadRequests += 1;
    await page.getByRole('button', { name: 'Request join token' }).click();
    const refused = await refusedAnswer;
    assert.equal(refused.status(), 400);
    const refusedBody = refused.request().postDataJSON() as Record<string, unknown>;
    assert.deepEqual(refusedBody.attestation, { ekCertificate, allowRejoin: true });
    assert.equal(refusedBody.nodeName, undefined);
    assert.equal(refusedBody.nodeNamePattern, 'portal-tpm-*');
    const nodeError = page.locator('fieldset:has(#node) #node-error');
    await nodeError.waitFor();
    assert.equal(
      await nodeError.textContent(),
      'Node name is required with attestation.allowRejoin: a machine re-joins under its one name',
    );
    assert.equal(await page.locator('#node').getAttribute('aria-invalid'), 'true');
    assert.match((await page.locator('#node').getAttribute('aria-describedby')) ?? '', /\bnode-error\b/);
    assert.equal(await page.locator('#material-section').isVisible(), false);

    // With the exact node name: a token bound to that TPM.
    const name = uniqueName('portal-tpm');
    await page.getByRole('radio', { name: 'Exactly this node name' }).check();
    await page.getByLabel('Node name', { exact: true }).fill(name);
    const issuedAnswer = posted();
    await page.getByRole('button', { name: 'Request join token' }).click();
    const issued = await issuedAnswer;
    assert.equal(issued.status(), 201, await issued.text());
    const answer = (await issued.json()) as IssueResponse;
    byTpmTokenId = answer.id;
    assert.equal(answer.attested, true);
    assert.equal(answer.bootstrapToken, null);
    assert.equal(answer.flavorToken, null);
    assert.ok(answer.attestScript?.startsWith('#!/bin/bash\n'));
    assert.equal(await nodeError.isVisible(), false, 'the refusal of before is gone');

    // The cloud-init (which installs and runs the script) is shown first; then the script and
    // the template; the discovery kubeconfig last (file discovery).
    const material = page.getByRole('textbox', { name: 'Join material' });
    await waitFor(async () => (await material.inputValue()) === answer.cloudInit, {
      what: 'the attested cloud-init on the page',
    });
    assert.deepEqual(
      (await page.locator('#format-choices label:not([hidden])').allTextContents()).map((t) => t.trim()),
      [
        'cloud-init (use this: installs and runs the attestation script)',
        'Attestation script (nodeflavor-attest)',
        'kubeadm JoinConfiguration template (the script fills it in; not usable alone)',
        'Discovery kubeconfig',
      ],
    );
    assert.equal(await page.getByRole('radio', { name: 'cloud-init' }).isChecked(), true);
    const notice = (await page.locator('#material-notice').textContent()) ?? '';
    assert.match(notice, /^No secret in it: this material works only on the machine with the TPM/);
    assert.match(notice, /Anyone may read it, .* reach the machine unaltered/);
    const usage = page.locator('#material-usage');
    assert.match(
      (await usage.textContent()) ?? '',
      /runs the script, which proves the machine holds the TPM/,
    );
    const shown: string[] = [answer.cloudInit];
    await page.getByRole('radio', { name: 'Attestation script (nodeflavor-attest)', exact: true }).check();
    const script = await material.inputValue();
    assert.equal(script, answer.attestScript);
    assert.ok(script.startsWith('#!/bin/bash\n'), script.slice(0, 40));
    assert.match(
      (await usage.textContent()) ?? '',
      /^The script the cloud-init installs as \/usr\/local\/sbin\/nodeflavor-attest/,
    );
    shown.push(script);
    await page.getByRole('radio', { name: 'kubeadm JoinConfiguration template' }).check();
    const template = await material.inputValue();
    assert.equal(template, answer.joinConfiguration);
    assert.ok(template.includes('NODEFLAVOR-ATTESTED-BOOTSTRAP-TOKEN'), 'placeholders where the tokens go');
    assert.match((await usage.textContent()) ?? '', /^A template, not usable alone/);
    shown.push(template);
    await page.getByRole('radio', { name: 'Discovery kubeconfig' }).check();
    shown.push(await material.inputValue());
    // No bootstrap token (id.secret) and no flavor token anywhere: not in any format, not on the page.
    const pageText = await page.evaluate(
      `document.body.innerText + [...document.querySelectorAll('textarea, input')].map((e) => e.value).join('\\n')`,
    );
    for (const text of [...shown, String(pageText)]) {
      assert.doesNotMatch(text, /\b[a-z0-9]{6}\.[a-z0-9]{16}\b/, 'a bootstrap token on the page');
      assert.doesNotMatch(text, /\b[a-z2-7]{52}\b/, 'a flavor token on the page');
    }
    await assert.rejects(
      h.env.core.readNamespacedSecret({
        namespace: 'kube-system',
        name: `bootstrap-token-${answer.tokenID}`,
      }),
      (error: { code?: number }) => error.code === 404,
      'no bootstrap Secret before the machine proves itself',
    );

    // The watch: bound to a TPM, not attested yet.
    await page
      .getByRole('status')
      .filter({ hasText: 'Issued: waiting for the machine with its TPM to prove itself and join.' })
      .waitFor();
    const facts = page.locator('#attestation-facts');
    await facts.filter({ hasText: 'attested 0 times' }).waitFor();
    assert.match(
      (await facts.textContent()) ?? '',
      /EK certificate, from .*; re-join allowed\): attested 0 times\.$/,
    );
    assert.equal(await page.locator('#attestation-refusal').isVisible(), false);

    // The material copied to a machine with another TPM: its challenge is refused, and the page says so.
    const another = await postJson(`${byTpm.url}/v1/attestations/${answer.tokenID}/challenge`, byTpmCa, {
      ekPublic: readFileSync(join(TPM_FIXTURES, 'tpm-b-ek.pub')).toString('base64'),
      akPublic: readFileSync(join(TPM_FIXTURES, 'ak.pub')).toString('base64'),
    });
    assert.equal(another.status, 403, another.text);
    const refusal = page.getByRole('alert').filter({ hasText: 'Last refusal: EKMismatch: ' });
    await refusal.waitFor({ timeout: 15_000 });
    assert.match(
      (await refusal.textContent()) ?? '',
      /^Last refusal: EKMismatch: .*\. The material was tried on a machine with another TPM\.$/,
    );
    assert.match((await facts.textContent()) ?? '', /attested 0 times/);

    // Off the page on request, and the page's formats are the plain ones again.
    await page.getByRole('button', { name: 'Remove from page' }).click();
    assert.equal(await page.locator('#material').inputValue(), '');
    assert.equal(await page.getByRole('radio', { name: /^Attestation script/ }).count(), 0);
    assert.deepEqual(
      (await page.locator('#format-choices label:not([hidden])').allTextContents()).map((t) => t.trim()),
      ['kubeadm JoinConfiguration', 'cloud-init'],
    );
  });

  it('kept the bearer out of URLs, cookies and storage; broke no CSP rule; every input is labelled', async () => {
    assert.ok(requests.length >= 6);
    for (const request of requests) {
      assert.ok(!request.url.includes(bearer), `a URL held the bearer: ${request.url.slice(0, 80)}`);
      if (new URL(request.url).pathname.startsWith('/v1/'))
        assert.match(
          request.authorization ?? '',
          /^Bearer /,
          `${request.url} carried the bearer in its header`,
        );
    }
    // (Expressions as strings: they run in the page, whose DOM types this Node project does not load.)
    const stored = await page.evaluate(
      '({ local: localStorage.length, session: sessionStorage.length, cookie: document.cookie })',
    );
    assert.deepEqual(stored, { local: 0, session: 0, cookie: '' });
    assert.deepEqual(await page.context().cookies(), []);
    assert.deepEqual(
      problems.filter((p) => !p.includes('401')),
      [],
      'no script error and no CSP violation',
    );
    const unlabelled = await page.evaluate(
      `[...document.querySelectorAll('input, textarea, select, button')]
        .filter((el) => !el.labels?.length && !el.textContent.trim() && !el.getAttribute('aria-label'))
        .map((el) => el.id || el.outerHTML.slice(0, 60))`,
    );
    assert.deepEqual(unlabelled, []);
  });

  it('signing out forgets the bearer: the next request would need a new sign-in', async () => {
    await page.getByRole('button', { name: 'Sign out' }).click();
    await page.getByRole('heading', { name: '1. Sign in' }).waitFor();
    assert.equal(await page.locator('#request-section').isVisible(), false);
    assert.equal(await page.locator('#tokens').textContent(), '');
  });
});

/**
 * The README's screenshot, with the secrets blanked out (UPDATE_SCREENSHOT=1), else a scratch
 * copy in a temp dir of this process (removed when it exits: a run leaves nothing in /tmp).
 */
async function screenshot(page: Page, joinConfiguration: string): Promise<void> {
  const update = process.env.UPDATE_SCREENSHOT === '1';
  const dir = update
    ? join(import.meta.dirname, '..', '..', 'docs', 'images')
    : tempDirForThisProcess('nodeflavor-portal-');
  mkdirSync(dir, { recursive: true });
  const blanked = joinConfiguration
    .replace(/\b[a-z0-9]{6}\.[a-z0-9]{16}\b/g, 'abcdef.0123456789abcdef')
    .replace(/\b[a-z2-7]{52}\b/g, 'x'.repeat(52));
  const setMaterial = (text: string) =>
    page.evaluate(`document.getElementById('material').value = ${JSON.stringify(text)}`);
  await setMaterial(blanked);
  await page.screenshot({
    path: join(dir, update ? 'portal.png' : 'nodeflavor-portal-e2e.png'),
    fullPage: true,
  });
  await setMaterial(joinConfiguration);
}
