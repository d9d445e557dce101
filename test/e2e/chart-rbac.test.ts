// The Helm chart's RBAC, checked for real: the rendered manifests are applied server-side and
// requests are made AS the chart's ServiceAccount. What the operator needs works (the rest of
// the suite runs the operator as this identity); what it does not need is refused.
import assert from 'node:assert/strict';
import { before, describe, it } from 'node:test';
import { CoreV1Api, RbacAuthorizationV1Api } from '@kubernetes/client-node';
import { kubeJson } from '../../src/runtime/fetch.ts';
import { KubeError } from '../../src/runtime/kube-error.ts';
import { prepareOperatorIdentity } from './support/chart.ts';
import { type E2EEnvironment, e2eEnvironment } from './support/environment.ts';
import { OPERATOR_NAMESPACE } from './support/nodeflavor.ts';
import { uniqueName } from './support/wait.ts';

describe("the chart's ServiceAccount: least privilege", () => {
  let env: E2EEnvironment;
  let asOperator: Awaited<ReturnType<typeof prepareOperatorIdentity>>['kubeConfig'];

  before(async () => {
    env = await e2eEnvironment();
    asOperator = (await prepareOperatorIdentity(env)).kubeConfig;
  });

  async function status(
    method: 'GET' | 'POST' | 'DELETE' | 'PATCH',
    path: string,
    body?: unknown,
  ): Promise<number> {
    // 429 is the API server's flow control asking to come back (it says nothing about RBAC).
    for (let attempt = 0; ; attempt++) {
      try {
        await kubeJson(asOperator, method, path, {
          body,
          contentType: method === 'PATCH' ? 'application/merge-patch+json' : undefined,
        });
        return 200;
      } catch (error) {
        if (!(error instanceof KubeError)) throw error;
        if (error.status !== 429 || attempt >= 10) return error.status;
        await new Promise((resolve) => setTimeout(resolve, 500));
      }
    }
  }

  it('can do what the operator needs', async () => {
    assert.equal(await status('GET', '/api/v1/nodes'), 200);
    assert.equal(await status('GET', '/apis/nodeflavor.io/v1alpha1/flavoredtokens'), 200);
    assert.equal(await status('GET', '/api/v1/namespaces/kube-public/configmaps/cluster-info'), 200);
    // Its own ClusterRole, the admission registration's owner (--registration-owner), and no other.
    assert.equal(await status('GET', '/apis/rbac.authorization.k8s.io/v1/clusterroles/nodeflavor'), 200);
    assert.equal(await status('GET', '/apis/rbac.authorization.k8s.io/v1/clusterroles/cluster-admin'), 403);
  });

  it('cannot read Secrets in kube-system (it only creates and deletes bootstrap tokens there)', async () => {
    const secret = uniqueName('unrelated');
    await env.core.createNamespacedSecret({
      namespace: 'kube-system',
      body: { metadata: { name: secret }, stringData: { password: 'x' } },
    });
    assert.equal(await status('GET', `/api/v1/namespaces/kube-system/secrets/${secret}`), 403);
    assert.equal(await status('GET', '/api/v1/namespaces/kube-system/secrets'), 403);
  });

  it('cannot read other Secrets in its own namespace, nor Secrets anywhere else', async () => {
    const secret = uniqueName('neighbour');
    await env.kubeConfig.makeApiClient(CoreV1Api).createNamespacedSecret({
      namespace: OPERATOR_NAMESPACE,
      body: { metadata: { name: secret }, stringData: { key: 'x' } },
    });
    assert.equal(await status('GET', `/api/v1/namespaces/${OPERATOR_NAMESPACE}/secrets/${secret}`), 403);
    assert.equal(await status('GET', '/api/v1/namespaces/default/secrets'), 403);
    assert.equal(await status('GET', '/api/v1/secrets'), 403);
  });

  it('cannot delete Nodes, touch Pods, or grant itself more (no RBAC writes)', async () => {
    assert.equal(await status('DELETE', '/api/v1/nodes/any-node'), 403);
    assert.equal(await status('GET', '/api/v1/pods'), 403);
    const binding = {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'ClusterRoleBinding',
      metadata: { name: uniqueName('escalate') },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: 'cluster-admin' },
      subjects: [{ kind: 'ServiceAccount', name: 'nodeflavor', namespace: OPERATOR_NAMESPACE }],
    };
    assert.equal(
      await status('POST', '/apis/rbac.authorization.k8s.io/v1/clusterrolebindings', binding),
      403,
    );
    // Sanity: the binding does not exist (the refusal was not a different failure).
    const rbac = env.kubeConfig.makeApiClient(RbacAuthorizationV1Api);
    await assert.rejects(rbac.readClusterRoleBinding({ name: binding.metadata.name }));
  });

  it('may approve kubelet client CSRs (approver mode, the default) and no other signer', async () => {
    const mayApprove = async (signer: string) =>
      (
        await kubeJson<{ status: { allowed: boolean } }>(
          asOperator,
          'POST',
          '/apis/authorization.k8s.io/v1/selfsubjectaccessreviews',
          {
            body: {
              apiVersion: 'authorization.k8s.io/v1',
              kind: 'SelfSubjectAccessReview',
              spec: {
                resourceAttributes: {
                  group: 'certificates.k8s.io',
                  resource: 'signers',
                  verb: 'approve',
                  name: signer,
                },
              },
            },
          },
        )
      ).status.allowed;
    assert.equal(await mayApprove('kubernetes.io/kube-apiserver-client-kubelet'), true);
    assert.equal(
      await mayApprove('kubernetes.io/kube-apiserver-client'),
      false,
      'no client certificates for users',
    );
    assert.equal(await mayApprove('kubernetes.io/kubelet-serving'), false);
  });
});
