// The token issuer on the real control plane: the HTTPS API (TokenReview authentication,
// SubjectAccessReview authorisation), the join material a simulated kubelet uses as-is,
// revocation and expiry as the API server enforces them, every error path minting nothing,
// indistinguishability of flavors, the kubectl-flavor CLI, and no secret in any log or error.
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { request as httpsRequest } from 'node:https';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { setTimeout as delay } from 'node:timers/promises';
import { promisify } from 'node:util';
import { AuthenticationV1Api, CustomObjectsApi } from '@kubernetes/client-node';
import { parse } from 'yaml';
import { keyRingFromSecretData, keyRingKeys } from '../../src/flavor/keyring.ts';
import type { CertificateAuthority } from '../../src/pki/certs.ts';
import { KUBEADM_BOOTSTRAP_GROUP } from '../../src/tokenissuer/config.ts';
import type { PlainIssueResponse } from '../../src/tokenissuer/response.ts';
import type { RunningIssuer } from '../../src/tokenissuer/server.ts';
import { applyObjects } from './cluster/apply.ts';
import { parseJoinConfiguration } from './kubelet-sim/join-config.ts';
import { JoinError, SimulatedKubelet } from './kubelet-sim/kubelet.ts';
import { createBootstrapToken, tokenKubeConfig } from './support/bootstrap.ts';
import { type E2EEnvironment, e2eEnvironment } from './support/environment.ts';
import {
  bootstrapSecretNames as bootstrapSecretNamesOf,
  clusterRoleBindingObject,
  clusterRoleObject,
  flavoredTokenNames as flavoredTokenNamesOf,
  serviceAccountObject,
  serviceAccountToken as serviceAccountTokenOf,
  startTestIssuer,
  useFlavorClassesRole,
} from './support/issuer.ts';
import { kubectlFlavor } from './support/kubectl-flavor-cli.ts';
import {
  ensureNamespace,
  installCrds,
  type JoinFiles,
  nodeFiles,
  OPERATOR_NAMESPACE,
} from './support/nodeflavor.ts';
import { uniqueName, waitFor } from './support/wait.ts';

const _run = promisify(execFile);
const _repoRoot = join(import.meta.dirname, '..', '..');
const PORTAL_NAMESPACE = 'nodeflavor-e2e-issuer';
const FIELD_MANAGER = 'nodeflavor-e2e-issuer';
/**
 * No controller runs in this suite, so nothing would approve the CSRs of nodeflavor's own
 * bootstrap group: its tokens carry kubeadm's, which kube-controller-manager auto-approves (the
 * supported setting for clusters that keep auto-approval; see name-squatting.test.ts for what
 * that leaves possible). Every other suite uses the default group with the controller approving.
 */
const DEFAULT_GROUP = KUBEADM_BOOTSTRAP_GROUP;

interface Answer {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  text: string;
}

