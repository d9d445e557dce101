// A kubeadm-like control plane on 127.0.0.1: etcd, kube-apiserver and kube-controller-manager
// built from the pinned release, with the PKI, RBAC and cluster-info that `kubeadm init` creates
// for joining nodes. Used by the e2e suite, the benchmarks, `make cluster-up` and the demo.
// With `apiServers: 2`, two kube-apiservers share the etcd and the PKI behind a round-robin
// loopback TCP proxy, as behind a production load balancer: each has its own caches (the 10 s
// bootstrap-token authentication cache among them), and a client's connections alternate.
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { request } from 'node:https';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { stringify } from 'yaml';
import {
  type CertificateAuthority,
  createCertificateAuthority,
  createKeyPairPem,
  issueCertificate,
  type KeyPairPem,
} from '../../../src/pki/certs.ts';
import {
  type ClusterNetworking,
  kubeadmBootstrapObjects,
  kubeadmJoinConfigObjects,
} from './kubeadm-objects.ts';
import { freePort } from './ports.ts';
import { ManagedProcess, startJanitor } from './process.ts';
import { TcpProxy } from './tcp-proxy.ts';
import { requireBinaries, versions } from './versions.ts';

const YEAR = 365 * 24 * 3600 * 1000;
const SERVICE_CIDR = '10.96.0.0/12';
/** The cluster's networking as kubeadm-config states it; real nodes take pod CIDRs from it. */
export const NETWORKING: ClusterNetworking = {
  serviceSubnet: SERVICE_CIDR,
  podSubnet: '10.244.0.0/16',
  dnsDomain: 'cluster.local',
};
/** The `kubernetes` Service's ClusterIP (first address of SERVICE_CIDR), named in the serving cert. */
export const KUBERNETES_SERVICE_IP = '10.96.0.1';
const TMP_PREFIX = 'nodeflavor-cp-';

export interface ControlPlaneOptions {
  /** Where logs, PKI and etcd data go; a fresh temp dir by default (removed on stop). */
  dir?: string;
  /** Progress lines (default: stderr). */
  log?: (line: string) => void;
  startTimeoutMs?: number;
  /**
   * kube-apiserver audit logging at level Metadata (no bodies), for requests by users in these
   * groups only (cheap), into <dir>/audit.log. Off by default.
   */
  auditUserGroups?: string[];
  /** kube-apiserver's /debug/pprof (benchmarks that profile it); off by default. */
  profiling?: boolean;
  /**
   * Run kube-scheduler too, for real nodes whose Pods must be placed (default false: simulated
   * kubelets run no Pods, and benchmarks should not pay for a scheduler watching 10,000 nodes).
   */
  scheduler?: boolean;
  /**
   * kube-apiservers on the one etcd (default 1). With 2, `server` is a round-robin TCP proxy in
   * front of both (every client, kube-controller-manager included, goes through it).
   */
  apiServers?: 1 | 2;
  /**
   * kube-controller-manager's --controllers (default kubeadm's: `*,bootstrapsigner,tokencleaner`).
   * The discovery benchmark runs one without the bootstrap signer, as a cluster that uses only
   * file discovery may.
   */
  controllers?: string;
}

/** Where a control plane started with auditUserGroups writes its audit log. */
export const AUDIT_LOG = 'audit.log';

interface Pki {
  clusterCa: CertificateAuthority;
  signingCa: CertificateAuthority;
  serving: KeyPairPem;
  admin: KeyPairPem;
  controllerManager: KeyPairPem;
  scheduler: KeyPairPem;
  /** The API server's client certificate towards kubelets (logs, exec, port-forward). */
  kubeletClient: KeyPairPem;
  serviceAccount: { privateKeyPem: string; publicKeyPem: string };
}

