// A rolling upgrade of the admission guard: two `nodeflavor run` replicas of one chart release
// whose generated registrations differ, as the old and the new release's do. The old one stands
// in for an older build by its registration revision (a failpoint) and has no admin group; the
// new one adds an admin group, so its webhook has one more matchCondition. It must hold that:
//   - only the Lease holder writes the registration: the standby never takes it over, so the two
//     do not overwrite each other in a loop (before the fix every replica applied with force and
//     PUT over drift, and each took it back from the other on every watch event);
//   - when the new release leads, it writes its registration;
//   - an old replica that becomes the leader again (the new one crashed) leaves the newer
//     registration alone: it is never rolled back, and the old leader says so (a metric).
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { CoordinationV1Api } from '@kubernetes/client-node';
import { kubeJson } from '../../src/runtime/fetch.ts';
import { removeAdmissionRegistration } from '../../src/webhook/admission-registration.ts';
import { REGISTRATION_REVISION } from '../../src/webhook/desired-registration.ts';
import { freePort } from './cluster/ports.ts';
import { ManagedProcess } from './cluster/process.ts';
import { type ChartInstall, chartOperatorArgs, installChartOutOfCluster } from './support/chart.ts';
import { type E2EEnvironment, e2eEnvironment } from './support/environment.ts';
import { installCrds, metricValue, opsGet } from './support/nodeflavor.ts';
import { tempDirForThisProcess } from './support/temp-dir.ts';
import { waitFor } from './support/wait.ts';

const NAMESPACE = 'nodeflavor-upgrade';
const RELEASE = 'nf-upgrade';
const NEW_ADMIN_GROUP = 'e2e-upgrade-admins';
const REVISION_ANNOTATION = 'nodeflavor.io/registration-revision';
const repoRoot = join(import.meta.dirname, '..', '..');

interface Registration {
  metadata: { resourceVersion: string; annotations?: Record<string, string> };
  webhooks: { matchConditions?: { name: string }[] }[];
}

