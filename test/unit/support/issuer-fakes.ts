// In-memory stand-ins for the token issuer's Kubernetes I/O (TokenKube) and reviews, for unit
// tests of the issuance logic and the HTTP layer. The real API server is exercised by the e2e tests.

import assert from 'node:assert/strict';
import type { KeyRing } from '../../../src/flavor/keyring.ts';
import { newKeyRing } from '../../../src/flavor/keyring.ts';
import {
  type FlavorClass,
  type FlavoredToken,
  type FlavoredTokenInput,
  FlavoredTokenSchema,
  type NodeNameClaim,
  TOKEN_ID_LABEL,
} from '../../../src/flavor/resources.ts';
import type { KubeUser, ResourceCheck } from '../../../src/kube/reviews.ts';
import type { BootstrapSecretRequest, TokenKube } from '../../../src/kube/tokens.ts';
import { createCertificateAuthority } from '../../../src/pki/certs.ts';
import { KubeError } from '../../../src/runtime/kube-error.ts';
import { DEFAULT_ISSUER_AUDIENCE } from '../../../src/tokenissuer/config.ts';
import type { Reviews } from '../../../src/tokenissuer/defences/auth.ts';
import { IssuerError } from '../../../src/tokenissuer/errors.ts';
import type { TokenFeed } from '../../../src/tokenissuer/tokens/token-feed.ts';
import { seededRandomBytes } from './random.ts';

export interface StoredSecret {
  tokenId: string;
  secret: string;
  expiration: string;
  authExtraGroups: string;
  description: string;
  owner: { name: string; uid: string };
  signing: boolean;
}

export class FakeTokenKube implements TokenKube {
  readonly flavors = new Map<string, FlavorClass>();
  readonly tokens = new Map<string, FlavoredToken>();
  readonly secrets = new Map<string, StoredSecret>();
  /** Set to make the next call of that name throw. */
  failNext: Partial<Record<keyof TokenKube, KubeError>> = {};
  /**
   * Set to run once, just before the next call of that name does anything: a concurrent writer's
   * turn between two of the code's own calls. Calls without one take no extra turn of the event loop.
   */
  beforeNext: Partial<Record<keyof TokenKube, () => unknown>> = {};
  /** Every annotateFlavoredToken call, in order, including those that failed. */
  readonly annotateCalls: { name: string; annotations: Record<string, string>; resourceVersion?: string }[] =
    [];
  clusterInfo: string;
  /** The `jws-kubeconfig-*` entries cluster-info carries. */
  clusterInfoSignatures = 0;
  #uid = 0;

  constructor(clusterInfo: string) {
    this.clusterInfo = clusterInfo;
  }

  addFlavor(name: string, description?: string): void {
    this.flavors.set(name, {
      apiVersion: 'nodeflavor.io/v1alpha1',
      kind: 'FlavorClass',
      metadata: { name },
      spec: description ? { description } : {},
    });
  }

