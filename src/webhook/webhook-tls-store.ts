// The webhook's TLS Secret (ca.crt, ca.key, tls.crt, tls.key) in the operator namespace: read,
// create, update with optimistic concurrency, and watch. Several replicas share it: a create that
// loses the race gets 409 AlreadyExists, an update that loses it gets 409 Conflict (its
// resourceVersion is stale); either way the caller re-reads and adopts what the winner wrote.

import type { TlsBundle } from '../pki/serving-bundle.ts';
import { kubeJson } from '../runtime/fetch.ts';
import { isNotFound } from '../runtime/kube-error.ts';
import type { KubeConfig } from '../runtime/kubeconfig.ts';
import { ListWatch, type RestartReason } from '../runtime/listwatch.ts';

const SECRET_KEYS = { caCert: 'ca.crt', caKey: 'ca.key', tlsCert: 'tls.crt', tlsKey: 'tls.key' } as const;

/** A started watch resolves once the first list is in. */
export interface SecretWatch {
  start(): Promise<void>;
  stop(): void;
}

export interface StoredTlsBundle {
  /** Whatever of the four keys the Secret holds (cert-manager writes no ca.key). */
  bundle: Partial<TlsBundle>;
  resourceVersion: string;
}

interface SecretObject {
  metadata?: { name?: string; namespace?: string; resourceVersion?: string };
  data?: Record<string, string>;
}

/** What the certificate keepers need of the Secret (an in-memory fake stands in for it in unit tests). */
export interface TlsSecretStore {
  readonly description: string;
  read(): Promise<StoredTlsBundle | undefined>;
  create(bundle: TlsBundle): Promise<StoredTlsBundle>;
  update(bundle: TlsBundle, resourceVersion: string): Promise<StoredTlsBundle>;
  watch(
    onChange: (secret: StoredTlsBundle | undefined) => void,
    onRestart?: (reason: RestartReason, error?: Error) => void,
  ): SecretWatch;
}

export class WebhookTlsStore implements TlsSecretStore {
  private readonly kubeConfig: KubeConfig;
  private readonly namespace: string;
  private readonly name: string;

  constructor(kubeConfig: KubeConfig, namespace: string, name: string) {
    this.kubeConfig = kubeConfig;
    this.namespace = namespace;
    this.name = name;
  }

  get description(): string {
    return `Secret ${this.namespace}/${this.name}`;
  }

  private collection(): string {
    return `/api/v1/namespaces/${this.namespace}/secrets`;
  }

  async read(): Promise<StoredTlsBundle | undefined> {
    try {
      const secret = await kubeJson<SecretObject>(
        this.kubeConfig,
        'GET',
        `${this.collection()}/${this.name}`,
        {
          action: `read ${this.description}`,
        },
      );
      return stored(secret);
    } catch (error) {
      if (isNotFound(error)) return undefined;
      throw error;
    }
  }

  /** Throws KubeError 409 when another replica created it first. */
  async create(bundle: TlsBundle): Promise<StoredTlsBundle> {
    const secret = await kubeJson<SecretObject>(this.kubeConfig, 'POST', this.collection(), {
      body: this.secretBody(bundle),
      action: `create ${this.description}`,
    });
    return stored(secret);
  }

  /** Throws KubeError 409 when the Secret changed since `resourceVersion` was read. */
  async update(bundle: TlsBundle, resourceVersion: string): Promise<StoredTlsBundle> {
    const body = this.secretBody(bundle);
    body.metadata.resourceVersion = resourceVersion;
    const secret = await kubeJson<SecretObject>(this.kubeConfig, 'PUT', `${this.collection()}/${this.name}`, {
      body,
      action: `update ${this.description}`,
    });
    return stored(secret);
  }

  /** Calls `onChange` with the Secret's content whenever it changes (undefined: deleted). */
  watch(
    onChange: (secret: StoredTlsBundle | undefined) => void,
    onRestart?: (reason: RestartReason, error?: Error) => void,
  ): SecretWatch {
    return new ListWatch<SecretObject>({
      kubeConfig: this.kubeConfig,
      path: this.collection(),
      fieldSelector: `metadata.name=${this.name}`,
      onEvent: (type, secret) => onChange(type === 'DELETED' ? undefined : stored(secret)),
      ...(onRestart === undefined ? {} : { onRestart }),
    });
  }

  private secretBody(bundle: TlsBundle) {
    const data: Record<string, string> = {};
    for (const [field, key] of Object.entries(SECRET_KEYS)) {
      data[key] = Buffer.from(bundle[field as keyof TlsBundle], 'utf8').toString('base64');
    }
    return {
      apiVersion: 'v1',
      kind: 'Secret',
      type: 'kubernetes.io/tls',
      metadata: {
        name: this.name,
        namespace: this.namespace,
        labels: { 'app.kubernetes.io/name': 'nodeflavor', 'app.kubernetes.io/component': 'webhook-tls' },
        resourceVersion: undefined as string | undefined,
      },
      data,
    };
  }
}

function stored(secret: SecretObject): StoredTlsBundle {
  const data = secret.data ?? {};
  const bundle: Partial<TlsBundle> = {};
  for (const [field, key] of Object.entries(SECRET_KEYS)) {
    const value = data[key];
    if (value !== undefined) bundle[field as keyof TlsBundle] = Buffer.from(value, 'base64').toString('utf8');
  }
  return { bundle, resourceVersion: secret.metadata?.resourceVersion ?? '' };
}