async function createPki(): Promise<Pki> {
  const clusterCa = await createCertificateAuthority('kubernetes', 10 * YEAR);
  // A separate CA signs kubelet client CSRs (kube-controller-manager's csrsigning); the
  // apiserver trusts both through a client CA bundle.
  const signingCa = await createCertificateAuthority('kubernetes-csr-signer', 10 * YEAR);
  const serving = await issueCertificate(clusterCa, {
    commonName: 'kube-apiserver',
    usage: 'server',
    validFor: YEAR,
    dnsNames: [
      'localhost',
      'kubernetes',
      'kubernetes.default',
      'kubernetes.default.svc',
      'kubernetes.default.svc.cluster.local',
    ],
    ipAddresses: ['127.0.0.1', KUBERNETES_SERVICE_IP],
  });
  const admin = await issueCertificate(clusterCa, {
    commonName: 'kubernetes-admin',
    organizations: ['system:masters'],
    usage: 'client',
    validFor: YEAR,
  });
  const controllerManager = await issueCertificate(clusterCa, {
    commonName: 'system:kube-controller-manager',
    usage: 'client',
    validFor: YEAR,
  });
  const scheduler = await issueCertificate(clusterCa, {
    commonName: 'system:kube-scheduler',
    usage: 'client',
    validFor: YEAR,
  });
  // kubeadm gives this identity the kubelet API through kubeadm:cluster-admins; system:masters
  // is the same here.
  const kubeletClient = await issueCertificate(clusterCa, {
    commonName: 'kube-apiserver-kubelet-client',
    organizations: ['system:masters'],
    usage: 'client',
    validFor: YEAR,
  });
  return {
    clusterCa,
    signingCa,
    serving,
    admin,
    controllerManager,
    scheduler,
    kubeletClient,
    serviceAccount: await createKeyPairPem(),
  };
}

export function kubeconfigYaml(
  server: string,
  caPem: string,
  user: KeyPairPem | { token: string },
  name = 'local',
): string {
  const userEntry =
    'token' in user
      ? { token: user.token }
      : {
          'client-certificate-data': Buffer.from(user.certPem).toString('base64'),
          'client-key-data': Buffer.from(user.keyPem).toString('base64'),
        };
  return stringify({
    apiVersion: 'v1',
    kind: 'Config',
    clusters: [
      { name, cluster: { server, 'certificate-authority-data': Buffer.from(caPem).toString('base64') } },
    ],
    users: [{ name, user: userEntry }],
    contexts: [{ name, context: { cluster: name, user: name } }],
    'current-context': name,
  });
}

/** One HTTPS GET with a client certificate; resolves to [status, body] or rejects on network error. */
function httpsGet(url: string, caPem: string | undefined, client?: KeyPairPem): Promise<[number, string]> {
  return new Promise((resolve, reject) => {
    const req = request(
      url,
      {
        method: 'GET',
        ca: caPem,
        rejectUnauthorized: caPem !== undefined,
        cert: client?.certPem,
        key: client?.keyPem,
        timeout: 5000,
      },
      (res) => {
        let body = '';
        res.setEncoding('utf8');
        res.on('data', (chunk) => {
          body += chunk;
        });
        res.on('end', () => resolve([res.statusCode ?? 0, body]));
      },
    );
    req.on('timeout', () => req.destroy(new Error('timeout')));
    req.on('error', reject);
    req.end();
  });
}

/** Removes temp dirs of control planes whose owning process is gone (e.g. after a SIGKILL). */
function sweepStaleDirs(): void {
  for (const entry of readdirSync(tmpdir())) {
    if (!entry.startsWith(TMP_PREFIX)) continue;
    const dir = join(tmpdir(), entry);
    try {
      const owner = Number(readFileSync(join(dir, 'owner.pid'), 'utf8'));
      process.kill(owner, 0);
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'EPERM') continue;
      rmSync(dir, { recursive: true, force: true });
    }
  }
}

export class ControlPlane {
  readonly dir: string;
  readonly server: string;
  readonly pki: Pki;
  private readonly ownsDir: boolean;
  private readonly components = new Map<string, ManagedProcess>();
  private readonly apiserverArgs: string[][];
  private readonly janitor: { release: () => void } | undefined;
  /** With several API servers: the load balancer in front of them (`server` is its address). */
  readonly loadBalancer: TcpProxy | undefined;
  /** Each kube-apiserver's own address (one entry unless `apiServers: 2`). */
  readonly apiServerUrls: string[];

  private constructor(
    dir: string,
    ownsDir: boolean,
    server: string,
    pki: Pki,
    apiserverArgs: string[][],
    janitor: { release: () => void } | undefined,
    loadBalancer: TcpProxy | undefined,
    apiServerUrls: string[],
  ) {
    this.janitor = janitor;
    this.dir = dir;
    this.ownsDir = ownsDir;
    this.server = server;
    this.pki = pki;
    this.apiserverArgs = apiserverArgs;
    this.loadBalancer = loadBalancer;
    this.apiServerUrls = apiServerUrls;
  }

