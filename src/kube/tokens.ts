// The Kubernetes reads and writes of token issuance: FlavorClasses and FlavoredTokens
// (nodeflavor.io/v1alpha1, cluster-scoped), the bootstrap token Secret in kube-system, and the
// kube-public/cluster-info ConfigMap. Every failure becomes a KubeError. The bootstrap token's
// secret leaves the process here and only here, as the Secret's stringData.
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
  type FlavoredTokenStatus,
  GROUP,
  ISSUED_ANNOTATION,
  NODE_NAME_CLAIM_PLURAL,
  type NodeNameClaim,
  NodeNameClaimSchema,
  parseStored,
  type StoredFlavoredToken,
  TOKEN_FINALIZER,
  TOKEN_ID_LABEL,
  VERSION,
} from '../flavor/resources.ts';
import { kubeCall } from '../runtime/fetch.ts';
import { KubeError, orUndefinedIfNotFound } from '../runtime/kube-error.ts';
import type { KubeConfig } from '../runtime/kubeconfig.ts';
import { type FlavorClassCache, lookupFlavorClass } from './flavor-classes.ts';

export { KubeError } from '../runtime/kube-error.ts';

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
  /** The join records (NodeNameClaims) of one token's joins, or every one (ADR 0016). */
  listJoinRecords(tokenId?: string): Promise<NodeNameClaim[]>;
  markFlavoredTokenRevoked(name: string): Promise<FlavoredToken>;
  /**
   * Marks issuance complete (the bootstrap Secret exists), see ISSUED_ANNOTATION; with
   * `resourceVersion`, only the record as it was read (409 otherwise).
   */
  markFlavoredTokenIssued(name: string, at: string, resourceVersion?: string): Promise<void>;
  /** Deletes only the object with this UID (a precondition), so a rollback never hits a newer one. */
  deleteFlavoredToken(name: string, uid: string): Promise<void>;
  /**
   * Sets annotations on the record (attestation bookkeeping, ADR 0014); with `resourceVersion`,
   * only on the record as it was read (409 otherwise). Returns the record as written.
   */
  annotateFlavoredToken(
    name: string,
    annotations: Record<string, string>,
    resourceVersion?: string,
  ): Promise<FlavoredToken>;
  createBootstrapSecret(request: BootstrapSecretRequest): Promise<void>;
  /** false when there was nothing to delete. */
  deleteBootstrapSecret(tokenId: string): Promise<boolean>;
  /** kube-public/cluster-info: its kubeconfig and how many token signatures it carries. */
  readClusterInfo(): Promise<ClusterInfo>;
}

const MERGE_PATCH = 'application/merge-patch+json';
const JSON_PATCH = 'application/json-patch+json';
const CLASSES = `/apis/${GROUP}/${VERSION}/${FLAVOR_CLASS_PLURAL}`;
const TOKENS = `/apis/${GROUP}/${VERSION}/${FLAVORED_TOKEN_PLURAL}`;
const CLAIMS = `/apis/${GROUP}/${VERSION}/${NODE_NAME_CLAIM_PLURAL}`;
const SECRETS = `/api/v1/namespaces/${BOOTSTRAP_TOKEN_NAMESPACE}/secrets`;
const name$ = encodeURIComponent;

export class KubeTokenStore implements TokenKube {
  readonly #kubeConfig: KubeConfig;
  readonly #classes: FlavorClassCache | undefined;

  /**
   * With `classes`, FlavorClass lookups are served from that cache once it has synced (a lister,
   * as client-go controllers read through informers: a GET per issuance was a fifth of the
   * issuer's API requests at hundreds of issuances a second).
   */
  constructor(kubeConfig: KubeConfig, classes?: FlavorClassCache) {
    this.#kubeConfig = kubeConfig;
    this.#classes = classes;
  }

