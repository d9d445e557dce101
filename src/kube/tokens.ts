// The Kubernetes reads and writes of token issuance: FlavorClasses and FlavoredTokens
// (nodeflavor.io/v1alpha1, cluster-scoped), the bootstrap token Secret in kube-system, and the
// kube-public/cluster-info ConfigMap. Every failure becomes a KubeError. The bootstrap token's
// secret leaves the process here and only here, as the Secret's stringData.
import {
  CoreV1Api,
  CustomObjectsApi,
  type KubeConfig,
  PatchStrategy,
  setHeaderOptions,
  type V1Secret,
} from '@kubernetes/client-node';
import type { BootstrapToken } from '../flavor/bootstrap-token.ts';
import { bootstrapSecretName } from '../flavor/bootstrap-token.ts';
import {
  API_VERSION,
  FLAVOR_CLASS_PLURAL,
  FLAVORED_TOKEN_KIND,
  FLAVORED_TOKEN_PLURAL,
  type FlavorClass,
  FlavorClassSchema,
  type FlavoredToken,
  type FlavoredTokenInput,
  FlavoredTokenSchema,
  GROUP,
  ISSUED_ANNOTATION,
  TOKEN_FINALIZER,
  TOKEN_ID_LABEL,
  VERSION,
} from '../flavor/resources.ts';
import { kubeCall } from './fetch.ts';
import type { FlavorClassWatch } from './flavor-class-watch.ts';
import { isNotFound, KubeError, toKubeError } from './kube-error.ts';

export { KubeError } from './kube-error.ts';

/** The API server looks bootstrap token Secrets up in this namespace only. */
const BOOTSTRAP_TOKEN_NAMESPACE = 'kube-system';
const BOOTSTRAP_TOKEN_SECRET_TYPE = 'bootstrap.kubernetes.io/token';
/** The bootstrap signer's key for a token's JWS in cluster-info: this prefix and the token ID. */
const CLUSTER_INFO_SIGNATURE_PREFIX = 'jws-kubeconfig-';

export interface BootstrapSecretRequest {
  token: BootstrapToken;
  /** RFC 3339; the API server refuses the token after it and the tokencleaner deletes the Secret. */
  expiration: string;
  /** The same group for every flavor: a token holder can read its groups (`kubectl auth whoami`). */
  authExtraGroups: string;
  description: string;
  /** The FlavoredToken that owns the Secret, so that deleting it lets the GC remove the Secret. */
  owner: { name: string; uid: string };
  /**
   * usage-bootstrap-signing: the bootstrap signer then adds a JWS for this token to
   * kube-public/cluster-info. Only token discovery needs it; file discovery does not.
   */
  signing: boolean;
}

/** What the issuer reads from kube-public/cluster-info. */
interface ClusterInfo {
  /** The `kubeconfig` entry (CA and server only). */
  kubeconfig: string;
  /** `jws-kubeconfig-<token ID>` entries: one per live token with usage-bootstrap-signing. */
  signatures: number;
}

/** The I/O issuance needs; an interface so that the issuance logic can be tested without a cluster. */
export interface TokenKube {
  getFlavorClass(name: string): Promise<FlavorClass | undefined>;
  listFlavorClasses(): Promise<FlavorClass[]>;
  createFlavoredToken(token: FlavoredTokenInput): Promise<FlavoredToken>;
  getFlavoredToken(name: string): Promise<FlavoredToken | undefined>;
  findFlavoredTokenByTokenId(tokenId: string): Promise<FlavoredToken | undefined>;
  listFlavoredTokens(): Promise<FlavoredToken[]>;
  markFlavoredTokenRevoked(name: string): Promise<FlavoredToken>;
  /**
   * Marks issuance complete (the bootstrap Secret exists), see ISSUED_ANNOTATION; with
   * `resourceVersion`, only the record as it was read (409 otherwise).
   */
  markFlavoredTokenIssued(name: string, at: string, resourceVersion?: string): Promise<void>;
  /** Deletes only the object with this UID (a precondition), so a rollback never hits a newer one. */
  deleteFlavoredToken(name: string, uid: string): Promise<void>;
  createBootstrapSecret(request: BootstrapSecretRequest): Promise<void>;
  /** false when there was nothing to delete. */
  deleteBootstrapSecret(tokenId: string): Promise<boolean>;
  /** kube-public/cluster-info: its kubeconfig and how many token signatures it carries. */
  readClusterInfo(): Promise<ClusterInfo>;
}

