// A simulated kubelet that joins the way `kubeadm join` + kubelet do, over real HTTPS:
//  1. discovery, either way kubeadm 1.37 does it (cmd/kubeadm/app/discovery):
//     token: read kube-public/cluster-info anonymously, verify the bootstrap signer's JWS over it
//       with the token, pin the CA by its sha256 SPKI hash, keep the configured endpoint;
//     file: take the server and CA from the discovery kubeconfig on the node, and prove the server
//       holds a certificate from that CA by reading cluster-info anonymously over verified TLS
//       (403 is fine, as for kubeadm); no signature is involved;
//  2. TLS bootstrap: as system:bootstrap:<id>, create a kubelet client CSR (fresh ECDSA key,
//     CN system:node:<name>, O system:nodes) and wait for kube-controller-manager to sign it;
//  3. registration: with that client certificate create the Node with --node-labels and
//     --register-with-taints, then keep a Lease renewed and report status like a kubelet.
import { readFileSync } from 'node:fs';
import { setTimeout as delay } from 'node:timers/promises';
import { compactVerify } from 'jose';
import { parse } from 'yaml';
import { caCertHash, createCertificateRequest } from '../../../src/pki/certs.ts';
import { ApiError, KubeHttp } from './http.ts';
import type { FileDiscovery, JoinSettings, TokenDiscovery } from './join-config.ts';

export const KUBELET_SIGNER = 'kubernetes.io/kube-apiserver-client-kubelet';

export class JoinError extends Error {}

export interface KubeletOptions {
  /** How long to wait for the bootstrap signer's JWS and for the CSR to be signed. */
  timeoutMs?: number;
  /** Extra labels, as if appended to --node-labels. */
  extraLabels?: Record<string, string>;
  /** Runs after the client certificate is issued and before the Node is created (fault tests). */
  beforeRegister?: () => Promise<void>;
  /**
   * Open a new connection for every request (default: keep-alive), so that behind a load
   * balancer consecutive requests reach different API servers, as separate clients (kubeadm,
   * the kubelet's bootstrap client, its watch) do.
   */
  connectionPerRequest?: boolean;
  /**
   * The node's files as kubeadm would read them (file discovery's kubeconfig): the content at a
   * path, or undefined when there is no such file. Default: this machine's disk.
   */
  readFile?: (path: string) => string | undefined;
}

export interface NodeIdentity {
  server: string;
  caPem: string;
  certPem: string;
  keyPem: string;
}

interface ClusterInfo {
  data?: Record<string, string>;
}

function splitToken(token: string): { id: string; secret: string } {
  const match = /^([a-z0-9]{6})\.([a-z0-9]{16})$/.exec(token);
  if (!match?.[1] || !match[2])
    throw new JoinError('the bootstrap token is malformed (want [a-z0-9]{6}.[a-z0-9]{16})');
  return { id: match[1], secret: match[2] };
}

function readFromDisk(path: string): string | undefined {
  try {
    return readFileSync(path, 'utf8');
  } catch {
    return undefined;
  }
}

/**
 * The cluster a discovery kubeconfig names, as kubeadm picks it (GetClusterFromKubeConfig): the
 * unnamed cluster, else the current context's. Its CA must be inline (the sim reads no CA files).
 */
function clusterOf(kubeconfig: string, path: string): { server: string; caPem: string } {
  interface Named<T> {
    name?: string;
    cluster?: T;
    context?: T;
  }
  let config: {
    clusters?: Named<Record<string, string>>[];
    contexts?: Named<{ cluster?: string }>[];
    'current-context'?: string;
  } | null;
  try {
    config = parse(kubeconfig) as typeof config;
  } catch {
    throw new JoinError(`the discovery kubeconfig ${path} is not valid YAML`);
  }
  const clusters = config?.clusters ?? [];
  const contextCluster = config?.contexts?.find((c) => c.name === config?.['current-context'])?.context
    ?.cluster;
  const cluster = (
    clusters.find((c) => c.name === '' || c.name === undefined) ??
    clusters.find((c) => contextCluster !== undefined && c.name === contextCluster)
  )?.cluster;
  const server = cluster?.server;
  const caData = cluster?.['certificate-authority-data'];
  if (!server || !caData) {
    throw new JoinError(
      `the discovery kubeconfig ${path} names no cluster with a server and certificate-authority-data`,
    );
  }
  return { server, caPem: Buffer.from(caData, 'base64').toString('utf8') };
}

