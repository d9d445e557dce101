// What nodeflavor needs of a kubeconfig, and a small loader of our own for the common cases.
//
// Importing @kubernetes/client-node costs ~80 MiB of resident memory: its KubeConfig module
// imports every generated API model. The operator needs none of them: it talks to the API server
// through kubeFetch/kubeJson (fetch.ts), and from a kubeconfig it needs only the server, the TLS
// material and the credentials. So the operator reads its in-cluster identity, and any kubeconfig
// whose user is a token, a token file, a client certificate or a username/password, itself;
// client-node is loaded (synchronously, on first need) only for what it alone does well: exec
// credential plugins, auth providers, proxies and merged multi-file KUBECONFIGs.
//
// `KubeConfig` below is the interface the rest of nodeflavor programs against. client-node's own
// KubeConfig satisfies it (tests and the CLI's delegated case pass one), and so does ours.
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { isIPv6 } from 'node:net';
import { dirname, isAbsolute, join } from 'node:path';
import { Agent } from 'undici';
import { parse as parseYaml } from 'yaml';

/** What an authenticator writes into one request: headers, a dispatcher (TLS), a signal. */
export interface RequestAuthContext {
  setHeaderParam(key: string, value: string): void;
  setDispatcher(dispatcher: unknown): void;
  getSignal(): AbortSignal | undefined;
  setSignal(signal: AbortSignal): void;
}

export interface KubeCluster {
  readonly name: string;
  readonly server: string;
  readonly skipTLSVerify?: boolean;
}

/** The part of a kubeconfig nodeflavor uses: where the API server is, and how to authenticate. */
export interface KubeConfig {
  getCurrentCluster(): KubeCluster | null;
  /** Adds credentials (headers) and TLS (an undici dispatcher) to one request. */
  applySecurityAuthentication(context: RequestAuthContext): Promise<void>;
}

const SERVICE_ACCOUNT = '/var/run/secrets/kubernetes.io/serviceaccount';
/** Token files (projected, rotated by the kubelet) and certificate files are re-read this often, as client-go does. */
const FILE_TTL_MS = 60_000;
/** One undici Agent per distinct TLS material; rotated client certificates make new ones. */
const MAX_DISPATCHERS = 8;

interface ClusterEntry extends KubeCluster {
  readonly skipTLSVerify: boolean;
  readonly caData?: string | undefined;
  readonly caFile?: string | undefined;
  readonly tlsServerName?: string | undefined;
}

interface UserEntry {
  readonly name: string;
  readonly token?: string | undefined;
  readonly tokenFile?: string | undefined;
  readonly certData?: string | undefined;
  readonly certFile?: string | undefined;
  readonly keyData?: string | undefined;
  readonly keyFile?: string | undefined;
  readonly username?: string | undefined;
  readonly password?: string | undefined;
  readonly impersonateUser?: string | undefined;
}

/** A file's contents, re-read at most every FILE_TTL_MS. */
class CachedFile {
  readonly #path: string;
  #value: Buffer | undefined;
  #readAt = 0;

  constructor(path: string) {
    this.#path = path;
  }

  read(): Buffer {
    const now = Date.now();
    if (this.#value === undefined || now - this.#readAt > FILE_TTL_MS) {
      this.#value = readFileSync(this.#path);
      this.#readAt = now;
    }
    return this.#value;
  }
}

type Material = () => Buffer | undefined;

function material(data: string | undefined, file: string | undefined): Material {
  if (file) {
    const cached = new CachedFile(file);
    return () => cached.read();
  }
  if (data) {
    const bytes = Buffer.from(data, 'base64');
    return () => bytes;
  }
  return () => undefined;
}

/**
 * A kubeconfig of one cluster and one user, with no plugin: nodeflavor's own loader. It reuses
 * connections (one undici Agent per TLS material, keep-alive), which client-node 2.0.1 does not.
 */
export class StaticKubeConfig implements KubeConfig {
  // Plain (TypeScript-private) fields, not #private ones: fencedKubeConfig (deadlines.ts) makes
  // views of a KubeConfig with Object.create, and #private fields are not reachable through a
  // prototype.
  private readonly cluster_: ClusterEntry;
  private readonly user_: UserEntry;
  private readonly ca_: Material;
  private readonly cert_: Material;
  private readonly key_: Material;
  private readonly token_: () => string | undefined;
  private readonly dispatchers_ = new Map<string, Agent>();

