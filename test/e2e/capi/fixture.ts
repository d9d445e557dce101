// Everything the Cluster API e2e file (and `make demo-capi`) runs, on one local control plane that
// is both the management and the workload cluster:
//   - workload side: nodeflavor as the chart's ServiceAccount (controller, admission webhook,
//     issuer on 127.0.0.1), FlavorClasses, and a ServiceAccount `capi-caller` that `nodeflavor capi`
//     calls the issuer as (RBAC verb use on the flavors granted with allowFlavors);
//   - management side: Cluster API's CRDs and both managers as processes, the stand-in provider's
//     CRDs, deploy/capi/nodeflavor-capi.yaml (RBAC, the pause policy; not its Deployment) and
//     `nodeflavor capi` as its ServiceAccount with that RBAC, the issuer access Secret;
//   - real nodes (test/e2e/realnode) that the stand-in provider boots from bootstrap data.
import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { parseAllDocuments } from 'yaml';
import { accessSecretName } from '../../../src/capi/issuer-access.ts';
import { IssuerClient } from '../../../src/capi/issuer-client.ts';
import { Secret } from '../../../src/flavor/secret.ts';
import { loadKubeConfig } from '../../../src/runtime/config.ts';
import type { KubeConfig } from '../../../src/runtime/kubeconfig.ts';
import { DEFAULT_ISSUER_AUDIENCE } from '../../../src/tokenissuer/config.ts';
import { applyObjects } from '../cluster/apply.ts';
import { ControlPlane, kubeconfigYaml } from '../cluster/controlplane.ts';
import { freePort } from '../cluster/ports.ts';
import { type ManagedProcess, startJanitor } from '../cluster/process.ts';
import { RealNodeHost, realNodesUnsupported } from '../realnode/real-node.ts';
import { installChartOutOfCluster } from '../support/chart.ts';
import { type E2EEnvironment, loadEnvironment } from '../support/environment.ts';
import {
  applyFlavorClass,
  type FlavorClassSpecInput,
  flavorUseRbac,
  nodeflavorProcess,
  serviceAccountToken,
} from '../support/nodeflavor.ts';
import { waitFor } from '../support/wait.ts';
import { workloadClusterObjects } from './cluster-objects.ts';
import { LocalProvider } from './local-provider.ts';
import { localProviderCrds } from './local-provider-crds.ts';
import { applyCrds, type ClusterApiManagers, startClusterApi } from './managers.ts';

const repoRoot = join(import.meta.dirname, '..', '..', '..');
export const OPERATOR_NAMESPACE = 'nodeflavor';
export const CAPI_NAMESPACE = 'nodeflavor-capi';
export const CALLER = 'capi-caller';

export interface CapiFixtureOptions {
  /** The workload cluster's FlavorClasses. */
  flavorClasses: Record<string, FlavorClassSpecInput>;
  /** The Cluster object's namespace and name. */
  cluster: { namespace: string; name: string };
  /** `nodeflavor capi` flags besides the fixture's own. */
  capiArgs?: string[];
  log?: (line: string) => void;
  /**
   * Where real nodes cannot run (no root), join simulated kubelets instead of failing (the demo);
   * the e2e suite always runs real nodes.
   */
  simulatedNodesWhenUnsupported?: boolean;
}

export class CapiFixture {
  readonly dir: string;
  readonly plane: ControlPlane;
  readonly env: E2EEnvironment;
  /** Our own KubeConfig (admin) for kubeJson. */
  readonly admin: KubeConfig;
  readonly issuerUrl: string;
  readonly issuerCa: string;
  readonly host: RealNodeHost | undefined;
  readonly provider: LocalProvider;
  /** Where `nodeflavor capi` serves /metrics. */
  readonly capiMetricsPort: number;
  private readonly processes: ManagedProcess[];
  private readonly managers: ClusterApiManagers;
  private readonly janitor: { release: () => void };
  readonly cluster: { namespace: string; name: string };

  private constructor(parts: {
    dir: string;
    plane: ControlPlane;
    env: E2EEnvironment;
    admin: KubeConfig;
    issuerUrl: string;
    issuerCa: string;
    host: RealNodeHost | undefined;
    provider: LocalProvider;
    capiMetricsPort: number;
    processes: ManagedProcess[];
    managers: ClusterApiManagers;
    janitor: { release: () => void };
    cluster: { namespace: string; name: string };
  }) {
    this.dir = parts.dir;
    this.plane = parts.plane;
    this.env = parts.env;
    this.admin = parts.admin;
    this.issuerUrl = parts.issuerUrl;
    this.issuerCa = parts.issuerCa;
    this.host = parts.host;
    this.provider = parts.provider;
    this.capiMetricsPort = parts.capiMetricsPort;
    this.processes = parts.processes;
    this.managers = parts.managers;
    this.janitor = parts.janitor;
    this.cluster = parts.cluster;
  }