describe('token issuer on the real control plane', () => {
  let env: E2EEnvironment;
  let issuer: RunningIssuer;
  /** One CA signs the serving certificate of every issuer server the tests start. */
  let tlsCa: CertificateAuthority | undefined;
  let portalToken: string;
  let adminToken: string;
  const kubelets: SimulatedKubelet[] = [];
  const servers: RunningIssuer[] = [];
  /** Every log line of every issuer server and every error text, for the no-leak check. */
  const logLines: string[] = [];
  const errorTexts: string[] = [];
  /** Every secret issued during the run. */
  const issuedSecrets: string[] = [];

  const logStream = { write: (line: string) => void logLines.push(line) };

  async function startIssuer(overrides: Record<string, unknown> = {}): Promise<RunningIssuer> {
    const started = await startTestIssuer(
      env,
      {
        rateLimit: { perCaller: { capacity: 1000, refillPerSecond: 100 } },
        logLevel: 'debug',
        issuance: { authExtraGroups: DEFAULT_GROUP },
        ...overrides,
      },
      { logStream, ...(tlsCa ? { ca: tlsCa } : {}) },
    );
    tlsCa = started.ca;
    servers.push(started.issuer);
    return started.issuer;
  }

  function call(
    server: RunningIssuer,
    method: string,
    path: string,
    options: {
      token?: string;
      body?: unknown;
      raw?: string;
      contentType?: string;
      headers?: Record<string, string>;
    } = {},
  ): Promise<Answer> {
    const payload = options.raw ?? (options.body === undefined ? undefined : JSON.stringify(options.body));
    const headers: Record<string, string> = { ...options.headers };
    if (options.token) headers.authorization = `Bearer ${options.token}`;
    if (payload !== undefined) {
      headers['content-type'] = options.contentType ?? 'application/json';
      headers['content-length'] = String(Buffer.byteLength(payload));
    }
    return new Promise((resolve, reject) => {
      const req = httpsRequest(new URL(path, server.url), { method, headers, ca: tlsCa?.certPem }, (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (chunk: Buffer) => chunks.push(chunk));
        res.on('end', () => {
          const answer = {
            status: res.statusCode ?? 0,
            headers: res.headers,
            text: Buffer.concat(chunks).toString('utf8'),
          };
          if (answer.status >= 400) errorTexts.push(answer.text);
          resolve(answer);
        });
      });
      req.on('error', reject);
      req.end(payload);
    });
  }

  const issue = async (token: string, body: unknown, headers?: Record<string, string>) => {
    const answer = await call(issuer, 'POST', '/v1/tokens', { token, body, ...(headers ? { headers } : {}) });
    assert.equal(answer.status, 201, answer.text);
    const issued = JSON.parse(answer.text) as PlainIssueResponse;
    issuedSecrets.push(issued.bootstrapToken, issued.bootstrapToken.split('.')[1] ?? '', issued.flavorToken);
    return { answer, issued };
  };

  function errorOf(answer: Answer): {
    code: string;
    message: string;
    fields?: { field: string; message: string }[];
  } {
    return (JSON.parse(answer.text) as { error: { code: string; message: string } }).error;
  }

  const bootstrapSecretNames = () => bootstrapSecretNamesOf(env);
  const flavoredTokenNames = () => flavoredTokenNamesOf(env);

  /** Runs `action` and asserts it created no bootstrap Secret and no FlavoredToken. */
  async function mintsNothing<T>(action: () => Promise<T>): Promise<T> {
    const [secrets, tokens] = [await bootstrapSecretNames(), await flavoredTokenNames()];
    const result = await action();
    const newSecrets = [...(await bootstrapSecretNames())].filter((n) => !secrets.has(n));
    const newTokens = [...(await flavoredTokenNames())].filter((n) => !tokens.has(n));
    assert.deepEqual(newSecrets, [], 'no bootstrap Secret left behind');
    assert.deepEqual(newTokens, [], 'no FlavoredToken left behind');
    return result;
  }

  async function joinNode(material: JoinFiles, name: string, timeoutMs = 30_000) {
    const joinConfiguration = typeof material === 'string' ? material : material.joinConfiguration;
    const kubelet = new SimulatedKubelet(name, parseJoinConfiguration(joinConfiguration), {
      timeoutMs,
      readFile: nodeFiles(material),
    });
    kubelets.push(kubelet);
    await kubelet.join();
    return kubelet;
  }

  const serviceAccountToken = (name: string) => serviceAccountTokenOf(env, PORTAL_NAMESPACE, name);

  /** The bootstrap signer's JWS entries in kube-public/cluster-info, by token ID. */
  async function clusterInfoSignatures(): Promise<Set<string>> {
    const info = await env.core.readNamespacedConfigMap({ name: 'cluster-info', namespace: 'kube-public' });
    return new Set(
      Object.keys(info.data ?? {})
        .filter((key) => key.startsWith('jws-kubeconfig-'))
        .map((key) => key.slice('jws-kubeconfig-'.length)),
    );
  }

  /**
   * Until the API server refuses `token` (401). It caches a successful authentication for 10 s, so
   * a token revoked or expired right after use still works that long (FACTS.md).
   */
  async function untilRefused(token: string): Promise<void> {
    await waitFor(
      () =>
        tokenKubeConfig(env, token)
          .makeApiClient(AuthenticationV1Api)
          .createSelfSubjectReview({ body: {} })
          .then(
            () => false,
            (error: { code?: number }) => error.code === 401,
          ),
      { what: 'the API server to refuse the token', timeoutMs: 30_000, intervalMs: 500 },
    );
  }

  before(async () => {
    env = await e2eEnvironment();
    await installCrds(env);
    await ensureNamespace(env, OPERATOR_NAMESPACE);
    await ensureNamespace(env, PORTAL_NAMESPACE);
    const flavorClass = (name: string) => ({
      apiVersion: 'nodeflavor.io/v1alpha1',
      kind: 'FlavorClass',
      metadata: { name },
      spec: { description: `${name} nodes` },
    });
    await applyObjects(
      env.kubeconfigPath,
      [
        flavorClass('sweet'),
        flavorClass('sour'),
        serviceAccountObject('portal', PORTAL_NAMESPACE),
        serviceAccountObject('portal-admin', PORTAL_NAMESPACE),
        useFlavorClassesRole('nodeflavor-e2e-use-sweet', ['sweet']),
        useFlavorClassesRole('nodeflavor-e2e-use-any'),
        clusterRoleBindingObject(
          'nodeflavor-e2e-portal',
          'nodeflavor-e2e-use-sweet',
          'portal',
          PORTAL_NAMESPACE,
        ),
        clusterRoleBindingObject(
          'nodeflavor-e2e-portal-admin',
          'nodeflavor-e2e-use-any',
          'portal-admin',
          PORTAL_NAMESPACE,
        ),
      ],
      FIELD_MANAGER,
    );
    portalToken = await serviceAccountToken('portal');
    adminToken = await serviceAccountToken('portal-admin');
    issuer = await startIssuer();
    await waitFor(async () => (await call(issuer, 'GET', '/readyz')).status === 200, {
      what: 'the issuer to be ready',
    });
  });

  after(async () => {
    for (const kubelet of kubelets) kubelet.stop();
    for (const server of servers) await server.close();
  });

  it('issues a sweet token that a kubelet joins with as-is; the Node carries the flavor token', async () => {
    const { answer, issued } = await issue(portalToken, { flavorClassName: 'sweet' });
    assert.equal(answer.headers['cache-control'], 'no-store');
    assert.match(issued.id, /^ft-[a-z0-9]{6}$/);
    assert.ok(!answer.text.includes('sweet'), 'the answer does not name the flavor');

    const name = uniqueName('issued');
    await joinNode(issued, name);
    const node = await env.core.readNode({ name });
    const label = node.metadata?.labels?.['nodeflavor.io/token'] ?? '';
    assert.match(label, /^[a-z2-7]{52}$/);
    assert.equal(label, issued.flavorToken);
    assert.ok(
      node.spec?.taints?.some((t) => t.key === 'nodeflavor.io/unverified' && t.effect === 'NoSchedule'),
    );

    const record = (await env.kubeConfig.makeApiClient(CustomObjectsApi).getClusterCustomObject({
      group: 'nodeflavor.io',
      version: 'v1alpha1',
      plural: 'flavoredtokens',
      name: issued.id,
    })) as {
      metadata: { labels: Record<string, string>; annotations: Record<string, string> };
      spec: { flavorClassName: string; expiresAt?: string };
      status?: unknown;
    };
    assert.equal(record.spec.flavorClassName, 'sweet');
    assert.equal(record.metadata.labels['nodeflavor.io/token-id'], issued.tokenID);
    assert.equal(record.metadata.annotations['nodeflavor.io/issued'], undefined, 'two writes: no mark');
    assert.equal(record.spec.expiresAt, issued.expiresAt, 'the absolute expiry, the Secret’s own');
    // The status is the controller's to write (none runs here); the API derives the expiry itself.
    assert.equal(record.status, undefined);

    const secret = await env.core.readNamespacedSecret({
      name: `bootstrap-token-${issued.tokenID}`,
      namespace: 'kube-system',
    });
    const data = (key: string) => Buffer.from(secret.data?.[key] ?? '', 'base64').toString('utf8');
    assert.equal(data('auth-extra-groups'), DEFAULT_GROUP);
    assert.equal(data('description'), 'nodeflavor join token');
    assert.equal(data('expiration'), issued.expiresAt);
    assert.equal(data('usage-bootstrap-authentication'), 'true');
    assert.equal(data('usage-bootstrap-signing'), '', 'file discovery needs no cluster-info signature');
    assert.equal(secret.metadata?.ownerReferences?.[0]?.name, issued.id);

    const status = await call(issuer, 'GET', `/v1/tokens/${issued.tokenID}`, { token: portalToken });
    assert.equal(status.status, 200);
    const view = JSON.parse(status.text) as { flavor: string; expiresAt: string };
    assert.equal(view.flavor, 'sweet');
    assert.equal(view.expiresAt, issued.expiresAt, 'the expiry is derived before the controller writes it');
  });

  it('revoke deletes the bootstrap Secret at once: a second kubelet cannot join with the same material', async () => {
    const { issued } = await issue(portalToken, { flavorClassName: 'sweet', maxUses: 2 });
    await joinNode(issued, uniqueName('before-revoke'));
    const revoked = await call(issuer, 'DELETE', `/v1/tokens/${issued.id}`, { token: portalToken });
    assert.equal(revoked.status, 200, revoked.text);
    assert.equal((JSON.parse(revoked.text) as { state: string }).state, 'Revoked');
    assert.equal((await bootstrapSecretNames()).has(`bootstrap-token-${issued.tokenID}`), false);
    // File discovery involves no token, so the TLS bootstrap is the gate: the API server refuses
    // the token once its 10 s authentication cache has let go of the first join's success. (With
    // nodeflavor's own group, the controller also denies a revoked token's CSR at once.)
    await untilRefused(issued.bootstrapToken);
    await assert.rejects(joinNode(issued, uniqueName('after-revoke'), 5_000), /401 Unauthorized/);
  });

  it('by default an issued token adds no jws-kubeconfig-<id> entry to kube-public/cluster-info', async () => {
    const { issued } = await issue(portalToken, { flavorClassName: 'sweet' });
    // The control: a signing token created after it. Once the bootstrap signer has signed that
    // one, it has re-signed cluster-info over a set of Secrets that already held ours.
    const control = await createBootstrapToken(env, { expiresAt: new Date(Date.now() + 600_000) });
    try {
      await waitFor(async () => (await clusterInfoSignatures()).has(control.id), {
        what: "the bootstrap signer to sign the control token's entry",
        timeoutMs: 30_000,
      });
      assert.equal((await clusterInfoSignatures()).has(issued.tokenID), false);
      assert.equal(issued.discovery, 'file');
      assert.equal(
        parse(issued.joinConfiguration).discovery.file.kubeConfigPath,
        '/etc/kubernetes/nodeflavor-discovery.conf',
      );
    } finally {
      await env.core.deleteNamespacedSecret({
        name: `bootstrap-token-${control.id}`,
        namespace: 'kube-system',
      });
    }
  });

  it('GET /v1/discovery: the kubeconfig a machine installs once; a kubelet joins with it and any JoinConfiguration', async () => {
    const answer = await call(issuer, 'GET', '/v1/discovery', { token: portalToken });
    assert.equal(answer.status, 200, answer.text);
    const info = JSON.parse(answer.text) as {
      discovery: string;
      kubeconfig: string;
      kubeconfigPath: string;
      caCertHash: string;
    };
    assert.equal(info.discovery, 'file');
    assert.equal(info.caCertHash, env.caCertHash);
    const cluster = (parse(info.kubeconfig) as { clusters: { cluster: Record<string, string> }[] })
      .clusters[0]?.cluster;
    assert.equal(Buffer.from(cluster?.['certificate-authority-data'] ?? '', 'base64').toString(), env.caPem);
    assert.equal(cluster?.server, env.server);
    assert.equal((await call(issuer, 'GET', '/v1/discovery')).status, 401, 'only for authenticated callers');

    const { issued } = await issue(portalToken, { flavorClassName: 'sweet' });
    assert.equal(issued.discoveryKubeconfig, info.kubeconfig);
    const name = uniqueName('image');
    await joinNode(
      {
        joinConfiguration: issued.joinConfiguration,
        discoveryKubeconfig: info.kubeconfig,
        discoveryKubeconfigPath: info.kubeconfigPath,
      },
      name,
    );
    assert.equal(
      (await env.core.readNode({ name })).metadata?.labels?.['nodeflavor.io/token'],
      issued.flavorToken,
    );
  });

  it('token discovery (opt-in): signs, joins by the JWS and CA pin, and refuses to fill cluster-info', async () => {
    const byToken = await startIssuer({
      issuance: { authExtraGroups: DEFAULT_GROUP, discovery: 'token' },
    });
    const answer = await call(byToken, 'POST', '/v1/tokens', {
      token: portalToken,
      body: { flavorClassName: 'sweet', maxUses: 0 },
    });
    assert.equal(answer.status, 201, answer.text);
    const issued = JSON.parse(answer.text) as PlainIssueResponse;
    issuedSecrets.push(issued.bootstrapToken, issued.bootstrapToken.split('.')[1] ?? '', issued.flavorToken);
    assert.equal(issued.discovery, 'token');
    const discovery = parse(issued.joinConfiguration).discovery;
    assert.deepEqual(discovery.bootstrapToken.caCertHashes, [env.caCertHash]);
    await joinNode(issued.joinConfiguration, uniqueName('by-token'));
    assert.ok((await clusterInfoSignatures()).has(issued.tokenID), 'the signer signed it');

    // cluster-info now carries at least this live token's signature: with a limit of 1, nothing more.
    const full = await startIssuer({
      issuance: { authExtraGroups: DEFAULT_GROUP, discovery: 'token', maxClusterInfoSignatures: 1 },
    });
    const refused = await mintsNothing(() =>
      call(full, 'POST', '/v1/tokens', { token: portalToken, body: { flavorClassName: 'sweet' } }),
    );
    assert.equal(refused.status, 503, refused.text);
    assert.match(errorOf(refused).message, /cluster-info already carries \d+ token signatures \(limit 1/);
    await call(byToken, 'DELETE', `/v1/tokens/${issued.id}`, { token: portalToken });
  });

  it('answers sweet and sour alike: same keys, same byte lengths', async () => {
    const sweet = await issue(adminToken, { flavorClassName: 'sweet' });
    const sour = await issue(adminToken, { flavorClassName: 'sour' });
    assert.deepEqual(Object.keys(sweet.issued), Object.keys(sour.issued));
    assert.equal(Buffer.byteLength(sweet.answer.text), Buffer.byteLength(sour.answer.text));
    for (const key of Object.keys(sweet.issued) as (keyof PlainIssueResponse)[]) {
      assert.equal(String(sweet.issued[key]).length, String(sour.issued[key]).length, `length of ${key}`);
    }
    assert.equal(sweet.answer.headers['content-length'], sour.answer.headers['content-length']);
  });

  it('kubectl auth whoami with a sweet and a sour token shows the same groups', async () => {
    const sweet = await issue(adminToken, { flavorClassName: 'sweet' });
    const sour = await issue(adminToken, { flavorClassName: 'sour' });
    const whoami = async (token: string) => {
      const review = await tokenKubeConfig(env, token)
        .makeApiClient(AuthenticationV1Api)
        .createSelfSubjectReview({ body: {} });
      return review.status?.userInfo ?? {};
    };
    const [sweetUser, sourUser] = [
      await whoami(sweet.issued.bootstrapToken),
      await whoami(sour.issued.bootstrapToken),
    ];
    assert.equal(sweetUser.username, `system:bootstrap:${sweet.issued.tokenID}`);
    assert.deepEqual([...(sweetUser.groups ?? [])].sort(), [...(sourUser.groups ?? [])].sort());
    assert.ok(sweetUser.groups?.includes(DEFAULT_GROUP));
  });

  it('an Idempotency-Key retry returns the same token and creates one FlavoredToken', async () => {
    const key = uniqueName('order');
    const before = await flavoredTokenNames();
    const first = await issue(
      portalToken,
      { flavorClassName: 'sweet', ttl: '2h' },
      { 'idempotency-key': key },
    );
    const retry = await issue(
      portalToken,
      { ttl: '2h', flavorClassName: 'sweet' },
      { 'idempotency-key': key },
    );
    assert.equal(retry.issued.tokenID, first.issued.tokenID);
    assert.equal(retry.answer.text, first.answer.text);
    const created = [...(await flavoredTokenNames())].filter((n) => !before.has(n));
    assert.deepEqual(created, [first.issued.id]);

    const mismatch = await mintsNothing(() =>
      call(issuer, 'POST', '/v1/tokens', {
        token: portalToken,
        body: { flavorClassName: 'sweet', ttl: '3h' },
        headers: { 'idempotency-key': key },
      }),
    );
    assert.equal(mismatch.status, 409);
    assert.match(errorOf(mismatch).message, /Idempotency-Key was already used with a different request body/);
  });

  describe('every error path answers with its status and a clear message, minting nothing', () => {
    const cases: {
      what: string;
      status: number;
      message: RegExp;
      send: () => Promise<Answer>;
      check?: (error: ReturnType<typeof errorOf>) => void;
    }[] = [
      {
        what: '400 invalid fields',
        status: 400,
        message: /invalid request: .*ttl/,
        send: () =>
          call(issuer, 'POST', '/v1/tokens', {
            token: portalToken,
            body: { flavorClassName: 'sweet', ttl: 'soon', colour: 'red' },
          }),
        check: (error) => assert.deepEqual(error.fields?.map((f) => f.field).sort(), ['colour', 'ttl']),
      },
      {
        what: '401 without a token',
        status: 401,
        message: /authentication required: send Authorization: Bearer <token>/,
        send: () => call(issuer, 'POST', '/v1/tokens', { body: { flavorClassName: 'sweet' } }),
      },
      {
        what: '401 with a bad token',
        status: 401,
        message: /the bearer token is invalid or expired/,
        send: () =>
          call(issuer, 'POST', '/v1/tokens', {
            token: 'not-a-real-token',
            body: { flavorClassName: 'sweet' },
          }),
      },
      {
        what: '403 for a flavor the caller may not use',
        status: 403,
        message:
          /may not use FlavorClass 'sour': it needs RBAC verb 'use' on flavorclasses.nodeflavor.io 'sour'/,
        send: () =>
          call(issuer, 'POST', '/v1/tokens', { token: portalToken, body: { flavorClassName: 'sour' } }),
      },
      {
        what: '404 for an unknown flavor',
        status: 404,
        message: /FlavorClass 'bitter' not found: create it or check --flavor/,
        send: () =>
          call(issuer, 'POST', '/v1/tokens', { token: adminToken, body: { flavorClassName: 'bitter' } }),
      },
      {
        what: '404 for an unknown token',
        status: 404,
        message: /token 'zzzzzz' not found/,
        send: () => call(issuer, 'GET', '/v1/tokens/zzzzzz', { token: adminToken }),
      },
      {
        what: '413 for a body over 16 KiB',
        status: 413,
        message: /request body too large/,
        send: () =>
          call(issuer, 'POST', '/v1/tokens', {
            token: portalToken,
            body: { flavorClassName: 'sweet', description: 'x'.repeat(17_000) },
          }),
      },
      {
        what: '415 for a body that is not JSON',
        status: 415,
        message: /Content-Type: application\/json/,
        send: () =>
          call(issuer, 'POST', '/v1/tokens', {
            token: portalToken,
            raw: 'flavorClassName=sweet',
            contentType: 'text/plain',
          }),
      },
    ];
    for (const c of cases) {
      it(c.what, async () => {
        const answer = await mintsNothing(c.send);
        assert.equal(answer.status, c.status, answer.text);
        const error = errorOf(answer);
        assert.match(error.message, c.message);
        assert.doesNotMatch(answer.text, /\bat .+\(.*:\d+:\d+\)|node:internal/, 'no stack trace');
        c.check?.(error);
      });
    }

    it('429 when a caller exceeds its rate limit', async () => {
      const limited = await startIssuer({ rateLimit: { perCaller: { capacity: 2, refillPerSecond: 0.01 } } });
      assert.equal((await call(limited, 'GET', '/v1/flavors', { token: portalToken })).status, 200);
      assert.equal((await call(limited, 'GET', '/v1/flavors', { token: portalToken })).status, 200);
      const answer = await mintsNothing(() =>
        call(limited, 'POST', '/v1/tokens', { token: portalToken, body: { flavorClassName: 'sweet' } }),
      );
      assert.equal(answer.status, 429);
      assert.match(errorOf(answer).message, /rate limit exceeded: retry in \d+ s/);
      assert.ok(Number(answer.headers['retry-after']) >= 1);
    });
  });

  it("refuses a token for the API server's audience (401); a token for the issuer is useless against the API server", async () => {
    const plain = await serviceAccountTokenOf(env, PORTAL_NAMESPACE, 'portal', []);
    const answer = await mintsNothing(() =>
      call(issuer, 'POST', '/v1/tokens', { token: plain, body: { flavorClassName: 'sweet' } }),
    );
    assert.equal(answer.status, 401, answer.text);
    assert.equal(errorOf(answer).code, 'Unauthenticated');
    assert.equal((await call(issuer, 'GET', '/v1/flavors', { token: plain })).status, 401);
    // The same ServiceAccount's token for the issuer's audience: accepted here, refused there.
    assert.equal((await call(issuer, 'GET', '/v1/flavors', { token: portalToken })).status, 200);
    await assert.rejects(
      tokenKubeConfig(env, portalToken)
        .makeApiClient(AuthenticationV1Api)
        .createSelfSubjectReview({ body: {} }),
      (error: { code?: number }) => error.code === 401,
    );
  });

  it('a caller sees and revokes only the tokens it issued (404 for others) unless RBAC grants more', async () => {
    await applyObjects(
      env.kubeconfigPath,
      [
        serviceAccountObject('portal-b', PORTAL_NAMESPACE),
        serviceAccountObject('token-admin', PORTAL_NAMESPACE),
        clusterRoleBindingObject(
          'nodeflavor-e2e-portal-b',
          'nodeflavor-e2e-use-sweet',
          'portal-b',
          PORTAL_NAMESPACE,
        ),
        clusterRoleObject('nodeflavor-e2e-token-admin', [
          { apiGroups: ['nodeflavor.io'], resources: ['flavoredtokens'], verbs: ['get', 'delete'] },
        ]),
        clusterRoleBindingObject(
          'nodeflavor-e2e-token-admin',
          'nodeflavor-e2e-token-admin',
          'token-admin',
          PORTAL_NAMESPACE,
        ),
      ],
      FIELD_MANAGER,
    );
    const portalB = await serviceAccountToken('portal-b');
    const tokenAdmin = await serviceAccountToken('token-admin');
    const { issued } = await issue(portalToken, { flavorClassName: 'sweet' });
    // B may use sweet too, yet A's token does not exist for B: the same answer as a missing one.
    const missing = await call(issuer, 'GET', '/v1/tokens/zzzzzz', { token: portalB });
    assert.equal(missing.status, 404);
    for (const ref of [issued.id, issued.tokenID]) {
      for (const method of ['GET', 'DELETE']) {
        const answer = await call(issuer, method, `/v1/tokens/${ref}`, { token: portalB });
        assert.equal(answer.status, 404, `${method} ${ref}: ${answer.text}`);
        assert.equal(answer.text.replace(ref, 'zzzzzz'), missing.text);
      }
    }
    assert.ok((await bootstrapSecretNames()).has(`bootstrap-token-${issued.tokenID}`), 'B revoked nothing');
    // The owner still sees it; a caller with RBAC on flavoredtokens (and no `use`) sees and revokes it.
    assert.equal((await call(issuer, 'GET', `/v1/tokens/${issued.id}`, { token: portalToken })).status, 200);
    const seen = await call(issuer, 'GET', `/v1/tokens/${issued.tokenID}`, { token: tokenAdmin });
    assert.equal(seen.status, 200, seen.text);
    const revoked = await call(issuer, 'DELETE', `/v1/tokens/${issued.id}`, { token: tokenAdmin });
    assert.equal(revoked.status, 200, revoked.text);
    assert.equal((JSON.parse(revoked.text) as { state: string }).state, 'Revoked');
    assert.ok(!(await bootstrapSecretNames()).has(`bootstrap-token-${issued.tokenID}`));
  });

  it('lists only the flavors the caller may use', async () => {
    const portal = await call(issuer, 'GET', '/v1/flavors', { token: portalToken });
    const names = (JSON.parse(portal.text) as { items: { name: string }[] }).items.map((f) => f.name);
    assert.deepEqual(names, ['sweet']);
    const admin = await call(issuer, 'GET', '/v1/flavors', { token: adminToken });
    const all = (JSON.parse(admin.text) as { items: { name: string }[] }).items.map((f) => f.name);
    assert.ok(all.includes('sweet') && all.includes('sour'));
  });

  it('a token past its expiry no longer joins', async () => {
    const expiresAt = new Date(Math.ceil((Date.now() + 8_000) / 1000) * 1000);
    const { issued } = await issue(portalToken, {
      flavorClassName: 'sweet',
      expiresAt: expiresAt.toISOString(),
    });
    assert.equal(issued.expiresAt, expiresAt.toISOString().replace('.000Z', 'Z'));
    const selfReview = () =>
      tokenKubeConfig(env, issued.bootstrapToken)
        .makeApiClient(AuthenticationV1Api)
        .createSelfSubjectReview({ body: {} });
    assert.equal(
      (await selfReview()).status?.userInfo?.username,
      `system:bootstrap:${issued.tokenID}`,
      'valid before',
    );
    // kube-apiserver caches a successful token authentication for 10 s (its token success cache
    // TTL), so the refusal is checked once both the expiry and that cache entry are past.
    const checkedAt = Date.now();
    await delay(Math.max(expiresAt.getTime() + 1_500, checkedAt + 11_000) - Date.now());
    await assert.rejects(
      selfReview(),
      (error: { code?: number }) => error.code === 401,
      'the API server refuses it after',
    );
    await assert.rejects(joinNode(issued, uniqueName('expired'), 5_000), JoinError);
  });

  describe('kubectl-flavor CLI with the admin kubeconfig', () => {
    const cli = (args: string[]) => kubectlFlavor(env.kubeconfigPath, args);
    const keySecret = ['--key-secret', `${OPERATOR_NAMESPACE}/nodeflavor-hmac-keys`];

    it('issue -o join prints a JoinConfiguration a kubelet joins with beside `discovery`; list shows it; revoke revokes it', async () => {
      const issued = await cli([
        'issue',
        '--flavor',
        'sweet',
        '--ttl',
        '1h',
        '-o',
        'join',
        '--bootstrap-group',
        DEFAULT_GROUP,
        ...keySecret,
      ]);
      assert.equal(issued.code, 0, issued.stderr);
      assert.match(issued.stderr, /reads \/etc\/kubernetes\/nodeflavor-discovery\.conf: install it/);
      const settings = parseJoinConfiguration(issued.stdout);
      const tokenId = settings.tlsBootstrapToken.split('.')[0] ?? '';
      issuedSecrets.push(settings.tlsBootstrapToken, settings.tlsBootstrapToken.split('.')[1] ?? '');
      issuedSecrets.push(settings.nodeLabels['nodeflavor.io/token'] ?? '');
      assert.deepEqual(settings.discovery, {
        kind: 'file',
        kubeConfigPath: '/etc/kubernetes/nodeflavor-discovery.conf',
      });
      const discovery = await cli(['discovery']);
      assert.equal(discovery.code, 0, discovery.stderr);
      const asJson = await cli(['discovery', '-o', 'json']);
      assert.equal((JSON.parse(asJson.stdout) as { kubeconfig: string }).kubeconfig, discovery.stdout);
      // The CLI names cluster-info's server; join when this process reaches the cluster there.
      const server = (parse(discovery.stdout) as { clusters: { cluster: { server: string } }[] }).clusters[0]
        ?.cluster.server;
      if (server === env.server) {
        await joinNode(
          {
            joinConfiguration: issued.stdout,
            discoveryKubeconfig: discovery.stdout,
            discoveryKubeconfigPath: '/etc/kubernetes/nodeflavor-discovery.conf',
          },
          uniqueName('cli'),
        );
      }

      const list = await cli(['list']);
      assert.equal(list.code, 0, list.stderr);
      assert.match(
        list.stdout,
        new RegExp(`^ft-${tokenId}\\s+${tokenId}\\s+sweet\\s+0/1\\s+\\S+\\s+Active$`, 'm'),
      );

      const revoked = await cli(['revoke', tokenId]);
      assert.equal(revoked.code, 0, revoked.stderr);
      assert.match(revoked.stdout, new RegExp(`token ft-${tokenId} revoked`));
      assert.equal((await bootstrapSecretNames()).has(`bootstrap-token-${tokenId}`), false);
    });

    it('flavors shows which FlavorClasses you may use; nodes lists the joined nodes', async () => {
      const flavors = await cli(['flavors']);
      assert.equal(flavors.code, 0, flavors.stderr);
      assert.match(flavors.stdout, /^NAME\s+YOU-MAY-USE\s+DESCRIPTION$/m);
      assert.match(flavors.stdout, /^sweet\s+yes\s+sweet nodes$/m);
      const nodes = await cli(['nodes']);
      assert.equal(nodes.code, 0, nodes.stderr);
      assert.match(nodes.stdout, /^NODE\s+FLAVOR\s+STATE\s+VERIFIED-AT\s+TOKEN-ID\s+REASON$/m);
      // No controller runs here: the joined node waits, quarantined, for verification.
      assert.match(nodes.stdout, /^issued-[a-z0-9]+\s+<none>\s+unverified\s.*\sNotJudgedYet$/m);
    });

    it('exits 2 with one line on bad usage', async () => {
      for (const args of [
        ['issue', '-o', 'join'],
        ['issue', '--flavor', 'sweet', '--bogus'],
        ['frobnicate'],
      ]) {
        const result = await mintsNothing(() => cli(args));
        assert.equal(result.code, 2, `${args.join(' ')}: ${result.stderr}`);
        assert.equal(result.stderr.trim().split('\n').length, 1, result.stderr);
        assert.match(result.stderr, /^kubectl-flavor: /);
        errorTexts.push(result.stderr);
      }
    });

    it('exits 1 with one line for an unknown flavor', async () => {
      const result = await mintsNothing(() => cli(['issue', '--flavor', 'nope', ...keySecret]));
      assert.equal(result.code, 1, result.stderr);
      assert.equal(result.stderr.trim().split('\n').length, 1);
      assert.match(
        result.stderr,
        /^kubectl-flavor: FlavorClass 'nope' not found: create it or check --flavor/,
      );
      errorTexts.push(result.stderr);
    });
  });

  it('no issued secret, flavor token or HMAC key appears in any log line or error text', async () => {
    const keySecret = await env.core.readNamespacedSecret({
      name: 'nodeflavor-hmac-keys',
      namespace: OPERATOR_NAMESPACE,
    });
    const ring = keyRingFromSecretData(keySecret.data ?? {});
    const keyForms = keyRingKeys(ring).flatMap((k) => [
      k.key.toString('base64'),
      k.key.toString('base64url'),
      k.key.toString('hex'),
      k.key.toString('latin1'),
    ]);
    const secrets = [...issuedSecrets, ...keyForms, portalToken, adminToken].filter((s) => s.length >= 16);
    assert.ok(issuedSecrets.length >= 10, 'the run issued tokens to look for');
    assert.ok(logLines.length > 10, 'the server logged');
    assert.ok(logLines.some((line) => line.includes('token issued')));
    const haystacks = [...logLines, ...errorTexts];
    for (const secret of secrets) {
      const leak = haystacks.find((text) => text.includes(secret));
      assert.equal(leak, undefined, 'a secret leaked into a log line or an error');
    }
    // The records hold no secret either.
    const records = JSON.stringify(
      await env.kubeConfig.makeApiClient(CustomObjectsApi).listClusterCustomObject({
        group: 'nodeflavor.io',
        version: 'v1alpha1',
        plural: 'flavoredtokens',
      }),
    );
    for (const secret of secrets) assert.ok(!records.includes(secret), 'a secret in a FlavoredToken');
  });
});
