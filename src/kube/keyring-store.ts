// The HMAC key ring lives in one Secret (default nodeflavor-hmac-keys in the operator's
// namespace; layout in src/flavor/keyring.ts). The first replica to start creates it; replicas
// racing to do so converge on whichever Secret the API server accepted first (409 → re-read).
// Key bytes never appear in an error or a log line: errors name the Secret, never its data.
import { CoreV1Api, type KubeConfig, type V1Secret } from '@kubernetes/client-node';
import type { RandomBytes } from '../flavor/bootstrap-token.ts';
import { type KeyRing, keyRingFromSecretData, keyRingToSecretData, newKeyRing } from '../flavor/keyring.ts';
import { isAlreadyExists, isNotFound, KubeError, toKubeError } from './kube-error.ts';

export const DEFAULT_KEY_SECRET_NAME = 'nodeflavor-hmac-keys';

export interface KeyRingLocation {
  namespace: string;
  name: string;
}

export interface LoadKeyRingOptions extends KeyRingLocation {
  /** Create the Secret with a fresh ring when it is absent (the operator); false for the CLI. */
  createIfMissing: boolean;
  randomBytes?: RandomBytes;
}

export async function loadKeyRing(kubeConfig: KubeConfig, options: LoadKeyRingOptions): Promise<KeyRing> {
  const core = kubeConfig.makeApiClient(CoreV1Api);
  const where = `Secret ${options.namespace}/${options.name}`;
  const existing = await readSecret(core, options, where);
  if (existing) return parseRing(existing, where);
  if (!options.createIfMissing) {
    throw new KubeError(
      404,
      'NotFound',
      `the HMAC key ${where} does not exist: start the nodeflavor operator once (it creates it) or check --key-secret`,
    );
  }
  const ring = newKeyRing(options.randomBytes);
  const body: V1Secret = {
    apiVersion: 'v1',
    kind: 'Secret',
    metadata: {
      name: options.name,
      namespace: options.namespace,
      labels: { 'app.kubernetes.io/name': 'nodeflavor', 'app.kubernetes.io/component': 'hmac-keys' },
    },
    type: 'Opaque',
    data: keyRingToSecretData(ring),
  };
  try {
    await core.createNamespacedSecret({ namespace: options.namespace, body });
    return ring;
  } catch (error) {
    const mapped = toKubeError(error, `create the HMAC key ${where}`);
    if (!isAlreadyExists(mapped)) throw mapped;
  }
  // Another replica created it between our read and our create: theirs wins, ours is dropped.
  const theirs = await readSecret(core, options, where);
  if (!theirs)
    throw new KubeError(409, 'Conflict', `the HMAC key ${where} was created and deleted meanwhile: retry`);
  return parseRing(theirs, where);
}

async function readSecret(
  core: CoreV1Api,
  location: KeyRingLocation,
  where: string,
): Promise<V1Secret | undefined> {
  try {
    return await core.readNamespacedSecret({ name: location.name, namespace: location.namespace });
  } catch (error) {
    const mapped = toKubeError(error, `read the HMAC key ${where}`);
    if (isNotFound(mapped)) return undefined;
    if (mapped.status === 403) {
      throw new KubeError(
        403,
        'Forbidden',
        `you may not read the HMAC key ${where} (it needs 'get' on that Secret): ask a cluster admin, or use the token-issuer API`,
      );
    }
    throw mapped;
  }
}

function parseRing(secret: V1Secret, where: string): KeyRing {
  try {
    return keyRingFromSecretData(secret.data ?? {});
  } catch (error) {
    // keyRingFromSecretData's messages name entries and lengths, never key bytes.
    throw new KubeError(500, 'Invalid', `${where} is not a valid key ring: ${(error as Error).message}`);
  }
}

/**
 * A key ring re-read at most every `maxAgeMs`, so a rotation reaches every replica. When a re-read
 * fails the last good ring is kept (and `onRefreshError` told): issuing with a key one rotation old
 * is still verifiable, while refusing to issue would be an outage.
 */
export class CachedKeyRing {
  readonly #load: () => Promise<KeyRing>;
  readonly #maxAgeMs: number;
  readonly #onRefreshError: (error: Error) => void;
  #ring: KeyRing | undefined;
  #loadedAt = 0;
  #pending: Promise<KeyRing> | undefined;

  constructor(
    load: () => Promise<KeyRing>,
    maxAgeMs: number,
    onRefreshError: (error: Error) => void = () => {},
  ) {
    this.#load = load;
    this.#maxAgeMs = maxAgeMs;
    this.#onRefreshError = onRefreshError;
  }

  get loaded(): boolean {
    return this.#ring !== undefined;
  }

  async get(now: number = Date.now()): Promise<KeyRing> {
    if (this.#ring && now - this.#loadedAt < this.#maxAgeMs) return this.#ring;
    this.#pending ??= this.#refresh(now).finally(() => {
      this.#pending = undefined;
    });
    return this.#pending;
  }

  async #refresh(now: number): Promise<KeyRing> {
    try {
      this.#ring = await this.#load();
      this.#loadedAt = now;
      return this.#ring;
    } catch (error) {
      if (!this.#ring) throw error;
      this.#onRefreshError(error as Error);
      this.#loadedAt = now; // retry after another maxAgeMs, not on every request
      return this.#ring;
    }
  }
}