function base64url(text: string): string {
  return Buffer.from(text, 'utf8').toString('base64url');
}

export class SimulatedKubelet {
  private identity?: NodeIdentity;
  private http?: KubeHttp;
  private heartbeat?: NodeJS.Timeout;
  private readonly timeoutMs: number;
  /** The CSR this kubelet created (name), once it has. */
  csrName?: string;

  readonly nodeName: string;
  private readonly settings: JoinSettings;
  private readonly options: KubeletOptions;

  constructor(nodeName: string, settings: JoinSettings, options: KubeletOptions = {}) {
    this.nodeName = nodeName;
    this.settings = settings;
    this.options = options;
    this.timeoutMs = options.timeoutMs ?? 60_000;
  }

  private connections(): { connectionPerRequest?: boolean } {
    return this.options.connectionPerRequest ? { connectionPerRequest: true } : {};
  }

  /** Runs discovery, TLS bootstrap and registration; resolves once the Node exists. */
  async join(): Promise<NodeIdentity> {
    const { server, caPem } = await this.discover();
    const { certPem, keyPem } = await this.bootstrapClientCertificate(server, caPem);
    this.identity = { server, caPem, certPem, keyPem };
    this.http = new KubeHttp(server, { ca: caPem, cert: certPem, key: keyPem, ...this.connections() });
    await this.options.beforeRegister?.();
    await this.register();
    return this.identity;
  }

  private async discover(): Promise<{ server: string; caPem: string }> {
    const discovery = this.settings.discovery;
    return discovery.kind === 'file' ? this.discoverFromFile(discovery) : this.discoverByToken(discovery);
  }

  private async discoverFromFile(discovery: FileDiscovery): Promise<{ server: string; caPem: string }> {
    const path = discovery.kubeConfigPath;
    const text = (this.options.readFile ?? readFromDisk)(path);
    if (text === undefined) {
      throw new JoinError(
        `couldn't validate the identity of the API Server: open ${path}: no such file or directory`,
      );
    }
    const { server, caPem } = clusterOf(text, path);
    // Verified TLS, anonymous: only a server holding a certificate from this CA gets past here.
    const secure = new KubeHttp(server, { ca: caPem, ...this.connections() });
    const deadline = Date.now() + this.timeoutMs;
    let lastError = '';
    try {
      for (;;) {
        try {
          const result = await secure.request(
            'GET',
            '/api/v1/namespaces/kube-public/configmaps/cluster-info',
          );
          if (result.status === 200 || result.status === 403) return { server, caPem };
          lastError = `HTTP ${result.status}`;
        } catch (error) {
          lastError = (error as Error).message;
        }
        if (Date.now() > deadline) {
          throw new JoinError(
            `couldn't validate the identity of the API Server: Abort reading the cluster-info ConfigMap after timeout of ${this.timeoutMs / 1000}s: ${lastError}`,
          );
        }
        await delay(250);
      }
    } finally {
      secure.close();
    }
  }

  private async discoverByToken(discovery: TokenDiscovery): Promise<{ server: string; caPem: string }> {
    const token = splitToken(discovery.token);
    const insecure = new KubeHttp(`https://${discovery.apiServerEndpoint}`, {
      insecure: true,
      ...this.connections(),
    });
    const deadline = Date.now() + this.timeoutMs;
    try {
      for (;;) {
        const result = await insecure.request<ClusterInfo>(
          'GET',
          '/api/v1/namespaces/kube-public/configmaps/cluster-info',
        );
        if (result.status !== 200) {
          throw new JoinError(`cannot read kube-public/cluster-info: HTTP ${result.status}`);
        }
        const kubeconfig = result.body.data?.kubeconfig;
        if (!kubeconfig) throw new JoinError('kube-public/cluster-info has no kubeconfig');
        const signature = result.body.data?.[`jws-kubeconfig-${token.id}`];
        if (signature) {
          await this.verifySignature(signature, kubeconfig, token);
          return this.trustedCluster(kubeconfig, discovery);
        }
        if (Date.now() > deadline) {
          throw new JoinError(
            `there is no JWS signed token in the cluster-info ConfigMap for token ID "${token.id}": the token does not exist, expired or was revoked`,
          );
        }
        await delay(250);
      }
    } finally {
      insecure.close();
    }
  }