  async #before(name: keyof TokenKube): Promise<void> {
    const hook = this.beforeNext[name];
    if (!hook) return;
    delete this.beforeNext[name];
    await hook();
  }

  #maybeFail(name: keyof TokenKube): void {
    const error = this.failNext[name];
    if (error) {
      delete this.failNext[name];
      throw error;
    }
  }

  async getFlavorClass(name: string) {
    this.#maybeFail('getFlavorClass');
    return this.flavors.get(name);
  }
  async listFlavorClasses() {
    return [...this.flavors.values()];
  }
  async createFlavoredToken(token: FlavoredTokenInput) {
    this.#maybeFail('createFlavoredToken');
    const name = token.metadata.name ?? '';
    if (this.tokens.has(name))
      throw new KubeError(409, 'AlreadyExists', `flavoredtokens "${name}" already exists`);
    const stored = FlavoredTokenSchema.parse({
      ...token,
      metadata: {
        ...token.metadata,
        uid: `uid-${++this.#uid}`,
        creationTimestamp: this.creationTimestamp,
        resourceVersion: String(++this.#version),
      },
    });
    this.tokens.set(name, stored);
    return structuredClone(stored);
  }
  /** What createFlavoredToken stamps as the creation time. */
  creationTimestamp = '2030-01-01T00:00:00Z';
  #version = 0;
  async getFlavoredToken(name: string) {
    if (this.beforeNext.getFlavoredToken) await this.#before('getFlavoredToken');
    this.#maybeFail('getFlavoredToken');
    const token = this.tokens.get(name);
    return token === undefined ? undefined : structuredClone(token);
  }
  async findFlavoredTokenByTokenId(tokenId: string) {
    return [...this.tokens.values()].find((t) => t.metadata.labels?.[TOKEN_ID_LABEL] === tokenId);
  }
  async listFlavoredTokens() {
    return [...this.tokens.values()];
  }
  /** The join records (NodeNameClaims) a test puts here. */
  readonly records = new Map<string, NodeNameClaim>();
  async listJoinRecords(tokenId?: string) {
    return [...this.records.values()].filter(
      (r) => tokenId === undefined || r.metadata.labels?.['nodeflavor.io/token-id'] === tokenId,
    );
  }
  async markFlavoredTokenIssued(name: string, at: string, resourceVersion?: string) {
    this.#maybeFail('markFlavoredTokenIssued');
    const token = this.tokens.get(name);
    if (!token) throw new KubeError(404, 'NotFound', 'not found');
    if (resourceVersion !== undefined && resourceVersion !== token.metadata.resourceVersion)
      throw new KubeError(409, 'Conflict', 'the object has been modified');
    // The API server would take it; tests assert it never happens.
    if (token.spec.revoked || token.metadata.deletionTimestamp) this.markedWithdrawn.push(name);
    token.metadata.annotations = { ...token.metadata.annotations, 'nodeflavor.io/issued': at };
    token.metadata.resourceVersion = String(++this.#version);
  }
  async annotateFlavoredToken(name: string, annotations: Record<string, string>, resourceVersion?: string) {
    if (this.beforeNext.annotateFlavoredToken) await this.#before('annotateFlavoredToken');
    this.annotateCalls.push({
      name,
      annotations,
      ...(resourceVersion === undefined ? {} : { resourceVersion }),
    });
    this.#maybeFail('annotateFlavoredToken');
    const token = this.tokens.get(name);
    if (!token) throw new KubeError(404, 'NotFound', 'not found');
    if (resourceVersion !== undefined && resourceVersion !== token.metadata.resourceVersion)
      throw new KubeError(409, 'Conflict', 'the object has been modified');
    token.metadata.annotations = { ...token.metadata.annotations, ...annotations };
    token.metadata.resourceVersion = String(++this.#version);
    return structuredClone(token);
  }
  /** Records marked issued while revoked or being deleted. */
  readonly markedWithdrawn: string[] = [];
  async markFlavoredTokenRevoked(name: string) {
    const token = this.tokens.get(name);
    if (!token) throw new KubeError(404, 'NotFound', 'not found');
    token.spec.revoked = true;
    token.metadata.resourceVersion = String(++this.#version);
    return structuredClone(token);
  }
  /** `kubectl delete`: the revocation finalizer holds the record, now marked deleting. */
  async beginDeletion(name: string) {
    const token = this.tokens.get(name);
    if (!token) return;
    token.metadata.deletionTimestamp ??= '2030-01-01T00:00:10Z';
    token.metadata.resourceVersion = String(++this.#version);
  }
  /** The controller released the finalizer of a record being deleted: it is gone. */
  async finishDeletion(name: string) {
    if (this.tokens.get(name)?.metadata.deletionTimestamp) this.tokens.delete(name);
  }
  /** A write that changes nothing issuance cares about (the controller's status write). */
  async writeStatus(name: string) {
    const token = this.tokens.get(name);
    if (!token) return;
    token.status = { ...token.status, tokenID: token.metadata.labels?.[TOKEN_ID_LABEL] ?? '' };
    token.metadata.resourceVersion = String(++this.#version);
  }
  async deleteFlavoredToken(name: string, uid: string) {
    this.#maybeFail('deleteFlavoredToken');
    if (this.tokens.get(name)?.metadata.uid === uid) this.tokens.delete(name);
  }
  async createBootstrapSecret(request: BootstrapSecretRequest) {
    if (this.beforeNext.createBootstrapSecret) await this.#before('createBootstrapSecret');
    this.#maybeFail('createBootstrapSecret');
    if (this.secrets.has(request.token.id)) throw new KubeError(409, 'AlreadyExists', 'secret exists');
    this.secrets.set(request.token.id, {
      tokenId: request.token.id,
      secret: request.token.secret.reveal(),
      expiration: request.expiration,
      authExtraGroups: request.authExtraGroups,
      description: request.description,
      owner: request.owner,
      signing: request.signing,
    });
  }
  async deleteBootstrapSecret(tokenId: string) {
    if (this.beforeNext.deleteBootstrapSecret) await this.#before('deleteBootstrapSecret');
    return this.secrets.delete(tokenId);
  }
  async readClusterInfo() {
    this.#maybeFail('readClusterInfo');
    return { kubeconfig: this.clusterInfo, signatures: this.clusterInfoSignatures };
  }
}

export async function clusterInfoKubeconfig(server = 'https://10.0.0.1:6443'): Promise<string> {
  const ca = await createCertificateAuthority('test-ca', 3_600_000);
  const data = Buffer.from(ca.certPem).toString('base64');
  return `apiVersion: v1\nkind: Config\nclusters:\n- name: ""\n  cluster:\n    server: ${server}\n    certificate-authority-data: ${data}\n`;
}

/**
 * Bearer token → user (and the audiences the token is valid for, default the issuer's); user →
 * flavors it may use and other RBAC grants (`verb resource/name`). Like the API server, a review
 * authenticates a token only for the requested audiences it holds, and answers their intersection.
 */
export class FakeReviews implements Reviews {
  readonly users = new Map<string, { user: KubeUser; audiences: string[] | 'ignored' }>();
  readonly grants = new Map<string, Set<string>>();
  /** Extra RBAC per username: `verb resource/name` strings. */
  readonly rbac = new Map<string, Set<string>>();
  reviewCalls = 0;
  /** Every SubjectAccessReview asked, in order. */
  readonly accessReviews: { user: KubeUser; check: ResourceCheck }[] = [];

  addUser(
    token: string,
    username: string,
    flavors: string[],
    options: { audiences?: string[] | 'ignored'; user?: Partial<KubeUser> } = {},
  ): void {
    this.users.set(token, {
      user: { username, groups: ['system:authenticated'], extra: {}, ...options.user },
      audiences: options.audiences ?? [DEFAULT_ISSUER_AUDIENCE],
    });
    this.grants.set(username, new Set(flavors));
  }
  async reviewToken(token: string, audiences: string[]) {
    this.reviewCalls++;
    const entry = this.users.get(token);
    if (!entry) return undefined;
    // 'ignored': an authenticator that does not do audiences answers without them.
    if (entry.audiences === 'ignored') return { user: entry.user, audiences: [] };
    const valid = entry.audiences.filter((a) => audiences.includes(a));
    return valid.length > 0 ? { user: entry.user, audiences: valid } : undefined;
  }
  async userCan(user: KubeUser, check: ResourceCheck) {
    this.accessReviews.push({ user, check });
    if (check.verb === 'use') return this.grants.get(user.username)?.has(check.name ?? '') ?? false;
    return this.rbac.get(user.username)?.has(`${check.verb} ${check.resource}/${check.name ?? ''}`) ?? false;
  }
}

export function fakeKeyRing(seed = 'ring'): { loaded: boolean; get(): Promise<KeyRing> } {
  const ring = newKeyRing(seededRandomBytes(seed));
  return { loaded: true, get: async () => ring };
}

/** The issuer's FlavoredToken watch over a FakeTokenKube's records; `change` plays a watch event. */
export class FakeFeed implements TokenFeed {
  synced = true;
  readonly listeners = new Map<string, Set<(t: FlavoredToken | undefined) => void>>();
  readonly kube: FakeTokenKube;
  constructor(kube: FakeTokenKube) {
    this.kube = kube;
  }
  list() {
    return [...this.kube.tokens.values()];
  }
  get(name: string) {
    return this.kube.tokens.get(name);
  }
  joinsOf(token: FlavoredToken) {
    return [...this.kube.records.values()].filter(
      (r) => (r.spec.holder?.tokenName ?? r.status?.join?.tokenName) === token.metadata.name,
    );
  }
  subscribe(name: string, listener: (t: FlavoredToken | undefined) => void) {
    const set = this.listeners.get(name) ?? new Set();
    set.add(listener);
    this.listeners.set(name, set);
    return () => set.delete(listener);
  }
  change(name: string, token: FlavoredToken | undefined) {
    if (token) this.kube.tokens.set(name, token);
    else this.kube.tokens.delete(name);
    for (const listener of this.listeners.get(name) ?? []) listener(token);
  }
}

/** The IssuerError `promise` rejects with, checked for its status and (optionally) its message. */
export async function issuerErrorFrom(
  promise: Promise<unknown>,
  status: number,
  message?: RegExp,
): Promise<IssuerError> {
  let caught: unknown;
  await assert.rejects(promise, (error) => {
    caught = error;
    return true;
  });
  assert.ok(caught instanceof IssuerError, String(caught));
  assert.equal(caught.status, status, caught.message);
  if (message) assert.match(caught.message, message);
  return caught;
}
