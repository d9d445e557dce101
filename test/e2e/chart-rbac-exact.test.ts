// The chart grants exactly what the operator uses, proven with the API server's audit log: the
// chart is rendered (so grants other changes add are checked too), its RBAC applied, and the
// operator runs as its ServiceAccount with the chart's own flags through a scenario that uses
// every feature — issue through the API (TokenReview, SubjectAccessReview), approve the CSR, join
// and verify, consume and revoke tokens, repair edited admission objects, replace broken serving
// certificates, switch the admission mode, lead. Then every (namespace, apiGroup, resource, verb[,
// name]) the chart binds to the ServiceAccount must appear in the audit log as a request it made,
// and no request of it may have been refused (403). A grant a short scenario cannot use goes in
// NOT_EXERCISED below, with the reason.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { request } from 'node:https';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { RbacAuthorizationV1Api, type V1ClusterRoleBinding } from '@kubernetes/client-node';
import { issueThroughApi, portalToken, readIssuerCa } from '../../demo/steps.ts';
import { TOKEN_FINALIZER, TOKEN_ID_LABEL } from '../../src/flavor/resources.ts';
import { kubeJson } from '../../src/runtime/fetch.ts';
import { flavoredTokenName } from '../../src/tokenissuer/issuance/issue.ts';
import { removeAdmissionRegistration } from '../../src/webhook/admission-registration.ts';
import { skipTest } from '../support/skip.ts';
import { freePort } from './cluster/ports.ts';
import { ManagedProcess } from './cluster/process.ts';
import type { SimulatedKubelet } from './kubelet-sim/kubelet.ts';
import {
  AUDITED_NAMESPACE,
  auditLogPath,
  chartGrants,
  describeGrant,
  type Grant,
  isUsed,
  readUses,
  type Use,
} from './support/audit.ts';
import { type ChartInstall, chartOperatorArgs, installChartOutOfCluster } from './support/chart.ts';
import { type E2EEnvironment, e2eEnvironment } from './support/environment.ts';
import { applyFlavorClass, installCrds, joinWith, opsGet } from './support/nodeflavor.ts';
import { uniqueName, waitFor } from './support/wait.ts';

const RELEASE = AUDITED_NAMESPACE; // contains the chart name, so it is also the full name
const AUTO_APPROVE = 'kubeadm:node-autoapprove-bootstrap';
/** The values the scenario runs with: every optional grant on. */
const VALUES = { 'controller.csrApprover': 'true', 'admission.mode': 'both' };

/**
 * Grants the scenario does not use, each with why the chart still needs it. Keep it short: a
 * grant that nothing needs belongs out of the chart.
 */
const NOT_EXERCISED: { grant: Grant; why: string }[] = [
  {
    grant: { apiGroup: 'nodeflavor.io', resource: 'nodenameclaims', verb: 'get' },
    why: "a join record is read from the API server only when a write to it conflicts or its name is contested (ADR 0016; test/unit/reconcilers.test.ts stages both), or by the registration webhook when it serves a kubelet's registration: none of these happens in this scenario (before ADR 0016 every approval re-read the claim)",
  },
  {
    grant: { apiGroup: 'nodeflavor.io', resource: 'flavorclasses', verb: 'get' },
    why: "the issuer reads a FlavorClass directly only while its FlavorClass watch has not synced (just after start, or after the watch failed); the scenario's requests come after the sync",
  },
  {
    grant: { apiGroup: '', resource: 'events', verb: 'patch' },
    why: "an aggregated Event's count is patched only when its reason recurs on the same object with a new message; the scenario meets each reason once per object (test/e2e/issuer-lifecycle.test.ts counts one to 2)",
  },
  {
    grant: { apiGroup: '', resource: 'events', verb: 'get' },
    why: 'an aggregated Event is read only when its create meets one made by another replica or before a restart (409); one operator process makes every Event here',
  },
];

const repoRoot = join(import.meta.dirname, '..', '..');

