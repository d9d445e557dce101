// What `nodeflavor run` checks before it writes (ADR 0003), on the real control plane:
//  - it learns who it is (SelfSubjectReview); run as another identity than the ServiceAccount the
//    admission guard exempts (the admin kubeconfig), it exits at once with one line instead of
//    retrying denied flavor writes forever;
//  - a controller with no admission guard in front of Nodes refuses to start unless told
//    (--allow-unguarded-nodes), and then says so loudly (log and metric);
//  - /healthz answers before anything needs the API server: started while its API server is
//    down (a proxy that drops every connection), it is alive and says it is not ready, naming
//    the start-up check it waits for and why, and it becomes ready once the API server is back
//    (before the fix nothing listened until the checks passed, and it exited after 60 s: the
//    kubelet would restart it in a loop).
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { after, before, describe, it } from 'node:test';
import { CoreV1Api } from '@kubernetes/client-node';
import { KubeReviews } from '../../src/kube/reviews.ts';
import { findRegistration, removeAdmissionRegistration } from '../../src/webhook/admission-registration.ts';
import { applyObjects } from './cluster/apply.ts';
import { freePort } from './cluster/ports.ts';
import type { ManagedProcess } from './cluster/process.ts';
import { TcpProxy } from './cluster/tcp-proxy.ts';
import { operatorKubeconfigVia } from './support/chart.ts';
import type { E2EEnvironment } from './support/environment.ts';
import { metricValue, OPERATOR_NAMESPACE, opsGet } from './support/nodeflavor.ts';
import { operatorFixture } from './support/operator-fixture.ts';
import { uniqueName, waitFor } from './support/wait.ts';

/** The chart's default admission registration name, which the chart's RBAC lets the operator read. */
const REGISTRATION = 'nodeflavor';