  /** The admin (system:masters) kubeconfig file. */
  get kubeconfigPath(): string {
    return join(this.dir, 'admin.kubeconfig');
  }

  get caPem(): string {
    return this.pki.clusterCa.certPem;
  }

  static async start(options: ControlPlaneOptions = {}): Promise<ControlPlane> {
    const log = options.log ?? ((line: string) => process.stderr.write(`[control-plane] ${line}\n`));
    const timeout = options.startTimeoutMs ?? 90_000;
    const binaries = requireBinaries();
    sweepStaleDirs();
    const ownsDir = options.dir === undefined;
    const dir = options.dir ?? mkdtempSync(join(tmpdir(), TMP_PREFIX));
    mkdirSync(join(dir, 'pki'), { recursive: true });
    writeFileSync(join(dir, 'owner.pid'), String(process.pid));
    const janitor = ownsDir ? startJanitor(dir) : undefined;

    const pki = await createPki();
    const file = (name: string, content: string) => {
      const path = join(dir, 'pki', name);
      writeFileSync(path, content, { mode: 0o600 });
      return path;
    };
    const paths = {
      ca: file('ca.crt', pki.clusterCa.certPem),
      caKey: file('ca.key', pki.clusterCa.keyPem),
      clientCa: file('client-ca.crt', `${pki.clusterCa.certPem.trim()}\n${pki.signingCa.certPem.trim()}\n`),
      signingCa: file('csr-signer.crt', pki.signingCa.certPem),
      signingKey: file('csr-signer.key', pki.signingCa.keyPem),
      servingCert: file('apiserver.crt', pki.serving.certPem),
      servingKey: file('apiserver.key', pki.serving.keyPem),
      saKey: file('sa.key', pki.serviceAccount.privateKeyPem),
      saPub: file('sa.pub', pki.serviceAccount.publicKeyPem),
      kubeletClientCert: file('apiserver-kubelet-client.crt', pki.kubeletClient.certPem),
      kubeletClientKey: file('apiserver-kubelet-client.key', pki.kubeletClient.keyPem),
    };

    const [etcdClient, etcdPeer, kcmPort, schedulerPort] = await Promise.all([
      freePort(),
      freePort(),
      freePort(),
      freePort(),
    ]);
    const apiPorts: number[] = [];
    for (let i = 0; i < (options.apiServers ?? 1); i++) apiPorts.push(await freePort());
    const apiServerUrls = apiPorts.map((port) => `https://127.0.0.1:${port}`);
    const loadBalancer =
      apiPorts.length > 1
        ? await TcpProxy.start({ upstreams: apiPorts.map((port) => ({ host: '127.0.0.1', port })) })
        : undefined;
    const server = loadBalancer?.url ?? (apiServerUrls[0] as string);
    writeFileSync(
      join(dir, 'admin.kubeconfig'),
      kubeconfigYaml(server, pki.clusterCa.certPem, pki.admin, 'nodeflavor-local'),
      {
        mode: 0o600,
      },
    );
    writeFileSync(
      join(dir, 'controller-manager.kubeconfig'),
      kubeconfigYaml(server, pki.clusterCa.certPem, pki.controllerManager),
      {
        mode: 0o600,
      },
    );
    writeFileSync(
      join(dir, 'scheduler.kubeconfig'),
      kubeconfigYaml(server, pki.clusterCa.certPem, pki.scheduler),
      { mode: 0o600 },
    );

    const apiserverArgs = [
      `--etcd-servers=http://127.0.0.1:${etcdClient}`,
      '--bind-address=127.0.0.1',
      '--advertise-address=127.0.0.1',
      '--endpoint-reconciler-type=none',
      `--tls-cert-file=${paths.servingCert}`,
      `--tls-private-key-file=${paths.servingKey}`,
      `--client-ca-file=${paths.clientCa}`,
      '--enable-bootstrap-token-auth=true',
      '--authorization-mode=Node,RBAC',
      '--enable-admission-plugins=NodeRestriction,ValidatingAdmissionWebhook,ValidatingAdmissionPolicy',
      '--anonymous-auth=true',
      '--allow-privileged=true',
      '--service-account-issuer=https://kubernetes.default.svc.cluster.local',
      `--service-account-key-file=${paths.saPub}`,
      `--service-account-signing-key-file=${paths.saKey}`,
      `--service-cluster-ip-range=${SERVICE_CIDR}`,
      `--profiling=${options.profiling === true}`,
      // Webhooks served by Pods: dial the Service's endpoint (a Pod IP on cni0), as there is no
      // kube-proxy to make ClusterIPs work on this host.
      '--enable-aggregator-routing=true',
      // kubectl logs/exec on real nodes.
      `--kubelet-client-certificate=${paths.kubeletClientCert}`,
      `--kubelet-client-key=${paths.kubeletClientKey}`,
    ];
    if (options.auditUserGroups !== undefined) {
      // Metadata: who did what to which object, and the answer; never a request or response body.
      const policy = {
        apiVersion: 'audit.k8s.io/v1',
        kind: 'Policy',
        omitStages: ['RequestReceived'],
        rules: [{ level: 'Metadata', userGroups: options.auditUserGroups }, { level: 'None' }],
      };
      apiserverArgs.push(`--audit-policy-file=${file('audit-policy.yaml', stringify(policy))}`);
    }
    // One argument list per kube-apiserver: its own port and, when auditing, its own log.
    const instanceArgs = apiPorts.map((port, i) => [
      ...apiserverArgs,
      `--secure-port=${port}`,
      ...(options.auditUserGroups !== undefined
        ? [`--audit-log-path=${join(dir, i === 0 ? AUDIT_LOG : `audit-${i + 1}.log`)}`]
        : []),
    ]);
    const plane = new ControlPlane(
      dir,
      ownsDir,
      server,
      pki,
      instanceArgs,
      janitor,
      loadBalancer,
      apiServerUrls,
    );
    const components = plane.components;
    try {
      const started = Date.now();
      components.set(
        'etcd',
        new ManagedProcess(
          'etcd',
          binaries.etcd,
          [
            '--name=nodeflavor',
            `--data-dir=${join(dir, 'etcd')}`,
            `--listen-client-urls=http://127.0.0.1:${etcdClient}`,
            `--advertise-client-urls=http://127.0.0.1:${etcdClient}`,
            `--listen-peer-urls=http://127.0.0.1:${etcdPeer}`,
            `--initial-advertise-peer-urls=http://127.0.0.1:${etcdPeer}`,
            `--initial-cluster=nodeflavor=http://127.0.0.1:${etcdPeer}`,
            '--unsafe-no-fsync=true', // a throwaway test store: durability costs time and buys nothing
            '--quota-backend-bytes=8589934592',
            '--log-level=warn',
          ],
          join(dir, 'etcd.log'),
        ),
      );
      await plane.waitFor('etcd', `http://127.0.0.1:${etcdClient}/health`, timeout);
      await Promise.all(instanceArgs.map((_, i) => plane.startApiServer(i, timeout)));
      log(`kube-apiserver ready at ${server} (${((Date.now() - started) / 1000).toFixed(1)} s)`);
      await plane.createKubeadmObjects();
      components.set(
        'kube-controller-manager',
        new ManagedProcess(
          'kube-controller-manager',
          binaries.kubeControllerManager,
          [
            `--kubeconfig=${join(dir, 'controller-manager.kubeconfig')}`,
            `--authentication-kubeconfig=${join(dir, 'controller-manager.kubeconfig')}`,
            `--authorization-kubeconfig=${join(dir, 'controller-manager.kubeconfig')}`,
            '--bind-address=127.0.0.1',
            `--secure-port=${kcmPort}`,
            `--cluster-signing-cert-file=${paths.signingCa}`,
            `--cluster-signing-key-file=${paths.signingKey}`,
            `--root-ca-file=${paths.ca}`,
            `--service-account-private-key-file=${paths.saKey}`,
            '--use-service-account-credentials=true',
            `--controllers=${options.controllers ?? '*,bootstrapsigner,tokencleaner'}`,
            '--leader-elect=false',
            // kcm's default client limit (20 QPS) caps CSR approval+signing at a few joins a
            // second; large clusters raise it too, and benchmarks need joins not to be the floor.
            '--kube-api-qps=300',
            '--kube-api-burst=600',
            `--service-cluster-ip-range=${SERVICE_CIDR}`,
          ],
          join(dir, 'kube-controller-manager.log'),
        ),
      );
      await plane.waitFor('kube-controller-manager', `https://127.0.0.1:${kcmPort}/healthz`, timeout, false);
      if (options.scheduler) {
        const kubeconfig = join(dir, 'scheduler.kubeconfig');
        components.set(
          'kube-scheduler',
          new ManagedProcess(
            'kube-scheduler',
            binaries.kubeScheduler,
            [
              `--kubeconfig=${kubeconfig}`,
              `--authentication-kubeconfig=${kubeconfig}`,
              `--authorization-kubeconfig=${kubeconfig}`,
              '--leader-elect=false',
              '--bind-address=127.0.0.1',
              `--secure-port=${schedulerPort}`,
            ],
            join(dir, 'kube-scheduler.log'),
          ),
        );
        await plane.waitFor('kube-scheduler', `https://127.0.0.1:${schedulerPort}/healthz`, timeout, false);
      }
      log(`control plane ready (${((Date.now() - started) / 1000).toFixed(1)} s)`);
      return plane;
    } catch (error) {
      const tails = [...components.values()]
        .map((c) => `${c.name} (last lines):\n${c.lastLines()}`)
        .join('\n');
      log(`control plane failed to start: ${(error as Error).message}\n${tails}`);
      await plane.stop();
      throw error;
    }
  }