  static async start(options: CapiFixtureOptions): Promise<CapiFixture> {
    const say = options.log ?? (() => undefined);
    const dir = mkdtempSync(join(tmpdir(), 'nodeflavor-capi-'));
    const janitor = startJanitor(dir);
    const processes: ManagedProcess[] = [];
    let plane: ControlPlane | undefined;
    let host: RealNodeHost | undefined;
    let managers: ClusterApiManagers | undefined;
    let provider: LocalProvider | undefined;
    try {
      say('starting a local control plane: the management and the workload cluster in one');
      plane = await ControlPlane.start({ log: (line) => say(`  ${line}`) });
      process.env.E2E_KUBECONFIG = plane.kubeconfigPath;
      const env = await loadEnvironment(plane.kubeconfigPath);
      const admin = loadKubeConfig(plane.kubeconfigPath);

      say(
        'workload cluster: nodeflavor (controller, admission webhook, issuer) as the chart’s ServiceAccount',
      );
      const install = await installChartOutOfCluster(env, {
        namespace: OPERATOR_NAMESPACE,
        dir,
        keyRing: true,
      });
      for (const [name, spec] of Object.entries(options.flavorClasses))
        await applyFlavorClass(env, name, spec);
      const [webhookPort, issuerPort, metricsPort] = [await freePort(), await freePort(), await freePort()];
      const operator = nodeflavorProcess(
        'nodeflavor',
        [
          'run',
          `--kubeconfig=${install.kubeconfigPath}`,
          `--namespace=${OPERATOR_NAMESPACE}`,
          `--service-account=${install.serviceAccount}`,
          `--webhook-address=127.0.0.1:${webhookPort}`,
          `--webhook-url=https://127.0.0.1:${webhookPort}/validate-nodes`,
          `--issuer-address=127.0.0.1:${issuerPort}`,
          `--metrics-address=127.0.0.1:${metricsPort}`,
          '--binding-grace=5s',
          '--log-level=warn',
        ],
        join(dir, 'nodeflavor.log'),
      );
      processes.push(operator);
      await waitFor(
        async () =>
          (await fetch(`http://127.0.0.1:${metricsPort}/readyz`).catch(() => undefined))?.ok === true,
        { what: 'nodeflavor to be ready', timeoutMs: 90_000, intervalMs: 250 },
      ).catch((error: Error) => {
        throw new Error(`${error.message}\n${operator.lastLines()}`);
      });
      const issuerCa = await readConfigMapKey(env, OPERATOR_NAMESPACE, 'nodeflavor-issuer-ca', 'ca.crt');

      say('management cluster: Cluster API (core manager, CABPK) and the stand-in provider');
      managers = await startClusterApi(plane.kubeconfigPath, dir);
      processes.push(managers.core, managers.bootstrap);
      await applyCrds(plane.kubeconfigPath, localProviderCrds());
      const noRealNodes = realNodesUnsupported();
      if (noRealNodes && !options.simulatedNodesWhenUnsupported) throw new Error(noRealNodes);
      host = noRealNodes ? undefined : await RealNodeHost.start(plane.server);
      provider = new LocalProvider({
        kubeConfig: admin,
        host,
        log: pino({ level: 'warn' }, pino.destination(join(dir, 'local-provider.log'))),
      });
      await provider.start();

      say('management cluster: nodeflavor capi as its ServiceAccount (deploy/capi/nodeflavor-capi.yaml)');
      await applyObjects(
        plane.kubeconfigPath,
        capiManifestObjects().filter((o) => o.kind !== 'Deployment'),
      );
      const capiKubeconfig = join(dir, 'nodeflavor-capi.kubeconfig');
      const capiMetricsPort = await freePort();
      writeFileSync(
        capiKubeconfig,
        kubeconfigYaml(plane.server, plane.caPem, {
          token: await serviceAccountToken(env, CAPI_NAMESPACE, 'nodeflavor-capi'),
        }),
        { mode: 0o600 },
      );
      const capi = nodeflavorProcess(
        'nodeflavor-capi',
        [
          'capi',
          `--kubeconfig=${capiKubeconfig}`,
          `--namespace=${CAPI_NAMESPACE}`,
          `--metrics-address=127.0.0.1:${capiMetricsPort}`,
          '--log-level=info',
          ...(options.capiArgs ?? []),
        ],
        join(dir, 'nodeflavor-capi.log'),
      );
      processes.push(capi);

      // The identity nodeflavor capi calls the workload issuer as (flavors granted by allowFlavors).
      await applyObjects(plane.kubeconfigPath, [
        {
          apiVersion: 'v1',
          kind: 'ServiceAccount',
          metadata: { name: CALLER, namespace: OPERATOR_NAMESPACE },
        },
      ]);
      const cluster = options.cluster;
      await applyObjects(
        plane.kubeconfigPath,
        workloadClusterObjects({
          ...cluster,
          endpoint: { host: '127.0.0.1', port: Number(new URL(plane.server).port) },
          adminKubeconfig: readFileSync(plane.kubeconfigPath, 'utf8'),
          caCertPem: plane.pki.clusterCa.certPem,
          caKeyPem: plane.pki.clusterCa.keyPem,
        }),
      );
      return new CapiFixture({
        dir,
        plane,
        env,
        admin,
        issuerUrl: `https://127.0.0.1:${issuerPort}`,
        issuerCa,
        host,
        provider,
        capiMetricsPort,
        processes,
        managers,
        janitor,
        cluster,
      });
    } catch (error) {
      await provider?.stop();
      await host?.stop();
      for (const p of processes) await p.stop();
      await plane?.stop();
      rmSync(dir, { recursive: true, force: true });
      janitor.release();
      throw error;
    }
  }

