// CSR approver mode, the default: nodeflavor's tokens carry their own bootstrap group, which
// kube-controller-manager does not auto-approve; the controller approves the kubelet client CSRs
// of that group that pass the binding checks and denies the rest, with its reason in the CSR
// condition. Also: the operator's /metrics endpoint. (Name squatting: name-squatting.test.ts.)
import assert from 'node:assert/strict';
import { before, describe, it } from 'node:test';
import { CertificatesV1Api } from '@kubernetes/client-node';
import { freePort } from './cluster/ports.ts';
import { createBootstrapToken, joinConfiguration } from './support/bootstrap.ts';
import type { E2EEnvironment } from './support/environment.ts';
import { issue, joinWith } from './support/nodeflavor.ts';
import { labelOnly, operatorFixture } from './support/operator-fixture.ts';
import { uniqueName, waitFor } from './support/wait.ts';

describe('controller: CSR approver mode and metrics', () => {
  const flavor = uniqueName('approved');
  // The chart's defaults: approver mode, and its RBAC for nodeflavor's bootstrap group.
  const fx = operatorFixture({ logPrefix: 'nodeflavor-approver-', flavorClasses: labelOnly(flavor) });
  const { kubelets } = fx;
  let env: E2EEnvironment;
  let metricsUrl = '';

  before(async () => {
    env = fx.env;
    const port = await freePort();
    metricsUrl = `http://127.0.0.1:${port}/metrics`;
    fx.start(['--no-leader-elect'], { metricsPort: port });
    await waitFor(async () => (await fetch(metricsUrl.replace('/metrics', '/readyz'))).ok, {
      what: 'the operator to be ready',
    });
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