  async getFlavorClass(name: string): Promise<FlavorClass | undefined> {
    const watched = this.#classes ? lookupFlavorClass(this.#classes, name) : undefined;
    if (watched !== undefined) return watched ?? undefined;
    const raw = await orUndefinedIfNotFound(
      kubeCall(this.#kubeConfig, 'GET', `${CLASSES}/${name$(name)}`, { action: `get FlavorClass '${name}'` }),
    );
    return raw === undefined ? undefined : parseObject(FlavorClassSchema, raw, `FlavorClass '${name}'`);
  }

  async listFlavorClasses(): Promise<FlavorClass[]> {
    const list = await kubeCall(this.#kubeConfig, 'GET', CLASSES, { action: 'list FlavorClasses' });
    return parseItems(FlavorClassSchema, list);
  }

  // An issuance's requests (create the record, create the Secret, read the record back; a keyed
  // one marks the record) go
  // through kubeCall (fetch.ts) rather than client-node's generated clients: the same
  // authentication, shared connection and deadline, without the generated serialisation layers
  // and WHATWG fetch (together ~15% of the issuer's CPU per token in the P3 profile).
  async createFlavoredToken(token: FlavoredTokenInput): Promise<FlavoredToken> {
    const name = token.metadata.name ?? '';
    const created = await kubeCall(this.#kubeConfig, 'POST', TOKENS, {
      body: token,
      action: `create FlavoredToken '${name}'`,
    });
    return parseObject(FlavoredTokenSchema, created, `FlavoredToken '${name}'`);
  }

  async getFlavoredToken(name: string): Promise<FlavoredToken | undefined> {
    const raw = await orUndefinedIfNotFound(
      kubeCall(this.#kubeConfig, 'GET', `${TOKENS}/${name$(name)}`, {
        action: `get FlavoredToken '${name}'`,
      }),
    );
    return raw === undefined ? undefined : parseObject(FlavoredTokenSchema, raw, `FlavoredToken '${name}'`);
  }