describe('nodeflavor run: start-up checks', () => {
  const fx = operatorFixture({ logPrefix: 'nodeflavor-startup-' });
  let env: E2EEnvironment;
  const cleanups: (() => Promise<void>)[] = [];

  before(() => {
    env = fx.env;
  });
  // After the fixture has stopped the operators.
  after(async () => {
    for (const cleanup of cleanups) await cleanup();
  });

  function operator(
    args: string[],
    options: Parameters<typeof fx.start>[1] = {},
  ): { op: ManagedProcess; logPath: string } {
    const op = fx.start(args, options);
    return { op, logPath: fx.logPath(op) };
  }

  /** Waits for the process to exit; its exit code and the lines it wrote that are not JSON log lines. */
  async function exitOf(
    op: ManagedProcess,
    logPath: string,
  ): Promise<{ code: number | null; lines: string[] }> {
    await waitFor(() => !op.running, {
      what: `the operator to exit at once (it kept running:\n${op.lastLines()})`,
      timeoutMs: 30_000,
      intervalMs: 200,
    });
    const code = await op.exited;
    const lines = readFileSync(logPath, 'utf8')
      .split('\n')
      .filter((line) => line.trim() !== '' && !line.startsWith('{'));
    return { code, lines };
  }

  it('refuses to run the controller as an admin identity: one line, at once, nothing registered', async () => {
    const admin = await new KubeReviews(env.kubeConfig).whoAmI();
    const name = uniqueName('startup-admin');
    const tlsSecret = uniqueName('startup-admin-tls');
    // Before the fix this process registered its guard (exempting the ServiceAccount) and then
    // retried its own denied writes forever; clean up after either.
    cleanups.push(
      () => removeAdmissionRegistration(env.kubeConfig, name),
      async () => {
        await env.kubeConfig
          .makeApiClient(CoreV1Api)
          .deleteNamespacedSecret({ name: tlsSecret, namespace: OPERATOR_NAMESPACE })
          .catch(() => undefined);
      },
    );
    const webhookPort = await freePort();
    const { op, logPath } = operator(
      [
        '--webhook',
        `--webhook-address=127.0.0.1:${webhookPort}`,
        `--webhook-url=https://127.0.0.1:${webhookPort}`,
        `--webhook-config-name=${name}`,
        `--tls-secret=${tlsSecret}`,
        '--no-leader-elect',
      ],
      { kubeconfigPath: env.kubeconfigPath, allowUnguarded: false },
    );
    const { code, lines } = await exitOf(op, logPath);
    assert.equal(code, 2, lines.join('\n'));
    assert.equal(lines.length, 1, `exactly one line, got:\n${lines.join('\n')}`);
    assert.match(
      lines[0] ?? '',
      new RegExp(
        `^nodeflavor: refusing to run the controller as "${admin}": the admission guard lets only "system:serviceaccount:${OPERATOR_NAMESPACE}:nodeflavor" write flavors.*create token`,
      ),
    );
    // It wrote nothing: no registration.
    assert.deepEqual(await findRegistration(env.kubeConfig, name), { state: 'absent' });
    // The identity it learned is in its log.
    assert.match(
      readFileSync(logPath, 'utf8'),
      new RegExp(`"username":"${admin}".*running as this identity`),
    );
  });

  it('refuses to run the controller with no admission guard unless --allow-unguarded-nodes', async () => {
    const before = await findRegistration(env.kubeConfig, REGISTRATION);
    assert.equal(before.state, 'absent', `a registration "${REGISTRATION}" is left over from another test`);
    const { op, logPath } = operator(['--no-leader-elect'], { allowUnguarded: false });
    const { code, lines } = await exitOf(op, logPath);
    assert.equal(code, 2, lines.join('\n'));
    assert.equal(lines.length, 1, `exactly one line, got:\n${lines.join('\n')}`);
    assert.match(
      lines[0] ?? '',
      /^nodeflavor: refusing to run the controller unguarded: this process runs no admission guard \(--no-webhook\).*--allow-unguarded-nodes/,
    );
  });

  it('with --allow-unguarded-nodes it runs, warning loudly and with metric nodeflavor_unguarded_nodes 1', async () => {
    const port = await freePort();
    const { logPath } = operator(['--no-leader-elect'], { metricsPort: port, allowUnguarded: true });
    await waitFor(async () => (await opsGet(port, '/readyz'))[0] === 200, {
      what: 'the unguarded operator to be ready',
      timeoutMs: 60_000,
    });
    assert.equal(await metricValue(port, 'nodeflavor_unguarded_nodes'), 1);
    assert.match(readFileSync(logPath, 'utf8'), /"level":40.*NODES ARE UNGUARDED/);
  });

  it("runs without the flag when another process's guard is registered (metric 0)", async () => {
    // A harmless policy + binding under the registration name: it matches no object at all.
    const labels = { 'app.kubernetes.io/name': 'nodeflavor' };
    await applyObjects(env.kubeconfigPath, [
      {
        apiVersion: 'admissionregistration.k8s.io/v1',
        kind: 'ValidatingAdmissionPolicy',
        metadata: { name: REGISTRATION, labels },
        spec: {
          failurePolicy: 'Fail',
          matchConstraints: {
            resourceRules: [
              { apiGroups: [''], apiVersions: ['v1'], operations: ['CREATE'], resources: ['configmaps'] },
            ],
            objectSelector: { matchLabels: { 'nodeflavor.io/e2e-matches-nothing': 'true' } },
          },
          validations: [{ expression: 'true' }],
        },
      },
      {
        apiVersion: 'admissionregistration.k8s.io/v1',
        kind: 'ValidatingAdmissionPolicyBinding',
        metadata: { name: REGISTRATION, labels },
        spec: { policyName: REGISTRATION, validationActions: ['Deny'] },
      },
    ]);
    cleanups.push(() => removeAdmissionRegistration(env.kubeConfig, REGISTRATION));
    const port = await freePort();
    const { logPath } = operator(['--no-leader-elect'], { metricsPort: port, allowUnguarded: false });
    await waitFor(async () => (await opsGet(port, '/readyz'))[0] === 200, {
      what: 'the operator guarded by another registration to be ready',
      timeoutMs: 60_000,
    });
    assert.equal(await metricValue(port, 'nodeflavor_unguarded_nodes'), 0);
    assert.match(
      readFileSync(logPath, 'utf8'),
      /guarded by an admission registration that another process serves/,
    );
  });

  it('answers /healthz while its API server is down, says why it is not ready, and is ready once it is back', async (t) => {
    const proxy = await TcpProxy.start({
      upstreams: [{ host: '127.0.0.1', port: Number(new URL(env.server).port) }],
    });
    cleanups.push(() => proxy.close());
    proxy.setMode('refuse');
    const port = await freePort();
    const started = Date.now();
    const { op } = operator(['--no-leader-elect'], {
      metricsPort: port,
      allowUnguarded: true,
      kubeconfigPath: operatorKubeconfigVia(proxy.url, fx.logs, env.caPem),
    });
    await waitFor(async () => (await opsGet(port, '/healthz'))[0] === 200, {
      what: 'the operator to answer /healthz while its API server is down',
      timeoutMs: 30_000,
      intervalMs: 100,
    });
    const aliveMs = Date.now() - started;
    const [status, body] = await waitFor(
      async () => {
        const answer = await opsGet(port, '/readyz');
        return /attempt \d+/.test(answer[1]) ? answer : undefined;
      },
      { what: 'the operator to say which start-up check it waits for', timeoutMs: 30_000 },
    );
    assert.equal(status, 503, body);
    assert.match(
      body,
      /^not ready: startup \(asking the API server who this process is \(SelfSubjectReview\): .*unreachable.*attempt \d+; retrying\)/,
    );
    assert.ok(op.running, 'it keeps running while the API server is down');

    proxy.setMode('forward');
    const backAt = Date.now();
    await waitFor(async () => (await opsGet(port, '/readyz'))[0] === 200, {
      what: 'the operator to be ready once its API server is back',
      timeoutMs: 60_000,
      intervalMs: 100,
    });
    t.diagnostic(
      `/healthz answered ${aliveMs} ms after start with the API server down; ready ${Date.now() - backAt} ms after it came back`,
    );
    assert.ok(op.running, 'it never exited');
  });
});