  /** Lets the issuer caller `use` these flavors (a ClusterRole of its own, replaced each time). */
  async allowFlavors(flavors: string[]): Promise<void> {
    await applyObjects(
      this.plane.kubeconfigPath,
      flavorUseRbac(CALLER, { name: CALLER, namespace: OPERATOR_NAMESPACE }, flavors),
    );
  }

  /** A client of the workload issuer as nodeflavor capi's identity (a fresh token of the same ServiceAccount). */
  async issuerClient(): Promise<IssuerClient> {
    const token = await serviceAccountToken(this.env, OPERATOR_NAMESPACE, CALLER, {
      audiences: [DEFAULT_ISSUER_AUDIENCE],
    });
    return new IssuerClient({ url: this.issuerUrl, caPem: this.issuerCa, token: new Secret(token) });
  }

  /** Writes the cluster's issuer access Secret (in nodeflavor capi's namespace): `url` may be wrong on purpose. */
  async writeAccessSecret(url = this.issuerUrl): Promise<void> {
    const token = await serviceAccountToken(this.env, OPERATOR_NAMESPACE, CALLER, {
      audiences: [DEFAULT_ISSUER_AUDIENCE],
    });
    await applyObjects(this.plane.kubeconfigPath, [
      {
        apiVersion: 'v1',
        kind: 'Secret',
        metadata: {
          name: accessSecretName(this.cluster.namespace, this.cluster.name),
          namespace: CAPI_NAMESPACE,
        },
        stringData: { url, 'ca.crt': this.issuerCa, token },
      },
    ]);
  }

  /** The bootstrap token Secrets in kube-system that carry kubeadm's own group (CABPK's tokens). */
  async kubeadmGroupTokens(): Promise<string[]> {
    const secrets = await this.env.core.listNamespacedSecret({
      namespace: 'kube-system',
      fieldSelector: 'type=bootstrap.kubernetes.io/token',
    });
    return secrets.items
      .filter((s) =>
        Buffer.from(s.data?.['auth-extra-groups'] ?? '', 'base64')
          .toString()
          .includes('system:bootstrappers:kubeadm:default-node-token'),
      )
      .map((s) => s.metadata?.name ?? '');
  }

  /** The last lines of every process's log (for a failure message). */
  logs(): string {
    return this.processes.map((p) => p.lastLines()).join('\n');
  }

  async stop(): Promise<void> {
    await this.provider.stop();
    const keep = process.env.NODEFLAVOR_E2E_KEEP_LOGS;
    // Before the nodes go: their logs live in the host's directory.
    if (keep && this.host)
      cpSync(this.host.dir, join(keep, 'nodes'), { recursive: true, filter: (src) => !src.endsWith('.tar') });
    await this.host?.stop();
    for (const p of [...this.processes].reverse()) await p.stop();
    await this.plane.stop();
    if (keep) cpSync(this.dir, keep, { recursive: true, filter: (src) => !src.endsWith('.kubeconfig') });
    rmSync(this.dir, { recursive: true, force: true });
    this.janitor.release();
  }
}

/** The objects of deploy/capi/nodeflavor-capi.yaml, as a user applies them. */
export function capiManifestObjects(): { kind: string; metadata: { name: string } }[] {
  const text = readFileSync(join(repoRoot, 'deploy', 'capi', 'nodeflavor-capi.yaml'), 'utf8');
  return parseAllDocuments(text)
    .map((doc) => doc.toJS() as { kind: string; metadata: { name: string } } | null)
    .filter((o): o is { kind: string; metadata: { name: string } } => o !== null);
}

async function readConfigMapKey(
  env: E2EEnvironment,
  namespace: string,
  name: string,
  key: string,
): Promise<string> {
  return waitFor(
    async () =>
      (await env.core.readNamespacedConfigMap({ namespace, name }).catch(() => undefined))?.data?.[key] ||
      undefined,
    { what: `ConfigMap ${namespace}/${name} to hold ${key}`, timeoutMs: 30_000 },
  );
}