  /** The token as the API server has it now, with the metadata it always sets (the controller's read). */
  async readStoredToken(name: string): Promise<StoredFlavoredToken | undefined> {
    const raw = await orUndefinedIfNotFound(
      kubeCall(this.#kubeConfig, 'GET', `${TOKENS}/${name$(name)}`, {
        action: `read FlavoredToken '${name}'`,
      }),
    );
    return raw === undefined ? undefined : storedToken(raw, name);
  }

  /** PUT status at the token's resourceVersion: a 409 when it changed since it was read. */
  async writeTokenStatus(
    token: StoredFlavoredToken,
    status: FlavoredTokenStatus,
  ): Promise<StoredFlavoredToken> {
    const name = token.metadata.name;
    const written = await kubeCall(this.#kubeConfig, 'PUT', `${TOKENS}/${name$(name)}/status`, {
      action: `update the status of FlavoredToken '${name}'`,
      body: { ...token, status },
    });
    return storedToken(written, name);
  }

  /**
   * Adds or removes the revocation finalizer; the JSON-patch test makes a concurrent edit a 409,
   * not a loss. The patched token, or undefined when nothing was to do.
   */
  async setFinalizer(token: StoredFlavoredToken, present: boolean): Promise<StoredFlavoredToken | undefined> {
    const current = token.metadata.finalizers ?? [];
    if (current.includes(TOKEN_FINALIZER) === present) return undefined;
    const next = present ? [...current, TOKEN_FINALIZER] : current.filter((f) => f !== TOKEN_FINALIZER);
    const patch = token.metadata.finalizers
      ? [
          { op: 'test', path: '/metadata/finalizers', value: current },
          { op: 'replace', path: '/metadata/finalizers', value: next },
        ]
      : [{ op: 'add', path: '/metadata/finalizers', value: next }];
    const name = token.metadata.name;
    const patched = await kubeCall(this.#kubeConfig, 'PATCH', `${TOKENS}/${name$(name)}`, {
      contentType: JSON_PATCH,
      body: patch,
      action: `${present ? 'add' : 'remove'} the finalizer of FlavoredToken '${name}'`,
    });
    return storedToken(patched, name);
  }

  /** Deletes exactly this version of the token (preconditions: a 409 when it changed). */
  async deleteTokenVersion(token: StoredFlavoredToken): Promise<void> {
    await kubeCall(this.#kubeConfig, 'DELETE', `${TOKENS}/${name$(token.metadata.name)}`, {
      action: `delete half-made FlavoredToken '${token.metadata.name}'`,
      body: {
        apiVersion: 'v1',
        kind: 'DeleteOptions',
        preconditions: { uid: token.metadata.uid, resourceVersion: token.metadata.resourceVersion },
      },
    });
  }

  async findFlavoredTokenByTokenId(tokenId: string): Promise<FlavoredToken | undefined> {
    const list = await kubeCall(this.#kubeConfig, 'GET', TOKENS, {
      query: { labelSelector: `${TOKEN_ID_LABEL}=${tokenId}` },
      action: `find the FlavoredToken of token ID '${tokenId}'`,
    });
    return parseItems(FlavoredTokenSchema, list)[0];
  }

  async listFlavoredTokens(): Promise<FlavoredToken[]> {
    const list = await kubeCall(this.#kubeConfig, 'GET', TOKENS, { action: 'list FlavoredTokens' });
    return parseItems(FlavoredTokenSchema, list);
  }

  async listJoinRecords(tokenId?: string): Promise<NodeNameClaim[]> {
    const list = await kubeCall(this.#kubeConfig, 'GET', CLAIMS, {
      ...(tokenId ? { query: { labelSelector: `${TOKEN_ID_LABEL}=${tokenId}` } } : {}),
      action: tokenId ? `list the join records of token ID '${tokenId}'` : 'list the join records',
    });
    return parseItems(NodeNameClaimSchema, list);
  }

  async markFlavoredTokenIssued(name: string, at: string, resourceVersion?: string): Promise<void> {
    await kubeCall(this.#kubeConfig, 'PATCH', `${TOKENS}/${name$(name)}`, {
      contentType: MERGE_PATCH,
      body: {
        metadata: {
          annotations: { [ISSUED_ANNOTATION]: at },
          ...(resourceVersion === undefined ? {} : { resourceVersion }),
        },
      },
      action: `mark FlavoredToken '${name}' issued`,
    });
  }

  async annotateFlavoredToken(
    name: string,
    annotations: Record<string, string>,
    resourceVersion?: string,
  ): Promise<FlavoredToken> {
    const patched = await kubeCall(this.#kubeConfig, 'PATCH', `${TOKENS}/${name$(name)}`, {
      contentType: MERGE_PATCH,
      body: { metadata: { annotations, ...(resourceVersion === undefined ? {} : { resourceVersion }) } },
      action: `annotate FlavoredToken '${name}'`,
    });
    return parseObject(FlavoredTokenSchema, patched, `FlavoredToken '${name}'`);
  }

  async markFlavoredTokenRevoked(name: string): Promise<FlavoredToken> {
    const patched = await kubeCall(this.#kubeConfig, 'PATCH', `${TOKENS}/${name$(name)}`, {
      contentType: MERGE_PATCH,
      body: { spec: { revoked: true } },
      action: `revoke FlavoredToken '${name}'`,
    });
    return parseObject(FlavoredTokenSchema, patched, `FlavoredToken '${name}'`);
  }

  async deleteFlavoredToken(name: string, uid: string): Promise<void> {
    // Release the revocation finalizer first, or the record would wait for the controller. The
    // test ops make this a no-op failure on any other object or finalizer list (then the
    // controller finishes the deletion).
    await orUndefinedIfNotFound(
      kubeCall(this.#kubeConfig, 'PATCH', `${TOKENS}/${name$(name)}`, {
        contentType: JSON_PATCH,
        body: [
          { op: 'test', path: '/metadata/uid', value: uid },
          { op: 'test', path: '/metadata/finalizers', value: [TOKEN_FINALIZER] },
          { op: 'replace', path: '/metadata/finalizers', value: [] },
        ],
        action: `release the finalizer of FlavoredToken '${name}'`,
      }),
    ).catch(() => undefined);
    await orUndefinedIfNotFound(
      kubeCall(this.#kubeConfig, 'DELETE', `${TOKENS}/${name$(name)}`, {
        body: { propagationPolicy: 'Background', preconditions: { uid } },
        action: `delete FlavoredToken '${name}'`,
      }),
    );
  }

  async createBootstrapSecret(request: BootstrapSecretRequest): Promise<void> {
    const name = bootstrapSecretName(request.token.id);
    const body = {
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
    await kubeCall(this.#kubeConfig, 'POST', SECRETS, {
      body,
      action: `create Secret ${BOOTSTRAP_TOKEN_NAMESPACE}/${name}`,
    });
  }

  async deleteBootstrapSecret(tokenId: string): Promise<boolean> {
    const name = bootstrapSecretName(tokenId);
    const deleted = await orUndefinedIfNotFound(
      kubeCall(this.#kubeConfig, 'DELETE', `${SECRETS}/${name$(name)}`, {
        action: `delete Secret ${BOOTSTRAP_TOKEN_NAMESPACE}/${name}`,
      }).then(() => true),
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
    const configMap = await kubeCall<{ data?: Record<string, string> }>(
      this.#kubeConfig,
      'GET',
      '/api/v1/namespaces/kube-public/configmaps/cluster-info',
      { action: 'read ConfigMap kube-public/cluster-info' },
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

function storedToken(raw: unknown, name: string): StoredFlavoredToken {
  const token = parseStored(FlavoredTokenSchema, raw);
  if (!token)
    throw new KubeError(
      500,
      'Invalid',
      `FlavoredToken '${name}' does not match the nodeflavor.io/v1alpha1 schema: is the CRD up to date?`,
    );
  return token;
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