  private async startApiServer(index: number, timeout: number): Promise<void> {
    const binaries = requireBinaries();
    const name = apiServerName(index);
    this.components.set(
      name,
      new ManagedProcess(
        name,
        binaries.kubeApiserver,
        this.apiserverArgs[index] as string[],
        join(this.dir, `${name}.log`),
      ),
    );
    await this.waitFor(name, `${this.apiServerUrls[index]}/readyz`, timeout);
  }

  /** Polls a health URL until it answers 200 "ok", the component dies, or the deadline passes. */
  private async waitFor(name: string, url: string, timeout: number, verify = true): Promise<void> {
    const deadline = Date.now() + timeout;
    const component = this.components.get(name);
    let last = '';
    while (Date.now() < deadline) {
      if (component && !component.running) throw new Error(`${name} exited while starting`);
      try {
        const ca = url.startsWith('https') && verify ? this.pki.clusterCa.certPem : undefined;
        const [status, body] = await httpsOrHttpGet(
          url,
          ca,
          url.startsWith('https') ? this.pki.admin : undefined,
        );
        if (status === 200) return;
        last = `HTTP ${status}: ${body.slice(0, 200)}`;
      } catch (error) {
        last = (error as Error).message;
      }
      await new Promise((resolve) => setTimeout(resolve, 250));
    }
    throw new Error(`${name} not healthy at ${url} within ${timeout / 1000} s (last: ${last})`);
  }

