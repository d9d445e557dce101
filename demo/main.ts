// `make demo`: the whole idea on a local control plane, no cluster needed.
//  1. a kubeadm-like control plane on 127.0.0.1 (etcd, kube-apiserver, kube-controller-manager);
//  2. the Helm chart's CRDs, RBAC and ServiceAccount applied; nodeflavor runs as that
//     ServiceAccount (controller + admission webhook + token issuer);
//  3. FlavorClasses sweet and sour; a node-admin "portal" identity asks the issuer API for one
//     join token of each; two nodes join with the returned JoinConfigurations: real ones (`kubeadm
//     join`, kubelet, containerd) where the host allows it (root on Linux with the packages
//     `make tools` installs), else simulated kubelets, and the demo says which;
//  4. a table of the nodes with their flavor, taints and verification; one kubelet trying to
//     label itself sweet, refused; on real nodes kube-scheduler places a sweet workload; then
//     everything is shut down.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ControlPlane } from '../test/e2e/cluster/controlplane.ts';
import { ManagedProcess, startJanitor } from '../test/e2e/cluster/process.ts';
import { KubeHttp } from '../test/e2e/kubelet-sim/http.ts';
import type { SimulatedKubelet } from '../test/e2e/kubelet-sim/kubelet.ts';
import {
  PAUSE_IMAGE,
  type RealNode,
  RealNodeHost,
  realNodesUnsupported,
} from '../test/e2e/realnode/real-node.ts';
import { installChartOutOfCluster } from '../test/e2e/support/chart.ts';
import { e2eEnvironment } from '../test/e2e/support/environment.ts';
import { applyFlavorClass, joinWith } from '../test/e2e/support/nodeflavor.ts';
import { type RunningTpm, swtpmMissing } from '../test/e2e/support/swtpm.ts';
import { waitFor } from '../test/e2e/support/wait.ts';
import { attestedJoin } from './attested.ts';
import { freePort, issueThroughApi, nodeTable, portalToken, readIssuerCa } from './steps.ts';

const NAMESPACE = 'nodeflavor';
const say = (line: string) => console.log(`==> ${line}`);

