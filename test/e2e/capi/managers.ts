// Cluster API as real processes against the local control plane: its CRDs from the very module
// version build-binaries.sh built (labelled with the contract versions, as the release manifests'
// kustomization labels them), the core manager (Cluster, MachineDeployment, MachineSet, Machine
// controllers) and the kubeadm bootstrap provider (CABPK). Both run out of the cluster with the
// admin kubeconfig, as the release's manager Deployments run with cluster-admin-like RBAC. Their
// admission webhooks are served but not registered, so the tests set the defaults the webhooks
// would (cluster-objects.ts).
import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { KubeConfig } from '@kubernetes/client-node';
import { parse } from 'yaml';
import { createCertificateAuthority, issueCertificate } from '../../../src/pki/certs.ts';
import { loadKubeConfig } from '../../../src/runtime/config.ts';
import { kubeJson } from '../../../src/runtime/fetch.ts';
import { freePort } from '../cluster/ports.ts';
import { ManagedProcess } from '../cluster/process.ts';
import { clusterApiPaths } from '../cluster/versions.ts';
import { waitEstablished } from '../support/nodeflavor.ts';

/** The contract labels `kubectl apply` of the release manifests puts on every Cluster API CRD. */
const CONTRACT_LABELS = { 'cluster.x-k8s.io/v1beta1': 'v1beta1', 'cluster.x-k8s.io/v1beta2': 'v1beta2' };

interface Crd {
  metadata: { name: string; labels?: Record<string, string> };
}

/**
 * Applies CRDs and waits until each is Established. Sent as they are (server-side apply of the
 * raw JSON): client-node's typed round trip drops `x-kubernetes-int-or-string`, which Cluster
 * API's CRDs use.
 */
export async function applyCrds(kubeconfigPath: string, crds: Crd[]): Promise<void> {
  const admin = loadKubeConfig(kubeconfigPath);
  for (const crd of crds)
    await kubeJson(
      admin,
      'PATCH',
      `/apis/apiextensions.k8s.io/v1/customresourcedefinitions/${crd.metadata.name}`,
      {
        contentType: 'application/apply-patch+yaml',
        query: { fieldManager: 'nodeflavor-e2e', force: true },
        body: crd,
      },
    );
  const kubeConfig = new KubeConfig();
  kubeConfig.loadFromFile(kubeconfigPath);
  await waitEstablished(
    kubeConfig,
    crds.map((crd) => crd.metadata.name),
  );
}

export async function installClusterApiCrds(kubeconfigPath: string): Promise<void> {
  const dir = clusterApiPaths().crdDir;
  const crds = readdirSync(dir)
    .filter((f) => f.endsWith('.yaml'))
    .map((f) => parse(readFileSync(join(dir, f), 'utf8')) as Crd)
    .map((crd) => ({
      ...crd,
      metadata: { ...crd.metadata, labels: { ...crd.metadata.labels, ...CONTRACT_LABELS } },
    }));
  await applyCrds(kubeconfigPath, crds);
}

export interface ClusterApiManagers {
  core: ManagedProcess;
  bootstrap: ManagedProcess;
  stop: () => Promise<void>;
}

/** Starts both managers (after the CRDs); their logs go to `dir`. */
export async function startClusterApi(kubeconfigPath: string, dir: string): Promise<ClusterApiManagers> {
  await installClusterApiCrds(kubeconfigPath);
  // The webhook servers need a certificate to start, though nothing calls them here.
  const ca = await createCertificateAuthority('capi-webhooks', 24 * 3_600_000);
  const serving = await issueCertificate(ca, {
    commonName: 'capi-webhooks',
    usage: 'server',
    validFor: 24 * 3_600_000,
    dnsNames: ['localhost'],
    ipAddresses: ['127.0.0.1'],
  });
  writeFileSync(join(dir, 'tls.crt'), serving.certPem);
  writeFileSync(join(dir, 'tls.key'), serving.keyPem, { mode: 0o600 });
  const paths = clusterApiPaths();
  const common = async () => [
    `--kubeconfig=${kubeconfigPath}`,
    '--leader-elect=false',
    `--webhook-cert-dir=${dir}`,
    `--webhook-port=${await freePort()}`,
    `--health-addr=127.0.0.1:${await freePort()}`,
    `--diagnostics-address=127.0.0.1:${await freePort()}`,
    '--insecure-diagnostics=true',
    '--sync-period=10m',
    '--v=2',
  ];
  const core = new ManagedProcess(
    'capi-manager',
    paths.coreManager,
    [...(await common())],
    join(dir, 'capi-manager.log'),
  );
  const bootstrap = new ManagedProcess(
    'kubeadm-bootstrap-manager',
    paths.kubeadmBootstrapManager,
    [...(await common())],
    join(dir, 'kubeadm-bootstrap-manager.log'),
  );
  return {
    core,
    bootstrap,
    stop: async () => {
      await Promise.all([core.stop(), bootstrap.stop()]);
    },
  };
}