const mergePatch = setHeaderOptions('Content-Type', PatchStrategy.MergePatch);
const jsonPatch = setHeaderOptions('Content-Type', PatchStrategy.JsonPatch);

const FLAVORED_TOKENS_PATH = `/apis/${GROUP}/${VERSION}/${FLAVORED_TOKEN_PLURAL}`;
const BOOTSTRAP_SECRETS_PATH = `/api/v1/namespaces/${BOOTSTRAP_TOKEN_NAMESPACE}/secrets`;

export class KubeTokenStore implements TokenKube {
  readonly #kubeConfig: KubeConfig;
  readonly #core: CoreV1Api;
  readonly #custom: CustomObjectsApi;
  readonly #classes: FlavorClassWatch | undefined;

  /** With `classes`, FlavorClass lookups are served from its watch once it has synced. */
  constructor(kubeConfig: KubeConfig, classes?: FlavorClassWatch) {
    this.#kubeConfig = kubeConfig;
    this.#core = kubeConfig.makeApiClient(CoreV1Api);
    this.#custom = kubeConfig.makeApiClient(CustomObjectsApi);
    this.#classes = classes;
  }

  async getFlavorClass(name: string): Promise<FlavorClass | undefined> {
    const watched = this.#classes?.lookup(name);
    if (watched !== undefined) return watched ?? undefined;
    const raw = await orUndefinedIfNotFound(
      call(`get FlavorClass '${name}'`, () =>
        this.#custom.getClusterCustomObject({
          group: GROUP,
          version: VERSION,
          plural: FLAVOR_CLASS_PLURAL,
          name,
        }),
      ),
    );
    return raw === undefined ? undefined : parseObject(FlavorClassSchema, raw, `FlavorClass '${name}'`);
  }

  async listFlavorClasses(): Promise<FlavorClass[]> {
    const list = await call('list FlavorClasses', () =>
      this.#custom.listClusterCustomObject({ group: GROUP, version: VERSION, plural: FLAVOR_CLASS_PLURAL }),
    );
    return parseItems(FlavorClassSchema, list);
  }

  // The three writes of an issuance (create the record, create the Secret, mark the record) go
  // through kubeCall (fetch.ts) rather than client-node's generated clients: the same
  // authentication, shared connection and deadline, without the generated serialisation layers
  // and WHATWG fetch (together ~15% of the issuer's CPU per token in the P3 profile).
  async createFlavoredToken(token: FlavoredTokenInput): Promise<FlavoredToken> {
    const name = token.metadata.name ?? '';
    const created = await kubeCall(this.#kubeConfig, 'POST', FLAVORED_TOKENS_PATH, {
      body: token,
      action: `create FlavoredToken '${name}'`,
    });
    return parseObject(FlavoredTokenSchema, created, `FlavoredToken '${name}'`);
  }

  async getFlavoredToken(name: string): Promise<FlavoredToken | undefined> {
    const raw = await orUndefinedIfNotFound(
      call(`get FlavoredToken '${name}'`, () =>
        this.#custom.getClusterCustomObject({
          group: GROUP,
          version: VERSION,
          plural: FLAVORED_TOKEN_PLURAL,
          name,
        }),
      ),
    );
    return raw === undefined ? undefined : parseObject(FlavoredTokenSchema, raw, `FlavoredToken '${name}'`);
  }

  async findFlavoredTokenByTokenId(tokenId: string): Promise<FlavoredToken | undefined> {
    const list = await call(`find the FlavoredToken of token ID '${tokenId}'`, () =>
      this.#custom.listClusterCustomObject({
        group: GROUP,
        version: VERSION,
        plural: FLAVORED_TOKEN_PLURAL,
        labelSelector: `${TOKEN_ID_LABEL}=${tokenId}`,
      }),
    );
    return parseItems(FlavoredTokenSchema, list)[0];
  }

  async listFlavoredTokens(): Promise<FlavoredToken[]> {
    const list = await call('list FlavoredTokens', () =>
      this.#custom.listClusterCustomObject({ group: GROUP, version: VERSION, plural: FLAVORED_TOKEN_PLURAL }),
    );
    return parseItems(FlavoredTokenSchema, list);
  }

  async markFlavoredTokenIssued(name: string, at: string, resourceVersion?: string): Promise<void> {
    await kubeCall(this.#kubeConfig, 'PATCH', `${FLAVORED_TOKENS_PATH}/${name}`, {
      contentType: PatchStrategy.MergePatch,
      body: {
        metadata: {
          annotations: { [ISSUED_ANNOTATION]: at },
          ...(resourceVersion === undefined ? {} : { resourceVersion }),
        },
      },
      action: `mark FlavoredToken '${name}' issued`,
    });
  }

  async markFlavoredTokenRevoked(name: string): Promise<FlavoredToken> {
    const patched = await call(`revoke FlavoredToken '${name}'`, () =>
      this.#custom.patchClusterCustomObject(
        {
          group: GROUP,
          version: VERSION,
          plural: FLAVORED_TOKEN_PLURAL,
          name,
          body: { spec: { revoked: true } },
        },
        mergePatch,
      ),
    );
    return parseObject(FlavoredTokenSchema, patched, `FlavoredToken '${name}'`);
  }

  async deleteFlavoredToken(name: string, uid: string): Promise<void> {
    // Release the revocation finalizer first, or the record would wait for the controller. The
    // test ops make this a no-op failure on any other object or finalizer list (then the
    // controller finishes the deletion).
    await orUndefinedIfNotFound(
      call(`release the finalizer of FlavoredToken '${name}'`, () =>
        this.#custom.patchClusterCustomObject(
          {
            group: GROUP,
            version: VERSION,
            plural: FLAVORED_TOKEN_PLURAL,
            name,
            body: [
              { op: 'test', path: '/metadata/uid', value: uid },
              { op: 'test', path: '/metadata/finalizers', value: [TOKEN_FINALIZER] },
              { op: 'replace', path: '/metadata/finalizers', value: [] },
            ],
          },
          jsonPatch,
        ),
      ),
    ).catch(() => undefined);
    await orUndefinedIfNotFound(
      call(`delete FlavoredToken '${name}'`, () =>
        this.#custom.deleteClusterCustomObject({
          group: GROUP,
          version: VERSION,
          plural: FLAVORED_TOKEN_PLURAL,
          name,
          propagationPolicy: 'Background',
          body: { preconditions: { uid } },
        }),
      ),
    );
  }

  async createBootstrapSecret(request: BootstrapSecretRequest): Promise<void> {
    const name = bootstrapSecretName(request.token.id);
    const body: V1Secret = {
      apiVersion: 'v1',
      kind: 'Secret',
      metadata: {
        name,
        namespace: BOOTSTRAP_TOKEN_NAMESPACE,
        ownerReferences: [
          {
            apiVersion: API_VERSION,
            kind: FLAVORED_TOKEN_KIND,
            name: request.owner.name,
            uid: request.owner.uid,
          },
        ],
      },
      type: BOOTSTRAP_TOKEN_SECRET_TYPE,
      stringData: {
        'token-id': request.token.id,
        'token-secret': request.token.secret.reveal(),
        expiration: request.expiration,
        'usage-bootstrap-authentication': 'true',
        ...(request.signing ? { 'usage-bootstrap-signing': 'true' } : {}),
        'auth-extra-groups': request.authExtraGroups,
        description: request.description,
      },
    };
    // The answer (the Secret, token included) is read and dropped: nothing of it is kept.
    await kubeCall(this.#kubeConfig, 'POST', BOOTSTRAP_SECRETS_PATH, {
      body,
      action: `create Secret ${BOOTSTRAP_TOKEN_NAMESPACE}/${name}`,
    });
  }

  async deleteBootstrapSecret(tokenId: string): Promise<boolean> {
    const name = bootstrapSecretName(tokenId);
    const deleted = await orUndefinedIfNotFound(
      call(`delete Secret ${BOOTSTRAP_TOKEN_NAMESPACE}/${name}`, () =>
        this.#core.deleteNamespacedSecret({ name, namespace: BOOTSTRAP_TOKEN_NAMESPACE }),
      ),
    );
    return deleted !== undefined;
  }

  /**
   * cluster-info changes only with the cluster CA or endpoint, or when the bootstrap signer
   * re-signs it for a token with usage-bootstrap-signing (one signature per such token, so it can
   * be large): read it at most every 10 s.
   */
  #clusterInfo: { info: ClusterInfo; readAt: number } | undefined;
  /** The read in flight: requests arriving while it runs share it (32 at once made 18 GETs). */
  #clusterInfoRead: Promise<ClusterInfo> | undefined;

  async readClusterInfo(): Promise<ClusterInfo> {
    if (this.#clusterInfo && Date.now() - this.#clusterInfo.readAt < 10_000) return this.#clusterInfo.info;
    this.#clusterInfoRead ??= this.#readClusterInfo()
      .then((info) => {
        this.#clusterInfo = { info, readAt: Date.now() };
        return info;
      })
      .finally(() => {
        this.#clusterInfoRead = undefined;
      });
    return this.#clusterInfoRead;
  }

  async #readClusterInfo(): Promise<ClusterInfo> {
    const configMap = await call('read ConfigMap kube-public/cluster-info', () =>
      this.#core.readNamespacedConfigMap({ name: 'cluster-info', namespace: 'kube-public' }),
    );
    const kubeconfig = configMap.data?.kubeconfig;
    if (!kubeconfig) {
      throw new KubeError(
        404,
        'NotFound',
        "ConfigMap kube-public/cluster-info has no 'kubeconfig' entry: is this a kubeadm-style cluster?",
      );
    }
    const signatures = Object.keys(configMap.data ?? {}).filter((key) =>
      key.startsWith(CLUSTER_INFO_SIGNATURE_PREFIX),
    ).length;
    return { kubeconfig, signatures };
  }
}

