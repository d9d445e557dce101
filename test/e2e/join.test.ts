// The join path of a kubeadm cluster, on the real control plane: bootstrap token → CSR stamped
// by the API server → approved and signed by kube-controller-manager → Node created by the
// node's own identity; and what the API server itself refuses (Node authorizer, NodeRestriction).
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { promisify } from 'node:util';
import { AuthenticationV1Api, CertificatesV1Api, CoreV1Api, VersionApi } from '@kubernetes/client-node';
import { createCertificateAuthority } from '../../src/pki/certs.ts';
import { parseJoinConfiguration } from './kubelet-sim/join-config.ts';
import { JoinError, KUBELET_SIGNER, SimulatedKubelet } from './kubelet-sim/kubelet.ts';
import {
  createBootstrapToken,
  discoveryKubeconfig,
  joinConfiguration,
  nodeKubeConfig,
} from './support/bootstrap.ts';
import { type E2EEnvironment, e2eEnvironment } from './support/environment.ts';
import { tempDirForThisProcess } from './support/temp-dir.ts';
import { uniqueName } from './support/wait.ts';

const run = promisify(execFile);
const workdir = tempDirForThisProcess('nodeflavor-join-');

describe('kubeadm-style join on the real control plane', () => {
  let env: E2EEnvironment;
  const kubelets: SimulatedKubelet[] = [];

  before(async () => {
    env = await e2eEnvironment();
  });
  after(() => {
    for (const kubelet of kubelets) kubelet.stop();
  });

  async function joinNode(
    name: string,
    token: string,
    options: { extraLabels?: Record<string, string>; timeoutMs?: number } = {},
  ) {
    const kubelet = new SimulatedKubelet(
      name,
      parseJoinConfiguration(joinConfiguration(env, token)),
      options,
    );
    kubelets.push(kubelet);
    await kubelet.join();
    return kubelet;
  }

  it('runs against a real kube-apiserver', async (t) => {
    const version = await env.kubeConfig.makeApiClient(VersionApi).getCode();
    t.diagnostic(`kube-apiserver ${version.gitVersion} (${version.platform})`);
    assert.match(version.gitVersion, /^v1\.\d+\.\d+/);
  });

  it('joins with a bootstrap token: the CSR names the token, KCM signs it, the node creates itself', async () => {
    const token = await createBootstrapToken(env);
    const name = uniqueName('join');
    const kubelet = await joinNode(name, token.token);

    const certificates = env.kubeConfig.makeApiClient(CertificatesV1Api);
    const csr = await certificates.readCertificateSigningRequest({ name: kubelet.csrName ?? '' });
    assert.equal(
      csr.spec.username,
      `system:bootstrap:${token.id}`,
      'the API server stamps the bootstrap identity',
    );
    assert.ok(csr.spec.groups?.includes('system:bootstrappers:kubeadm:default-node-token'));
    assert.equal(csr.spec.signerName, KUBELET_SIGNER);
    assert.ok(
      csr.status?.conditions?.some((c) => c.type === 'Approved' && c.status === 'True'),
      'approved by csrapproving',
    );
    assert.ok(csr.status?.certificate, 'signed by csrsigning');

    const node = await env.core.readNode({ name });
    assert.equal(node.metadata?.name, name);

    // The client that created the Node authenticates as system:node:<name> in system:nodes.
    const asNode = nodeKubeConfig(kubelet.credentials, name);
    const review = await asNode.makeApiClient(AuthenticationV1Api).createSelfSubjectReview({ body: {} });
    assert.equal(review.status?.userInfo?.username, `system:node:${name}`);
    assert.ok(review.status?.userInfo?.groups?.includes('system:nodes'));
  });

  it('joins from a v1beta3 JoinConfiguration too', async () => {
    const token = await createBootstrapToken(env);
    const name = uniqueName('beta3');
    const kubelet = new SimulatedKubelet(
      name,
      parseJoinConfiguration(joinConfiguration(env, token.token, { apiVersion: 'v1beta3' })),
    );
    kubelets.push(kubelet);
    await kubelet.join();
    assert.equal((await env.core.readNode({ name })).metadata?.name, name);
  });

  it('fails the join with a clear error when the token secret is wrong', async () => {
    const token = await createBootstrapToken(env);
    const wrong = `${token.id}.${'x'.repeat(16)}`;
    await assert.rejects(joinNode(uniqueName('wrong'), wrong), (error: Error) => {
      assert.ok(error instanceof JoinError);
      assert.match(error.message, /JWS signature/);
      return true;
    });
  });

  it('rejects a token unknown to the cluster at the TLS bootstrap (401), even skipping discovery checks', async () => {
    // Discovery with a good token, then the TLS bootstrap with an unknown one.
    const good = await createBootstrapToken(env);
    const config = parseJoinConfiguration(joinConfiguration(env, good.token));
    const kubelet = new SimulatedKubelet(uniqueName('unknown'), {
      ...config,
      tlsBootstrapToken: 'abcdef.0123456789abcdef',
    });
    kubelets.push(kubelet);
    await assert.rejects(kubelet.join(), /rejected the bootstrap token \(401 Unauthorized\)/);
  });

  describe('file discovery (discovery.file.kubeConfigPath), as kubeadm does it', () => {
    const path = '/etc/kubernetes/nodeflavor-discovery.conf';
    async function joinByFile(name: string, files: Record<string, string>, timeoutMs = 30_000) {
      // A token without usage-bootstrap-signing: cluster-info never gets a signature for it.
      const token = await createBootstrapToken(env, { signing: false });
      const kubelet = new SimulatedKubelet(
        name,
        parseJoinConfiguration(joinConfiguration(env, token.token, { discoveryFile: path })),
        { timeoutMs, readFile: (p) => files[p] },
      );
      kubelets.push(kubelet);
      return { token, kubelet, joined: kubelet.join() };
    }

    it('joins with the cluster CA from the discovery kubeconfig; no signature is involved', async () => {
      const name = uniqueName('by-file');
      const { token, joined } = await joinByFile(name, { [path]: discoveryKubeconfig(env) });
      await joined;
      assert.equal((await env.core.readNode({ name })).metadata?.name, name);
      const clusterInfo = await env.core.readNamespacedConfigMap({
        name: 'cluster-info',
        namespace: 'kube-public',
      });
      assert.equal(clusterInfo.data?.[`jws-kubeconfig-${token.id}`], undefined);
    });

    it('refuses an API server the CA in the file does not vouch for, before the token is used', async () => {
      const other = await createCertificateAuthority('not-the-cluster-ca', 3_600_000);
      const { kubelet, joined } = await joinByFile(
        uniqueName('wrong-ca'),
        { [path]: discoveryKubeconfig(env, other.certPem) },
        2_000,
      );
      await assert.rejects(joined, (error: Error) => {
        assert.ok(error instanceof JoinError);
        assert.match(error.message, /couldn't validate the identity of the API Server: Abort reading/);
        assert.match(error.message, /certificate/i);
        return true;
      });
      assert.equal(kubelet.csrName, undefined, 'no CSR: the token never reached that server');
    });

    it('fails clearly when the discovery kubeconfig is not on the node', async () => {
      const { joined } = await joinByFile(uniqueName('no-file'), {});
      await assert.rejects(joined, new RegExp(`open ${path}: no such file or directory`));
    });
  });

  it('kubelet-sim CLI: exit 0 and a kubeconfig on success; exit 1 and one line on a bad token', async () => {
    const token = await createBootstrapToken(env);
    const config = join(workdir, 'join.yaml');
    writeFileSync(config, joinConfiguration(env, token.token));
    const kubeconfig = join(workdir, 'node.kubeconfig');
    const name = uniqueName('cli');
    const ok = await run(
      process.execPath,
      [
        '--import',
        'tsx',
        'test/e2e/kubelet-sim/main.ts',
        'join',
        '--config',
        config,
        '--name',
        name,
        '--write-kubeconfig',
        kubeconfig,
      ],
      { cwd: process.cwd() },
    );
    assert.match(ok.stdout, new RegExp(`node ${name} joined`));
    const { KubeConfig } = await import('@kubernetes/client-node');
    const asNode = new KubeConfig();
    asNode.loadFromFile(kubeconfig);
    const node = await asNode.makeApiClient(CoreV1Api).readNode({ name });
    assert.equal(node.metadata?.name, name);

    const bad = join(workdir, 'bad.yaml');
    writeFileSync(bad, joinConfiguration(env, `${token.id}.${'y'.repeat(16)}`));
    const failed = await run(
      process.execPath,
      [
        '--import',
        'tsx',
        'test/e2e/kubelet-sim/main.ts',
        'join',
        '--config',
        bad,
        '--name',
        uniqueName('cli-bad'),
      ],
      { cwd: process.cwd() },
    ).then(
      () => undefined,
      (error: { code: number; stderr: string }) => error,
    );
    assert.ok(failed, 'the join must fail');
    assert.equal(failed.code, 1);
    const lines = failed.stderr.trim().split('\n');
    assert.equal(lines.length, 1, `one line, got: ${failed.stderr}`);
    assert.match(lines[0] ?? '', /^kubelet-sim: join failed: .*JWS signature/);
  });

  it("Node authorizer: node A's credentials cannot modify node B", async () => {
    const token = await createBootstrapToken(env);
    const nodeA = await joinNode(uniqueName('node-a'), token.token);
    const nodeB = await joinNode(uniqueName('node-b'), token.token);
    const result = await nodeA
      .client()
      .request(
        'PATCH',
        `/api/v1/nodes/${nodeB.nodeName}`,
        { metadata: { labels: { 'example.com/x': 'y' } } },
        'application/merge-patch+json',
      );
    assert.equal(result.status, 403, result.text);
    // ...while it may modify itself.
    const own = await nodeA
      .client()
      .request(
        'PATCH',
        `/api/v1/nodes/${nodeA.nodeName}`,
        { metadata: { labels: { 'example.com/x': 'y' } } },
        'application/merge-patch+json',
      );
    assert.equal(own.status, 200, own.text);
  });

  it('NodeRestriction: a kubelet cannot register with a node-restriction.kubernetes.io/ label', async () => {
    const token = await createBootstrapToken(env);
    await assert.rejects(
      joinNode(uniqueName('restricted'), token.token, {
        extraLabels: { 'node-restriction.kubernetes.io/trusted': 'true' },
      }),
      (error: Error) => {
        assert.match(error.message, /HTTP 403/);
        assert.match(error.message, /node-restriction\.kubernetes\.io/);
        return true;
      },
    );
  });
});