  constructor(cluster: ClusterEntry, user: UserEntry) {
    if (cluster.server.startsWith('http:') && !cluster.skipTLSVerify)
      throw new Error('HTTP protocol is not allowed when insecure-skip-tls-verify is not set');
    this.cluster_ = { ...cluster, server: cluster.server.replace(/\/$/, '') };
    this.user_ = user;
    this.ca_ = material(cluster.caData, cluster.caFile);
    this.cert_ = material(user.certData, user.certFile);
    this.key_ = material(user.keyData, user.keyFile);
    if (user.token) {
      const token = user.token;
      this.token_ = () => token;
    } else if (user.tokenFile) {
      const file = new CachedFile(user.tokenFile);
      this.token_ = () => file.read().toString('utf8').trim();
    } else {
      this.token_ = () => undefined;
    }
  }

  getCurrentCluster(): ClusterEntry {
    return this.cluster_;
  }

  /** The user's name and static token (the benchmarks read the operator's token from it). */
  getCurrentUser(): { name: string; token?: string } {
    return { name: this.user_.name, ...(this.user_.token ? { token: this.user_.token } : {}) };
  }

  async applySecurityAuthentication(context: RequestAuthContext): Promise<void> {
    const { username, password, impersonateUser } = this.user_;
    if (username) {
      context.setHeaderParam(
        'Authorization',
        `Basic ${Buffer.from(`${username}:${password ?? ''}`).toString('base64')}`,
      );
    }
    const token = this.token_();
    if (token) context.setHeaderParam('Authorization', `Bearer ${token}`);
    if (impersonateUser) context.setHeaderParam('Impersonate-User', impersonateUser);
    const dispatcher = this.dispatcher();
    if (dispatcher) context.setDispatcher(dispatcher);
  }

  private dispatcher(): Agent | undefined {
    const tls: {
      ca?: Buffer;
      cert?: Buffer;
      key?: Buffer;
      rejectUnauthorized?: boolean;
      servername?: string;
    } = {};
    const ca = this.ca_();
    const cert = this.cert_();
    const key = this.key_();
    if (ca) tls.ca = ca;
    if (cert) tls.cert = cert;
    if (key) tls.key = key;
    if (this.cluster_.skipTLSVerify) tls.rejectUnauthorized = false;
    if (this.cluster_.tlsServerName) tls.servername = this.cluster_.tlsServerName;
    if (Object.keys(tls).length === 0) return undefined; // fetch's global dispatcher, system CAs
    const hash = createHash('sha256');
    for (const part of [tls.ca, tls.cert, tls.key, String(tls.rejectUnauthorized), tls.servername ?? ''])
      hash.update(part ?? '').update('\0');
    const fingerprint = hash.digest('hex');
    let dispatcher = this.dispatchers_.get(fingerprint);
    if (!dispatcher) {
      if (this.dispatchers_.size >= MAX_DISPATCHERS) {
        const [oldest, agent] = this.dispatchers_.entries().next().value as [string, Agent];
        this.dispatchers_.delete(oldest);
        void agent.close().catch(() => undefined);
      }
      // keepAliveInitialDelay 30 s, as client-go (and client-node): under cloud load balancers' idle timeouts.
      dispatcher = new Agent({ connect: { ...tls, keepAlive: true, keepAliveInitialDelay: 30_000 } });
      this.dispatchers_.set(fingerprint, dispatcher);
    }
    return dispatcher;
  }
}

interface RawKubeconfig {
  'current-context'?: string;
  clusters?: { name?: string; cluster?: Record<string, unknown> }[];
  users?: { name?: string; user?: Record<string, unknown> }[];
  contexts?: { name?: string; context?: { cluster?: string; user?: string } }[];
}

const str = (value: unknown): string | undefined =>
  typeof value === 'string' && value !== '' ? value : undefined;

/** client-node's KubeConfig, loaded on first need (it is heavy; see the top of this file). */
type ClientNode = typeof import('@kubernetes/client-node');
let clientNode: ClientNode | undefined;
function loadClientNode(): ClientNode {
  clientNode ??= createRequire(import.meta.url)('@kubernetes/client-node') as ClientNode;
  return clientNode;
}