describe('rolling upgrade: two releases with different admission registrations', () => {
  let env: E2EEnvironment;
  let install: ChartInstall;
  const dir = tempDirForThisProcess('nodeflavor-upgrade-');
  const replicas: ManagedProcess[] = [];
  let configName = '';
  let leaseName = '';

  before(async () => {
    env = await e2eEnvironment();
    await installCrds(env);
    install = await installChartOutOfCluster(env, {
      namespace: NAMESPACE,
      release: RELEASE,
      dir,
      set: { 'issuer.enabled': 'false' },
      keyRing: true,
    });
    configName = flag('webhook-config-name');
    leaseName = flag('leader-election-id');
  });

  after(async () => {
    await Promise.all(replicas.map((r) => r.stop()));
    // The registration names ports nobody serves any more (failurePolicy Fail): remove it.
    await removeAdmissionRegistration(env.kubeConfig, configName);
  });

  function chartArgs(): string[] {
    return chartOperatorArgs(install);
  }

  function flag(name: string): string {
    const arg = chartArgs().find((a) => a.startsWith(`--${name}=`));
    if (!arg) throw new Error(`the chart passes no --${name}`);
    return arg.slice(name.length + 3);
  }

  /** One replica as the chart runs it, out of cluster; `release` old or new. */
  async function replica(
    release: 'old' | 'new',
  ): Promise<{ op: ManagedProcess; metrics: number; log: string }> {
    const [webhookPort, metrics] = [await freePort(), await freePort()];
    const log = join(dir, `${release}-${replicas.length}.log`);
    const op = new ManagedProcess(
      'nodeflavor',
      process.execPath,
      [
        '--import',
        'tsx',
        join(repoRoot, 'src', 'cli', 'nodeflavor.ts'),
        ...chartArgs(),
        `--kubeconfig=${install.kubeconfigPath}`,
        '--no-controller',
        `--webhook-address=127.0.0.1:${webhookPort}`,
        `--webhook-url=https://127.0.0.1:${webhookPort}`,
        `--metrics-address=127.0.0.1:${metrics}`,
        ...(release === 'new' ? [`--admin-group=${NEW_ADMIN_GROUP}`] : []),
      ],
      log,
      {
        ...process.env,
        NODEFLAVOR_FAILPOINTS: release === 'old' ? 'registration-revision=0' : '',
      },
    );
    replicas.push(op);
    await waitFor(async () => (await opsGet(metrics, '/readyz'))[0] === 200, {
      what: `the ${release} replica to be ready:\n${op.lastLines()}`,
      timeoutMs: 60_000,
      intervalMs: 200,
    });
    return { op, metrics, log };
  }

  const identityOf = (log: string) => /"identity":"([^"]+)"/.exec(readFileSync(log, 'utf8'))?.[1];

  async function holder(): Promise<string | undefined> {
    const lease = await env.kubeConfig
      .makeApiClient(CoordinationV1Api)
      .readNamespacedLease({ namespace: NAMESPACE, name: leaseName });
    return lease.spec?.holderIdentity || undefined;
  }

  const registration = () =>
    kubeJson<Registration>(
      env.kubeConfig,
      'GET',
      `/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations/${configName}`,
    );
  const isNew = (r: Registration) =>
    r.metadata.annotations?.[REVISION_ANNOTATION] === String(REGISTRATION_REVISION) &&
    (r.webhooks[0]?.matchConditions ?? []).some((c) => c.name === 'not-admin-group');
  const isOld = (r: Registration) =>
    r.metadata.annotations?.[REVISION_ANNOTATION] === '0' &&
    !(r.webhooks[0]?.matchConditions ?? []).some((c) => c.name === 'not-admin-group');

  it('only the leader writes; the new registration lands when the new release leads and is never rolled back', async (t) => {
    const old = await replica('old');
    await waitFor(async () => (await holder()) === identityOf(old.log), {
      what: 'the old replica to lead',
      timeoutMs: 30_000,
      intervalMs: 200,
    });
    await waitFor(async () => isOld(await registration()), {
      what: 'the old registration',
      timeoutMs: 30_000,
      intervalMs: 200,
    });

    // A standby of the new release: it serves, and leaves the registration to the leader.
    const fresh = await replica('new');
    const settled = await registration();
    const seen = new Set<string>();
    const samples: Registration[] = [];
    // An observation window, not a wait for something: before the fix the two replicas took the
    // registration from each other many times a second.
    for (let i = 0; i < 25; i++) {
      const now = await registration();
      samples.push(now);
      seen.add(now.metadata.resourceVersion);
      await new Promise((resolve) => setTimeout(resolve, 200));
    }
    t.diagnostic(`while both ran, the registration had ${seen.size} version(s) in 5 s`);
    assert.ok(
      samples.every((r) => r.metadata.resourceVersion === settled.metadata.resourceVersion && isOld(r)),
      `the standby (new release) never wrote the registration: versions seen ${[...seen].join(', ')}`,
    );

    // The old leader shuts down (a rolling upgrade replaces it): it hands the Lease over and the
    // new release's registration lands.
    const stoppedAt = Date.now();
    await old.op.stop();
    await waitFor(async () => isNew(await registration()), {
      what: 'the new registration',
      timeoutMs: 30_000,
      intervalMs: 100,
    });
    const landedMs = Date.now() - stoppedAt;
    assert.equal(await holder(), identityOf(fresh.log), 'the new replica leads');
    const upgraded = await registration();

    // An old replica comes back (the rollout is not over) and becomes the leader when the new
    // one crashes: it must leave the newer registration alone.
    const again = await replica('old');
    await fresh.op.kill();
    const killedAt = Date.now();
    await waitFor(async () => (await holder()) === identityOf(again.log), {
      what: 'the old replica to take the Lease',
      timeoutMs: 60_000,
      intervalMs: 200,
    });
    await waitFor(
      async () => (await metricValue(again.metrics, 'nodeflavor_admission_registration_deferred')) === 1,
      {
        what: 'the old leader to leave the newer registration alone (deferred metric)',
        timeoutMs: 30_000,
        intervalMs: 200,
      },
    );
    const takeoverMs = Date.now() - killedAt;
    const after = await registration();
    t.diagnostic(
      `new registration ${landedMs} ms after the old leader stopped; old replica led again ${takeoverMs} ms after the new one was killed and deferred`,
    );
    assert.ok(isNew(after), 'the newer registration was not rolled back');
    assert.equal(after.metadata.resourceVersion, upgraded.metadata.resourceVersion, 'nobody wrote it');
  });
});