  private async verifySignature(
    detached: string,
    kubeconfig: string,
    token: { id: string; secret: string },
  ): Promise<void> {
    const [header, , signature] = detached.split('.');
    try {
      const { protectedHeader } = await compactVerify(
        `${header}.${base64url(kubeconfig)}.${signature}`,
        new TextEncoder().encode(token.secret),
        { algorithms: ['HS256'] },
      );
      if (protectedHeader.kid !== token.id) throw new Error('kid mismatch');
    } catch {
      throw new JoinError(
        "failed to verify JWS signature of received cluster info object, can't trust this API Server (wrong token secret?)",
      );
    }
  }

  private trustedCluster(kubeconfig: string, discovery: TokenDiscovery): { server: string; caPem: string } {
    const config = parse(kubeconfig) as { clusters?: { cluster?: Record<string, string> }[] };
    const cluster = config.clusters?.[0]?.cluster;
    const caData = cluster?.['certificate-authority-data'];
    if (!caData) throw new JoinError('cluster-info kubeconfig lacks the cluster CA');
    const caPem = Buffer.from(caData, 'base64').toString('utf8');
    // Like kubeadm, keep talking to the endpoint the admin gave us (cluster-info's own server
    // may be an in-cluster address); only the CA comes from cluster-info.
    if (!discovery.unsafeSkipCAVerification) {
      const hash = caCertHash(caPem);
      if (!discovery.caCertHashes.includes(hash)) {
        throw new JoinError(
          `cluster CA found in cluster-info ConfigMap is not trusted: its hash ${hash} is not in caCertHashes`,
        );
      }
    }
    return { server: `https://${discovery.apiServerEndpoint}`, caPem };
  }

  private async bootstrapClientCertificate(
    server: string,
    caPem: string,
  ): Promise<{ certPem: string; keyPem: string }> {
    const bootstrap = new KubeHttp(server, {
      ca: caPem,
      bearerToken: this.settings.tlsBootstrapToken,
      ...this.connections(),
    });
    try {
      const { csrPem, keyPem } = await createCertificateRequest(`system:node:${this.nodeName}`, [
        'system:nodes',
      ]);
      let created: { metadata: { name: string } };
      try {
        created = await bootstrap.must('POST', '/apis/certificates.k8s.io/v1/certificatesigningrequests', {
          apiVersion: 'certificates.k8s.io/v1',
          kind: 'CertificateSigningRequest',
          metadata: { generateName: 'csr-' },
          spec: {
            request: Buffer.from(csrPem).toString('base64'),
            signerName: KUBELET_SIGNER,
            usages: ['digital signature', 'client auth'],
          },
        });
      } catch (error) {
        if (error instanceof ApiError && error.status === 401) {
          throw new JoinError(
            'the API server rejected the bootstrap token (401 Unauthorized): it is wrong, expired or revoked',
          );
        }
        throw error;
      }
      this.csrName = created.metadata.name;
      const certPem = await this.waitForCertificate(bootstrap, created.metadata.name);
      return { certPem, keyPem };
    } finally {
      bootstrap.close();
    }
  }

  private async waitForCertificate(http: KubeHttp, name: string): Promise<string> {
    const deadline = Date.now() + this.timeoutMs;
    let pause = 25;
    while (Date.now() < deadline) {
      const csr = await http.must<{
        status?: { certificate?: string; conditions?: { type: string; reason?: string; message?: string }[] };
      }>('GET', `/apis/certificates.k8s.io/v1/certificatesigningrequests/${name}`);
      const refused = csr.status?.conditions?.find((c) => c.type === 'Denied' || c.type === 'Failed');
      if (refused) {
        throw new JoinError(
          `CSR ${name} was ${refused.type.toLowerCase()}: ${refused.reason ?? ''} ${refused.message ?? ''}`.trim(),
        );
      }
      if (csr.status?.certificate) return Buffer.from(csr.status.certificate, 'base64').toString('utf8');
      await delay(pause);
      pause = Math.min(pause * 2, 250);
    }
    throw new JoinError(
      `CSR ${name} was not signed within ${this.timeoutMs / 1000} s (is kube-controller-manager approving kubelet CSRs?)`,
    );
  }