  private async createKubeadmObjects(): Promise<void> {
    const { applyObjects } = await import('./apply.ts');
    await applyObjects(this.kubeconfigPath, [
      ...kubeadmBootstrapObjects(this.server, this.caPem),
      ...kubeadmJoinConfigObjects(versions.KUBERNETES_VERSION ?? '', new URL(this.server).host, NETWORKING),
    ]);
  }

  /** The kube-apiserver's reported gitVersion. */
  async serverVersion(): Promise<string> {
    const [, body] = await httpsGet(`${this.server}/version`, this.caPem, this.pki.admin);
    return (JSON.parse(body) as { gitVersion: string }).gitVersion;
  }

  /** Restarts (the first) kube-apiserver on the same port and etcd (watches see a disconnect). */
  async restartApiServer(timeout = 90_000): Promise<void> {
    await this.components.get(apiServerName(0))?.stop();
    await this.startApiServer(0, timeout);
  }

  /** Stops every component and removes the temp dir; safe to call twice. */
  async stop(): Promise<void> {
    const apiServers = this.apiServerUrls.map((_, i) => apiServerName(i));
    for (const name of ['kube-scheduler', 'kube-controller-manager', ...apiServers, 'etcd']) {
      await this.components.get(name)?.stop();
    }
    this.components.clear();
    await this.loadBalancer?.close();
    if (this.ownsDir && existsSync(this.dir)) rmSync(this.dir, { recursive: true, force: true });
    this.janitor?.release();
  }

  lastLogLines(): string {
    return [...this.components.values()].map((c) => c.lastLines()).join('\n');
  }
}

/** kube-apiserver, kube-apiserver-2, ... (component and log names). */
function apiServerName(index: number): string {
  return index === 0 ? 'kube-apiserver' : `kube-apiserver-${index + 1}`;
}

function httpsOrHttpGet(
  url: string,
  caPem: string | undefined,
  client?: KeyPairPem,
): Promise<[number, string]> {
  if (url.startsWith('https')) return httpsGet(url, caPem, client);
  return fetch(url).then(async (response) => [response.status, await response.text()] as [number, string]);
}