/** Why a kubeconfig needs client-node (a plugin or a proxy), or undefined when ours reads it. */
function needsClientNode(
  cluster: Record<string, unknown>,
  user: Record<string, unknown>,
): string | undefined {
  if (user.exec) return 'an exec credential plugin';
  if (user['auth-provider']) return 'an auth provider';
  if (cluster['proxy-url']) return 'a proxy';
  return undefined;
}

/** Parses a kubeconfig (relative paths resolve against `baseDir`); client-node's for plugins. */
export function kubeConfigFromString(text: string, baseDir: string, delegate?: () => KubeConfig): KubeConfig {
  const raw = (parseYaml(text) ?? {}) as RawKubeconfig;
  const contextName = raw['current-context'];
  if (!contextName) throw new Error('kubeconfig has no current-context');
  const context = raw.contexts?.find((c) => c.name === contextName)?.context;
  if (!context) throw new Error(`kubeconfig has no context '${contextName}'`);
  const clusterEntry = raw.clusters?.find((c) => c.name === context.cluster);
  if (!clusterEntry?.cluster) throw new Error(`kubeconfig has no cluster '${context.cluster ?? ''}'`);
  const cluster = clusterEntry.cluster;
  const user = raw.users?.find((u) => u.name === context.user)?.user ?? {};
  if (needsClientNode(cluster, user) && delegate) return delegate();
  const server = str(cluster.server);
  if (!server) throw new Error(`kubeconfig cluster '${context.cluster ?? ''}' has no server`);
  const path = (value: unknown) => {
    const file = str(value);
    return file === undefined || isAbsolute(file) ? file : join(baseDir, file);
  };
  return new StaticKubeConfig(
    {
      name: clusterEntry.name ?? '',
      server,
      skipTLSVerify: cluster['insecure-skip-tls-verify'] === true,
      caData: str(cluster['certificate-authority-data']),
      caFile: path(cluster['certificate-authority']),
      tlsServerName: str(cluster['tls-server-name']),
    },
    {
      name: context.user ?? '',
      token: str(user.token),
      tokenFile: path(user.tokenFile ?? user['token-file']),
      certData: str(user['client-certificate-data']),
      certFile: path(user['client-certificate']),
      keyData: str(user['client-key-data']),
      keyFile: path(user['client-key']),
      username: str(user.username),
      password: str(user.password),
      impersonateUser: str(user.as),
    },
  );
}

/** A kubeconfig file; with a plugin or proxy, client-node's KubeConfig reads it. */
export function kubeConfigFromFile(file: string): KubeConfig {
  return kubeConfigFromString(readFileSync(file, 'utf8'), dirname(file), () => {
    const kc = new (loadClientNode().KubeConfig)();
    kc.loadFromFile(file);
    return kc;
  });
}

/** $KUBECONFIG (several files are merged by client-node, as kubectl does) or ~/.kube/config. */
export function kubeConfigFromDefault(fallback: string): KubeConfig {
  const files = (process.env.KUBECONFIG ?? '').split(':').filter(Boolean);
  if (files.length > 1) {
    const kc = new (loadClientNode().KubeConfig)();
    kc.loadFromDefault();
    return kc;
  }
  return kubeConfigFromFile(files[0] ?? fallback);
}

/** The Pod's service account: KUBERNETES_SERVICE_HOST/PORT, its CA and its (rotated) token file. */
export function kubeConfigInCluster(root = SERVICE_ACCOUNT): KubeConfig {
  const host = process.env.KUBERNETES_SERVICE_HOST ?? '';
  const port = process.env.KUBERNETES_SERVICE_PORT ?? '443';
  const scheme = ['80', '8080', '8001'].includes(port) ? 'http' : 'https';
  const serverHost = isIPv6(host) ? `[${host}]` : host;
  return new StaticKubeConfig(
    {
      name: 'inCluster',
      server: `${scheme}://${serverHost}:${port}`,
      skipTLSVerify: scheme === 'http',
      caFile: join(root, 'ca.crt'),
    },
    { name: 'inClusterUser', tokenFile: join(root, 'token') },
  );
}