async function main(): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), 'nodeflavor-demo-'));
  // Removed however the demo ends, also when it is killed (e.g. `make demo | head`).
  const janitor = startJanitor(dir);
  const kubelets: SimulatedKubelet[] = [];
  const realNodes: RealNode[] = [];
  let host: RealNodeHost | undefined;
  let operator: ManagedProcess | undefined;
  const tpms: RunningTpm[] = [];
  const noRealNodes = realNodesUnsupported();
  say(
    noRealNodes
      ? `starting a local control plane (etcd, kube-apiserver, kube-controller-manager); the nodes will be SIMULATED kubelets: ${noRealNodes}`
      : 'starting a local control plane (etcd, kube-apiserver, kube-controller-manager, kube-scheduler) for real nodes',
  );
  const plane = await ControlPlane.start({
    log: (line) => console.log(`    ${line}`),
    scheduler: !noRealNodes,
  });
  const stopAll = async () => {
    for (const kubelet of kubelets) kubelet.stop();
    for (const tpm of tpms) await tpm.stop();
    await host?.stop();
    await operator?.stop();
    await plane.stop();
    rmSync(dir, { recursive: true, force: true });
    janitor.release();
  };
  process.once('SIGINT', () => void stopAll().then(() => process.exit(130)));
  try {
    process.env.E2E_KUBECONFIG = plane.kubeconfigPath;
    const env = await e2eEnvironment();
    console.log(`    kube-apiserver ${await plane.serverVersion()} at ${plane.server}`);

    say('applying the Helm chart (CRDs, RBAC, ServiceAccount) and starting nodeflavor as its ServiceAccount');
    const install = await installChartOutOfCluster(env, { namespace: NAMESPACE, dir });
    const [webhookPort, issuerPort, metricsPort] = [await freePort(), await freePort(), await freePort()];
    operator = new ManagedProcess(
      'nodeflavor',
      process.execPath,
      [
        '--import',
        'tsx',
        join(import.meta.dirname, '..', 'src', 'cli', 'nodeflavor.ts'),
        'run',
        `--kubeconfig=${install.kubeconfigPath}`,
        `--namespace=${NAMESPACE}`,
        `--service-account=${install.serviceAccount}`,
        `--webhook-address=127.0.0.1:${webhookPort}`,
        `--webhook-url=https://127.0.0.1:${webhookPort}/validate-nodes`,
        `--issuer-address=127.0.0.1:${issuerPort}`,
        `--metrics-address=127.0.0.1:${metricsPort}`,
        '--log-level=warn',
        // Attested joins (ADR 0014): files the demo writes before it issues an attested token.
        `--attestation-url=https://127.0.0.1:${issuerPort}`,
        `--attestation-ca-file=${join(dir, 'issuer-ca.pem')}`,
        `--tpm-manufacturer-ca-file=${join(dir, 'tpm-manufacturers.pem')}`,
      ],
      join(dir, 'nodeflavor.log'),
    );
    await waitFor(
      async () => (await fetch(`http://127.0.0.1:${metricsPort}/readyz`).catch(() => undefined))?.ok === true,
      { what: 'nodeflavor to be ready', timeoutMs: 90_000, intervalMs: 250 },
    ).catch((error: Error) => {
      throw new Error(`${error.message}\n${operator?.lastLines() ?? ''}`);
    });
    console.log(
      `    controller, admission webhook (:${webhookPort}) and token issuer (:${issuerPort}) ready`,
    );

    say('creating FlavorClasses sweet and sour');
    await applyFlavorClass(env, 'sweet', {
      description: 'nodes we run ourselves',
      labels: { 'nodeflavor.io/flavor': 'sweet' },
      taints: [{ key: 'nodeflavor.io/dedicated', value: 'sweet', effect: 'NoSchedule' }],
    });
    await applyFlavorClass(env, 'sour', {
      description: 'nodes a third party runs',
      labels: { 'nodeflavor.io/flavor': 'sour' },
    });

    say('the node-admin portal asks the issuer API for one token of each flavor');
    const bearer = await portalToken(env, NAMESPACE, ['sweet', 'sour']);
    const ca = await readIssuerCa(env, NAMESPACE);
    const url = `https://127.0.0.1:${issuerPort}`;
    const sweet = await issueThroughApi(url, ca, bearer, 'sweet');
    const sour = await issueThroughApi(url, ca, bearer, 'sour');
    console.log(
      `    POST /v1/tokens → ${sweet.id} and ${sour.id}: ${sweet.body.length} and ${sour.body.length} bytes (same size: nothing tells the flavors apart)`,
    );

    if (noRealNodes) {
      say('two simulated kubelets join with the returned JoinConfigurations (kubeadm join --config)');
      kubelets.push(await joinWith(sweet, 'node-a'));
      kubelets.push(await joinWith(sour, 'node-b'));
      // Like real kubelets: keep the Lease renewed and report Ready.
      for (const kubelet of kubelets) kubelet.startHeartbeat(2000);
    } else {
      say(
        'two real nodes run `kubeadm join --config join.yaml` with the returned JoinConfigurations and discovery kubeconfigs',
      );
      host = await RealNodeHost.start(plane.server);
      for (const [name, issued] of [
        ['node-a', sweet],
        ['node-b', sour],
      ] as const) {
        const started = Date.now();
        const node = await host.startNode({
          name,
          joinConfiguration: issued.joinConfiguration,
          discoveryKubeconfig: issued.discoveryKubeconfig,
        });
        realNodes.push(node);
        await node.joined();
        console.log(
          `    ${name}: kubeadm join exited 0 after ${((Date.now() - started) / 1000).toFixed(1)} s (real kubelet on containerd)`,
        );
      }
    }
    await waitFor(
      async () => {
        const nodes = await env.core.listNode({ labelSelector: 'nodeflavor.io/flavor' });
        const settled = nodes.items.every(
          (n) => !n.spec?.taints?.some((t) => t.key.startsWith('node.kubernetes.io/')),
        );
        return nodes.items.length === 2 && settled;
      },
      { what: 'both nodes to be verified, flavored and Ready', timeoutMs: 60_000 },
    );
    console.log('');
    console.log(await nodeTable(env));
    console.log('');

    say('node-b (sour) tries to label itself sweet with its own kubelet credentials');
    const nodeB = realNodes[1];
    const kubeletB = nodeB
      ? new KubeHttp(env.server, {
          ca: env.caPem,
          cert: nodeB.kubeletClientPem(),
          key: nodeB.kubeletClientPem(),
        })
      : kubelets[1]?.client();
    const attempt = await kubeletB?.request(
      'PATCH',
      '/api/v1/nodes/node-b',
      { metadata: { labels: { 'nodeflavor.io/flavor': 'sweet' } } },
      'application/merge-patch+json',
    );
    const message = (attempt?.body as { message?: string } | undefined)?.message ?? attempt?.text;
    console.log(`    HTTP ${attempt?.status}: ${message}`);
    if (attempt?.status !== 403) throw new Error('the self-label attempt was not refused');
    const after = await env.core.readNode({ name: 'node-b' });
    console.log(`    node-b is still ${after.metadata?.labels?.['nodeflavor.io/flavor']}`);

    if (realNodes.length > 0) {
      say("kube-scheduler places a workload with the README's nodeSelector and toleration");
      await env.core.createNamespacedPod({
        namespace: 'default',
        body: {
          metadata: { name: 'payments' },
          spec: {
            nodeSelector: { 'nodeflavor.io/flavor': 'sweet' },
            tolerations: [
              { key: 'nodeflavor.io/dedicated', operator: 'Equal', value: 'sweet', effect: 'NoSchedule' },
            ],
            containers: [{ name: 'app', image: PAUSE_IMAGE, imagePullPolicy: 'Never' }],
          },
        },
      });
      const pod = await waitFor(
        async () => {
          const p = await env.core.readNamespacedPod({ name: 'payments', namespace: 'default' });
          return p.status?.phase === 'Running' ? p : undefined;
        },
        { what: 'the payments Pod to run', timeoutMs: 90_000 },
      );
      console.log(`    pod payments is ${pod.status?.phase} on ${pod.spec?.nodeName}`);
    }

    say('an insider with an unused sour token asks for a certificate as node-a (name squatting)');
    const squatter = await issueThroughApi(url, ca, bearer, 'sour');
    const squat = await joinWith(squatter, 'node-a').then(
      () => 'joined',
      (error: Error) => error.message,
    );
    console.log(`    ${squat}`);
    if (!/denied: NameTaken/.test(squat)) throw new Error('the squatter was not refused');
    const victim = await env.core.readNode({ name: 'node-a' });
    console.log(`    node-a is still ${victim.metadata?.labels?.['nodeflavor.io/flavor']}`);

    if (realNodes.length > 0 && host) {
      const tpmMissing = swtpmMissing();
      if (tpmMissing) say(`attested join skipped: no software TPM here (${tpmMissing})`);
      else await attestedJoin({ env, host, dir, url, ca, bearer, realNodes, tpms, say });
    }

    say('shutting down');
  } catch (error) {
    console.error(`demo failed: ${(error as Error).message}`);
    for (const node of realNodes) console.error(node.logTail(10));
    process.exitCode = 1;
  } finally {
    await stopAll();
  }
  console.log('done: no process and no temp dir left behind');
}

await main();