  /** Registers (or re-registers, after the Node was deleted) the Node, as the kubelet does. */
  async register(): Promise<void> {
    const http = this.client();
    const labels = {
      'kubernetes.io/hostname': this.nodeName,
      'kubernetes.io/os': 'linux',
      'kubernetes.io/arch': 'amd64',
      'beta.kubernetes.io/os': 'linux',
      'beta.kubernetes.io/arch': 'amd64',
      ...this.settings.nodeLabels,
      ...this.options.extraLabels,
    };
    const result = await http.request('POST', '/api/v1/nodes', {
      apiVersion: 'v1',
      kind: 'Node',
      // A real kubelet registers with this annotation (kubelet_node_status.go), so its Node
      // always has an annotations map, as the controller sees on real clusters.
      metadata: {
        name: this.nodeName,
        labels,
        annotations: { 'volumes.kubernetes.io/controller-managed-attach-detach': 'true' },
      },
      spec: this.settings.taints.length > 0 ? { taints: this.settings.taints } : {},
    });
    if (result.status === 409) return; // registered before (kubelet restart): keep the existing Node
    if (result.status !== 201) {
      const message = (result.body as { message?: string } | undefined)?.message ?? result.text.slice(0, 300);
      throw new JoinError(`registering Node ${this.nodeName} failed: HTTP ${result.status}: ${message}`);
    }
  }

  /** The HTTPS client authenticated as this node (after join). */
  client(): KubeHttp {
    if (!this.http) throw new Error('kubelet has not joined yet');
    return this.http;
  }

  get credentials(): NodeIdentity {
    if (!this.identity) throw new Error('kubelet has not joined yet');
    return this.identity;
  }

  /** Reports Ready status like a kubelet's node status update. */
  async reportStatus(): Promise<void> {
    const now = new Date().toISOString();
    await this.client().must(
      'PATCH',
      `/api/v1/nodes/${this.nodeName}/status`,
      {
        status: {
          conditions: [
            {
              type: 'Ready',
              status: 'True',
              reason: 'KubeletReady',
              message: 'simulated kubelet is posting ready status',
              lastHeartbeatTime: now,
              lastTransitionTime: now,
            },
          ],
          capacity: { cpu: '4', memory: '16Gi', pods: '110' },
          allocatable: { cpu: '4', memory: '16Gi', pods: '110' },
          addresses: [{ type: 'Hostname', address: this.nodeName }],
          nodeInfo: {
            kubeletVersion: 'v1.37.2-sim',
            operatingSystem: 'linux',
            architecture: 'amd64',
            containerRuntimeVersion: 'sim://1.0',
            kernelVersion: '6.1.0',
            osImage: 'simulated',
            kubeProxyVersion: '',
            machineID: '',
            systemUUID: '',
            bootID: '',
          },
        },
      },
      'application/strategic-merge-patch+json',
    );
  }

  /** Creates or renews the node's Lease in kube-node-lease, as the kubelet does every 10 s. */
  async renewLease(): Promise<void> {
    const http = this.client();
    const path = `/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/${this.nodeName}`;
    const renewTime = new Date().toISOString().replace('Z', '000Z'); // MicroTime
    const existing = await http.request<{ metadata: { resourceVersion: string }; spec: object }>('GET', path);
    if (existing.status === 404) {
      await http.must('POST', '/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases', {
        apiVersion: 'coordination.k8s.io/v1',
        kind: 'Lease',
        metadata: { name: this.nodeName, namespace: 'kube-node-lease' },
        spec: { holderIdentity: this.nodeName, leaseDurationSeconds: 40, renewTime },
      });
      return;
    }
    if (existing.status !== 200)
      throw new ApiError(existing.status, 'GET', path, existing.text.slice(0, 200));
    await http.must('PUT', path, {
      ...existing.body,
      spec: { ...existing.body.spec, holderIdentity: this.nodeName, renewTime },
    });
  }

  /** Starts the periodic lease renewal and status report (errors are counted, not thrown). */
  startHeartbeat(intervalMs = 10_000, onError?: (error: Error) => void): void {
    const beat = () => {
      Promise.all([this.renewLease(), this.reportStatus()]).catch((error: Error) => onError?.(error));
    };
    beat();
    this.heartbeat = setInterval(beat, intervalMs);
    this.heartbeat.unref();
  }

  stop(): void {
    if (this.heartbeat) clearInterval(this.heartbeat);
    this.http?.close();
  }
}