async function call<T>(action: string, request: () => Promise<T>): Promise<T> {
  try {
    return await request();
  } catch (error) {
    throw toKubeError(error, action);
  }
}

async function orUndefinedIfNotFound<T>(pending: Promise<T>): Promise<T | undefined> {
  try {
    return await pending;
  } catch (error) {
    if (isNotFound(error)) return undefined;
    throw error;
  }
}

interface Parser<T> {
  safeParse(value: unknown): { success: true; data: T } | { success: false };
}

/** The API server validated the object against the CRD; a mismatch here means the CRD and code drifted. */
function parseObject<T>(schema: Parser<T>, raw: unknown, what: string): T {
  const result = schema.safeParse(raw);
  if (!result.success) {
    throw new KubeError(
      500,
      'Invalid',
      `${what} does not match the nodeflavor.io/v1alpha1 schema: is the CRD up to date?`,
    );
  }
  return result.data;
}

/** Items of a list; objects that do not parse are skipped rather than hiding every other one. */
function parseItems<T>(schema: Parser<T>, list: unknown): T[] {
  const items = (list as { items?: unknown[] } | undefined)?.items ?? [];
  const parsed: T[] = [];
  for (const item of items) {
    const result = schema.safeParse(item);
    if (result.success) parsed.push(result.data);
  }
  return parsed;
}
