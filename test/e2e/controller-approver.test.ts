// CSR approver mode, the default: nodeflavor's tokens carry their own bootstrap group, which
// kube-controller-manager does not auto-approve; the controller approves the kubelet client CSRs
// of that group that pass the binding checks and denies the rest, with its reason in the CSR
// condition. Also: the operator's /metrics endpoint. (Name squatting: name-squatting.test.ts.)
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { CertificatesV1Api } from '@kubernetes/client-node';
import { freePort } from './cluster/ports.ts';
import type { ManagedProcess } from './cluster/process.ts';
import type { SimulatedKubelet } from './kubelet-sim/kubelet.ts';
import { createBootstrapToken, joinConfiguration } from './support/bootstrap.ts';
import { prepareOperatorIdentity } from './support/chart.ts';
import { type E2EEnvironment, e2eEnvironment } from './support/environment.ts';
import {
  applyFlavorClass,
  ensureNamespace,
  installCrds,
  issue,
  joinWith,
  OPERATOR_NAMESPACE,
  startOperator,
} from './support/nodeflavor.ts';
import { tempDirForThisProcess } from './support/temp-dir.ts';
import { uniqueName, waitFor } from './support/wait.ts';

describe('controller: CSR approver mode and metrics', () => {
  let env: E2EEnvironment;
  let operator: ManagedProcess;
  let metricsUrl = '';
  const kubelets: SimulatedKubelet[] = [];
  const flavor = uniqueName('approved');

  before(async () => {
    env = await e2eEnvironment();
    await installCrds(env);
    await ensureNamespace(env, OPERATOR_NAMESPACE);
    await applyFlavorClass(env, flavor, { labels: { 'nodeflavor.io/flavor': flavor } });
    // The chart's defaults: approver mode, and its RBAC for nodeflavor's bootstrap group.
    await prepareOperatorIdentity(env);
    const port = await freePort();
    metricsUrl = `http://127.0.0.1:${port}/metrics`;
    operator = startOperator(
      join(tempDirForThisProcess('nodeflavor-approver-'), 'operator.log'),
      ['--no-leader-elect'],
      {
        metricsPort: port,
      },
    );
    await waitFor(async () => (await fetch(metricsUrl.replace('/metrics', '/readyz'))).ok, {
      what: 'the operator to be ready',
    });
  });
  after(async () => {
    for (const kubelet of kubelets) kubelet.stop();
    await operator?.stop();
  });

  const verified = async () => {
    const text = await (await fetch(metricsUrl)).text();
    return Number(
      /nodeflavor_verifications_total\{result="verified",reason="Verified"\} (\d+)/.exec(text)?.[1] ?? 0,
    );
  };

  it('approves the CSR of a node whose token binds, and the node gets its flavor; metrics count it', async () => {
    const before = await verified();
    const token = await issue(env, flavor);
    const name = uniqueName('approved');
    const kubelet = await joinWith(token.material, name);
    kubelets.push(kubelet);
    const csr = await env.kubeConfig
      .makeApiClient(CertificatesV1Api)
      .readCertificateSigningRequest({ name: kubelet.csrName ?? '' });
    const approved = csr.status?.conditions?.find((c) => c.type === 'Approved');
    assert.equal(
      approved?.reason,
      'NodeflavorBound',
      'approved by nodeflavor, not by kube-controller-manager',
    );
    await waitFor(
      async () => (await env.core.readNode({ name })).metadata?.labels?.['nodeflavor.io/flavor'] === flavor,
      {
        what: 'the node to be flavored',
      },
    );
    await waitFor(async () => (await verified()) > before, {
      what: 'the verification counter on /metrics to move',
    });
  });

  it('denies the CSR of a node whose name the token does not allow', async () => {
    const token = await issue(env, flavor, { nodeNamePattern: 'rack-1-*' });
    await assert.rejects(joinWith(token.material, uniqueName('rack-2')), /denied: NodeNameMismatch/);
  });

  it('denies the CSR made with a bootstrap token of its group that nodeflavor did not issue', async () => {
    const plain = await createBootstrapToken(env, { groups: 'system:bootstrappers:nodeflavor' });
    await assert.rejects(
      joinWith(joinConfiguration(env, plain.token), uniqueName('foreign')),
      /denied: UnknownToken/,
    );
  });
});