describe("the chart's RBAC is exactly what the operator uses (audit log)", () => {
  const logPath = auditLogPath();
  let env: E2EEnvironment;
  let dir: string;
  let install: ChartInstall;
  let operator: ManagedProcess | undefined;
  let removedAutoApprove: V1ClusterRoleBinding | undefined;
  const kubelets: SimulatedKubelet[] = [];
  let auditFrom = 0;

  before(async () => {
    if (logPath === undefined) return;
    env = await e2eEnvironment();
    dir = mkdtempSync(join(tmpdir(), 'nodeflavor-rbac-exact-'));
    await installCrds(env);
    install = await installChartOutOfCluster(env, {
      namespace: AUDITED_NAMESPACE,
      release: RELEASE,
      dir,
      set: VALUES,
      keyRing: true,
    });
  });
  after(async () => {
    if (logPath === undefined) return;
    for (const kubelet of kubelets) kubelet.stop();
    await operator?.stop();
    // The registration points at a port nobody serves any more (failurePolicy Fail): remove it.
    await removeAdmissionRegistration(env.kubeConfig, RELEASE);
    if (removedAutoApprove) {
      await env.kubeConfig.makeApiClient(RbacAuthorizationV1Api).createClusterRoleBinding({
        body: {
          metadata: { name: AUTO_APPROVE },
          roleRef: removedAutoApprove.roleRef,
          subjects: removedAutoApprove.subjects,
        },
      });
    }
    rmSync(dir, { recursive: true, force: true });
  });

  /** `nodeflavor run` with the args of the chart's Deployment, plus what an out-of-cluster run changes. */
  async function startAsChart(
    extra: string[],
  ): Promise<{ op: ManagedProcess; metricsPort: number; issuerUrl: string }> {
    const chartArgs = chartOperatorArgs(install);
    assert.equal(chartArgs[0], 'run');
    const [webhookPort, issuerPort, metricsPort] = [await freePort(), await freePort(), await freePort()];
    const op = new ManagedProcess(
      'nodeflavor',
      process.execPath,
      [
        '--import',
        'tsx',
        join(repoRoot, 'src', 'cli', 'nodeflavor.ts'),
        ...chartArgs,
        // Later flags win: the addresses a process outside the cluster listens on and is called at.
        `--kubeconfig=${install.kubeconfigPath}`,
        `--webhook-address=127.0.0.1:${webhookPort}`,
        `--webhook-url=https://127.0.0.1:${webhookPort}`,
        `--issuer-address=127.0.0.1:${issuerPort}`,
        `--metrics-address=127.0.0.1:${metricsPort}`,
        '--binding-grace=5s',
        '--orphan-grace=2s',
        '--claim-grace=2s',
        ...extra,
      ],
      join(dir, `${uniqueName('operator')}.log`),
    );
    await waitFor(async () => (await opsGet(metricsPort, '/readyz'))[0] === 200, {
      what: `the operator to be ready:\n${op.lastLines()}`,
      timeoutMs: 60_000,
      intervalMs: 200,
    });
    return { op, metricsPort, issuerUrl: `https://127.0.0.1:${issuerPort}` };
  }

  function revoke(url: string, ca: string, bearer: string, id: string): Promise<number> {
    return new Promise((resolve, reject) => {
      const req = request(
        `${url}/v1/tokens/${id}`,
        { method: 'DELETE', ca, headers: { Authorization: `Bearer ${bearer}` } },
        (res) => {
          res.resume();
          res.on('end', () => resolve(res.statusCode ?? 0));
        },
      );
      req.on('error', reject);
      req.end();
    });
  }

  /** An admin edits what the operator keeps true; resolves once the operator has put it back. */
  async function editAndWaitRestored(path: string, patch: object[], restored: (o: never) => boolean) {
    await kubeJson(env.kubeConfig, 'PATCH', path, {
      body: patch,
      contentType: 'application/json-patch+json',
    });
    await waitFor(async () => restored(await kubeJson<never>(env.kubeConfig, 'GET', path)), {
      what: `the operator to restore ${path}:\n${operator?.lastLines() ?? ''}`,
      timeoutMs: 30_000,
      intervalMs: 200,
    });
  }

  it('uses every grant of the chart, and none of its requests is refused', async (t) => {
    if (logPath === undefined) {
      skipTest(
        t,
        'the exact-RBAC check (test/e2e/chart-rbac-exact.test.ts)',
        'E2E_KUBECONFIG names another cluster: there is no audit log to read, so this check cannot run',
      );
      return;
    }
    auditFrom = readUses(logPath, 0).next;
    const serviceAccount = `system:serviceaccount:${AUDITED_NAMESPACE}:${install.serviceAccount}`;
    const flavor = uniqueName('rbac');
    await applyFlavorClass(env, flavor, {
      labels: { 'nodeflavor.io/flavor': flavor },
      taints: [{ key: 'nodeflavor.io/dedicated', value: flavor, effect: 'NoSchedule' }],
    });
    // Approver mode, as a cluster without kubeadm's auto-approval runs it.
    const rbac = env.kubeConfig.makeApiClient(RbacAuthorizationV1Api);
    removedAutoApprove = await rbac.readClusterRoleBinding({ name: AUTO_APPROVE });
    await rbac.deleteClusterRoleBinding({ name: AUTO_APPROVE });

    let started = await startAsChart([]);
    operator = started.op;

    // A portal issues two tokens through the API (TokenReview + SubjectAccessReview).
    const bearer = await portalToken(env, AUDITED_NAMESPACE, [flavor]);
    const ca = await readIssuerCa(env, AUDITED_NAMESPACE, `${RELEASE}-issuer-ca`);
    const joining = await issueThroughApi(started.issuerUrl, ca, bearer, flavor);
    const revoked = await issueThroughApi(started.issuerUrl, ca, bearer, flavor);

    // A node joins: the controller approves its CSR, binds and verifies it, writes its flavor and
    // consumes the single-use token (its bootstrap Secret goes).
    const node = uniqueName('rbac-node');
    kubelets.push(await joinWith(joining, node, { timeoutMs: 60_000 }));
    await waitFor(
      async () =>
        (await env.core.readNode({ name: node })).metadata?.labels?.['nodeflavor.io/flavor'] === flavor,
      { what: `node ${node} to get its flavor:\n${operator.lastLines()}`, timeoutMs: 60_000 },
    );
    /** A probe for waitFor: the object at `path` no longer exists. */
    const gone = (path: string) => async () =>
      (await kubeJson(env.kubeConfig, 'GET', path).then(
        () => false,
        () => true,
      )) as boolean;
    // The node goes: its binding ends and its name's claim is released (an update; ADR 0011).
    kubelets.pop()?.stop();
    await env.core.deleteNode({ name: node });
    await waitFor(
      async () => {
        const claim = await kubeJson<{ spec: { holder?: object } }>(
          env.kubeConfig,
          'GET',
          `/apis/nodeflavor.io/v1alpha1/nodenameclaims/${node}`,
        );
        return claim.spec.holder === undefined;
      },
      {
        what: `the claim on ${node} to be released:
${operator.lastLines()}`,
        timeoutMs: 30_000,
      },
    );
    // Its request cleaned (as kube-controller-manager's cleaner does after an hour), the released
    // record is collected after --claim-grace (a delete; ADR 0016).
    const requests = await kubeJson<{ items: { metadata: { name: string }; spec: { username?: string } }[] }>(
      env.kubeConfig,
      'GET',
      '/apis/certificates.k8s.io/v1/certificatesigningrequests',
    );
    for (const csr of requests.items.filter((c) => c.spec.username === `system:bootstrap:${joining.tokenID}`))
      await kubeJson(
        env.kubeConfig,
        'DELETE',
        `/apis/certificates.k8s.io/v1/certificatesigningrequests/${csr.metadata.name}`,
      );
    await waitFor(gone(`/apis/nodeflavor.io/v1alpha1/nodenameclaims/${node}`), {
      what: `the released claim on ${node} to be collected:\n${operator.lastLines()}`,
      timeoutMs: 30_000,
    });
    // The other token is revoked through the API (its bootstrap Secret goes, the record is marked).
    assert.equal(await revoke(started.issuerUrl, ca, bearer, revoked.id), 200);
    // A half-made keyed issuance (ADR 0005: a record never marked issued) is deleted after
    // --orphan-grace, and its finalizer let go.
    const tokens = '/apis/nodeflavor.io/v1alpha1/flavoredtokens';
    const template = await kubeJson<{ spec: object }>(env.kubeConfig, 'GET', `${tokens}/${revoked.id}`);
    const orphanId = uniqueName('x').slice(-6);
    await kubeJson(env.kubeConfig, 'POST', tokens, {
      body: {
        apiVersion: 'nodeflavor.io/v1alpha1',
        kind: 'FlavoredToken',
        metadata: {
          name: flavoredTokenName(orphanId),
          labels: { [TOKEN_ID_LABEL]: orphanId },
          annotations: { 'nodeflavor.io/idempotency': 'v1:abandoned' },
          finalizers: [TOKEN_FINALIZER],
        },
        spec: { ...template.spec, revoked: false },
      },
    });
    await waitFor(gone(`${tokens}/${flavoredTokenName(orphanId)}`), {
      what: `the half-made FlavoredToken ${orphanId} to be deleted:\n${operator.lastLines()}`,
      timeoutMs: 30_000,
    });

    // An admin adds to each admission object what server-side apply cannot take away (another
    // manager's list entries); the operator overwrites them (an update).
    const registration = '/apis/admissionregistration.k8s.io/v1';
    const extra = { name: 'e2e-extra', expression: 'true' };
    const noExtra = (conditions?: { name: string }[]) => !conditions?.some((c) => c.name === extra.name);
    await editAndWaitRestored(
      `${registration}/validatingwebhookconfigurations/${RELEASE}`,
      [{ op: 'add', path: '/webhooks/0/matchConditions/-', value: extra }],
      (o: { webhooks: { matchConditions?: { name: string }[] }[] }) =>
        noExtra(o.webhooks[0]?.matchConditions),
    );
    await editAndWaitRestored(
      `${registration}/validatingadmissionpolicies/${RELEASE}`,
      [{ op: 'add', path: '/spec/matchConditions/-', value: extra }],
      (o: { spec: { matchConditions?: { name: string }[] } }) => noExtra(o.spec.matchConditions),
    );
    await editAndWaitRestored(
      `${registration}/validatingadmissionpolicybindings/${RELEASE}`,
      [{ op: 'add', path: '/spec/validationActions/-', value: 'Audit' }],
      (o: { spec: { validationActions: string[] } }) => !o.spec.validationActions.includes('Audit'),
    );
    // The quarantine at registration (ADR 0012), the FlavorClass-keys and the FlavoredToken
    // policies likewise.
    await editAndWaitRestored(
      `${registration}/mutatingwebhookconfigurations/${RELEASE}`,
      [{ op: 'add', path: '/webhooks/0/matchConditions/-', value: extra }],
      (o: { webhooks: { matchConditions?: { name: string }[] }[] }) =>
        noExtra(o.webhooks[0]?.matchConditions),
    );
    for (const [kind, name] of [
      ['mutatingadmissionpolicies', RELEASE],
      ['validatingadmissionpolicies', `${RELEASE}-class-keys`],
      ['validatingadmissionpolicies', `${RELEASE}-flavored-tokens`],
    ] as const)
      await editAndWaitRestored(
        `${registration}/${kind}/${name}`,
        [{ op: 'add', path: '/spec/matchConditions/-', value: extra }],
        (o: { spec: { matchConditions?: { name: string }[] } }) => noExtra(o.spec.matchConditions),
      );
    // A binding narrowed by another manager's field (which server-side apply leaves alone).
    await editAndWaitRestored(
      `${registration}/mutatingadmissionpolicybindings/${RELEASE}`,
      [
        {
          op: 'add',
          path: '/spec/matchResources',
          value: { objectSelector: { matchLabels: { exempt: 'yes' } } },
        },
      ],
      (o: { spec: { matchResources?: { objectSelector?: object } } }) =>
        o.spec.matchResources?.objectSelector === undefined ||
        JSON.stringify(o.spec.matchResources.objectSelector) === '{}',
    );
    for (const binding of [`${RELEASE}-class-keys`, `${RELEASE}-flavored-tokens`])
      await editAndWaitRestored(
        `${registration}/validatingadmissionpolicybindings/${binding}`,
        [{ op: 'add', path: '/spec/validationActions/-', value: 'Audit' }],
        (o: { spec: { validationActions: string[] } }) => !o.spec.validationActions.includes('Audit'),
      );
    // Broken serving certificates are replaced (the webhook's and the issuer's).
    for (const secret of [`${RELEASE}-webhook-tls`, `${RELEASE}-issuer-tls`]) {
      await editAndWaitRestored(
        `/api/v1/namespaces/${AUDITED_NAMESPACE}/secrets/${secret}`,
        [
          {
            op: 'replace',
            path: '/data/tls.crt',
            value: Buffer.from('not a certificate').toString('base64'),
          },
        ],
        (o: { data: Record<string, string> }) =>
          Buffer.from(o.data['tls.crt'] ?? '', 'base64')
            .toString()
            .includes('BEGIN CERTIFICATE'),
      );
    }

    // A lost issuer CA is replaced, and portals learn the new one from the ConfigMap (its update).
    const publishedCa = async () =>
      (
        await env.core
          .readNamespacedConfigMap({ namespace: AUDITED_NAMESPACE, name: `${RELEASE}-issuer-ca` })
          .catch(() => undefined)
      )?.data?.['ca.crt'];
    const oldCa = await waitFor(publishedCa, { what: 'the issuer CA ConfigMap' });
    await env.core.deleteNamespacedSecret({ namespace: AUDITED_NAMESPACE, name: `${RELEASE}-issuer-tls` });
    await waitFor(async () => ((await publishedCa()) ?? oldCa) !== oldCa, {
      what: 'the issuer CA ConfigMap to follow the new CA',
      timeoutMs: 60_000,
    });

    // Restarts in another admission mode remove the other mode's objects: policy mode removes the
    // webhook configuration, then webhook mode the policy and its binding.
    for (const [mode, removed] of [
      ['policy', 'validatingwebhookconfigurations'],
      ['webhook', 'validatingadmissionpolicies'],
    ] as const) {
      await operator.stop();
      started = await startAsChart([`--admission-mode=${mode}`]);
      operator = started.op;
      await waitFor(gone(`${registration}/${removed}/${RELEASE}`), {
        what: `${removed}/${RELEASE} to be removed in ${mode} mode`,
        timeoutMs: 30_000,
      });
    }

    // Now the audit log: until every grant shows up (some requests, like a Lease renewal, come
    // on their own time), then the verdict.
    const grants = chartGrants(install.objects, AUDITED_NAMESPACE, install.serviceAccount);
    assert.ok(grants.length > 20, `too few grants read from the chart: ${grants.length}`);
    const allowed = (g: Grant) =>
      NOT_EXERCISED.some(
        (n) =>
          n.grant.apiGroup === g.apiGroup &&
          n.grant.resource === g.resource &&
          n.grant.verb === g.verb &&
          n.grant.name === g.name &&
          n.grant.namespace === g.namespace,
      );
    let uses: Use[] = [];
    let unused: Grant[] = [];
    await waitFor(
      () => {
        const read = readUses(logPath, auditFrom);
        auditFrom = read.next;
        uses = uses.concat(read.uses.filter((u) => u.username === serviceAccount));
        unused = grants.filter((g) => !allowed(g) && !isUsed(g, uses));
        return unused.length === 0;
      },
      { what: 'every grant to be used', timeoutMs: 20_000, intervalMs: 500 },
    ).catch(() => undefined);
    const refused = uses.filter((u) => u.code === 403);
    assert.deepEqual(
      refused.map((u) => `${u.verb} ${u.uri}`),
      [],
      'the operator was refused requests its chart should allow',
    );
    assert.deepEqual(
      unused.map(describeGrant),
      [],
      `the chart grants what the operator did not use (remove it, or add it to NOT_EXERCISED with the reason). Requests seen:\n${[
        ...new Set(
          uses.map(
            (u) =>
              `${u.namespace ?? '-'} ${u.apiGroup || 'core'} ${u.resource}${u.name ? `/${u.name}` : ''}: ${u.verb} ${u.code}`,
          ),
        ),
      ]
        .sort()
        .join('\n')}`,
    );
    // An allow-listed grant that is used after all should leave the list.
    for (const n of NOT_EXERCISED)
      assert.ok(
        !isUsed({ ...n.grant }, uses),
        `${describeGrant(n.grant)} is used: take it off NOT_EXERCISED`,
      );
  });
});
