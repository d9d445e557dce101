// The HMAC key ring lives in one Secret (default nodeflavor-hmac-keys in the operator's
// namespace; layout in src/flavor/keyring.ts). A ring is created only on first install: when the
// Secret is missing and no FlavoredToken exists. A missing Secret with tokens in the field means
// the ring was lost, and a fresh one would silently invalidate every outstanding token, so it is
// an error that names how to restore it. Replicas racing to create converge on whichever Secret
// the API server accepted first (409 → re-read). Edits (kubectl flavor keys) replace the Secret
// with the resourceVersion they read, so two concurrent edits cannot both win.
// Key bytes never appear in an error or a log line: errors name the Secret, never its data.
import type { RandomBytes } from '../flavor/bootstrap-token.ts';
import { type KeyRing, keyRingFromSecretData, keyRingToSecretData, newKeyRing } from '../flavor/keyring.ts';
import { FLAVORED_TOKEN_PLURAL, GROUP, VERSION } from '../flavor/resources.ts';
import { VERIFIED_ANNOTATION } from '../flavor/verification-record.ts';
import { kubeCall, kubeFetch, kubeJson } from '../runtime/fetch.ts';
import { isAlreadyExists, isNotFound, KubeError } from '../runtime/kube-error.ts';
import type { KubeConfig } from '../runtime/kubeconfig.ts';

/** The fields of a core/v1 Secret the key ring uses; the rest of a read Secret is kept as it was. */
export interface V1Secret {
  apiVersion?: string;
  kind?: string;
  metadata?: { name?: string; namespace?: string; resourceVersion?: string; labels?: Record<string, string> };
  type?: string;
  data?: Record<string, string>;
  stringData?: Record<string, string>;
}

const secretPath = (location: KeyRingLocation, name?: string) =>
  `/api/v1/namespaces/${encodeURIComponent(location.namespace)}/secrets${name === undefined ? '' : `/${encodeURIComponent(name)}`}`;

export const DEFAULT_KEY_SECRET_NAME = 'nodeflavor-hmac-keys';
/** Where operators find the restore procedure (named in errors and log lines). */
const RESTORE_DOC = 'docs/operations.md#restoring-the-key-ring';

export interface KeyRingLocation {
  namespace: string;
  name: string;
}

interface LoadKeyRingOptions extends KeyRingLocation {
  /** Create the Secret with a fresh ring when it is absent on first install (the operator); false for the CLI. */
  createIfMissing: boolean;
  randomBytes?: RandomBytes;
}

export function describeLocation(location: KeyRingLocation): string {
  return `Secret ${location.namespace}/${location.name}`;
}

/** The ring cannot be used (lost, corrupt, not loaded yet): nothing may be issued or verified. */
export class KeyRingUnavailableError extends KubeError {
  constructor(reason: 'KeyRingMissing' | 'KeyRingInvalid' | 'KeyRingNotLoaded', message: string) {
    super(503, reason, message);
    this.name = 'KeyRingUnavailableError';
  }
}

/** What a replica says when the Secret is gone but tokens exist. */
export function missingRingMessage(location: KeyRingLocation): string {
  return (
    `the HMAC key ring ${describeLocation(location)} is missing while FlavoredTokens or verified nodes exist, so no new ring ` +
    `is created (it would make every outstanding token fail): restore the Secret from your backup ` +
    `(kubectl -n ${location.namespace} create -f <backup>.json; see ${RESTORE_DOC}); only if the keys are ` +
    `lost for good, start a new ring with 'kubectl flavor keys init'`
  );
}

export async function loadKeyRing(kubeConfig: KubeConfig, options: LoadKeyRingOptions): Promise<KeyRing> {
  const where = describeLocation(options);
  const existing = await readSecret(kubeConfig, options, where);
  if (existing) return parseRing(existing, where);
  if (!options.createIfMissing) {
    throw new KubeError(
      404,
      'NotFound',
      `the HMAC key ${where} does not exist: start the nodeflavor operator once (it creates it) or check --key-secret`,
    );
  }
  if (!(await isFirstInstall(kubeConfig)))
    throw new KeyRingUnavailableError('KeyRingMissing', missingRingMessage(options));
  const ring = newKeyRing(options.randomBytes);
  if (await createKeyRingSecret(kubeConfig, options, ring)) return ring;
  // Another replica created it between our read and our create: theirs wins, ours is dropped.
  const theirs = await readSecret(kubeConfig, options, where);
  if (!theirs)
    throw new KubeError(409, 'Conflict', `the HMAC key ${where} was created and deleted meanwhile: retry`);
  return parseRing(theirs, where);
}

/**
 * First install: no FlavoredToken exists, so no token in the field depends on a ring (one
 * object is enough to know; `limit=1` keeps the answer small at any scale), and no Node carries
 * a verification record (signed under the ring: the proof of nodes whose tokens were deleted
 * with revocationPolicy Keep, which a new ring would turn into InvalidRecord).
 */
export async function isFirstInstall(kubeConfig: KubeConfig): Promise<boolean> {
  const list = await kubeJson<{ items?: unknown[] }>(
    kubeConfig,
    'GET',
    `/apis/${GROUP}/${VERSION}/${FLAVORED_TOKEN_PLURAL}`,
    { query: { limit: 1 }, action: 'list FlavoredTokens (is this a first install?)' },
  );
  return (list.items ?? []).length === 0 && !(await anyNodeCarriesRecord(kubeConfig));
}

/** Pages through Node metadata only (no field selector reaches annotations); rare: ring creation. */
async function anyNodeCarriesRecord(kubeConfig: KubeConfig): Promise<boolean> {
  let continueToken: string | undefined;
  do {
    const response = await kubeFetch(kubeConfig, '/api/v1/nodes', {
      query: { limit: 500, continue: continueToken },
      headers: { Accept: 'application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1' },
    });
    if (response.status !== 200)
      throw new KubeError(response.status, `HTTP${response.status}`, 'list Nodes (is this a first install?)');
    const page = (await response.json()) as {
      metadata?: { continue?: string };
      items?: { metadata?: { annotations?: Record<string, string> } }[];
    };
    if (page.items?.some((node) => node.metadata?.annotations?.[VERIFIED_ANNOTATION] !== undefined))
      return true;
    continueToken = page.metadata?.continue || undefined;
  } while (continueToken);
  return false;
}

/** Creates the Secret; false when it already exists (another replica or an admin was first). */
export async function createKeyRingSecret(
  kubeConfig: KubeConfig,
  location: KeyRingLocation,
  ring: KeyRing,
): Promise<boolean> {
  const body: V1Secret = {
    apiVersion: 'v1',
    kind: 'Secret',
    metadata: {
      name: location.name,
      namespace: location.namespace,
      labels: { 'app.kubernetes.io/name': 'nodeflavor', 'app.kubernetes.io/component': 'hmac-keys' },
    },
    type: 'Opaque',
    data: keyRingToSecretData(ring),
  };
  try {
    await kubeCall(kubeConfig, 'POST', secretPath(location), {
      body,
      action: `create the HMAC key ${describeLocation(location)}`,
    });
    return true;
  } catch (error) {
    if (isAlreadyExists(error)) return false;
    throw error;
  }
}

interface StoredKeyRing {
  ring: KeyRing;
  /** The Secret as read: an edit replaces it with this resourceVersion (optimistic concurrency). */
  secret: V1Secret;
}

/** The ring and the Secret it was read from; 404 with a message saying what to do. */
export async function readStoredKeyRing(
  kubeConfig: KubeConfig,
  location: KeyRingLocation,
): Promise<StoredKeyRing> {
  const where = describeLocation(location);
  const secret = await readSecret(kubeConfig, location, where);
  if (!secret) {
    throw new KubeError(
      404,
      'NotFound',
      `the HMAC key ${where} does not exist: restore it from your backup (${RESTORE_DOC}) or check --key-secret`,
    );
  }
  return { ring: parseRing(secret, where), secret };
}

/**
 * Writes `ring` over the Secret read as `stored`, keeping its metadata. A 409 means someone
 * changed the Secret since: nothing was written, and the message says to run the command again.
 */
export async function replaceKeyRing(
  kubeConfig: KubeConfig,
  location: KeyRingLocation,
  stored: StoredKeyRing,
  ring: KeyRing,
): Promise<void> {
  const where = describeLocation(location);
  const body: V1Secret = { ...stored.secret, data: keyRingToSecretData(ring) };
  delete body.stringData;
  try {
    await kubeCall(kubeConfig, 'PUT', secretPath(location, location.name), {
      body,
      action: `update the HMAC key ${where}`,
    });
  } catch (error) {
    if (!(error instanceof KubeError)) throw error;
    const mapped = error;
    if (mapped.status === 409) {
      throw new KubeError(
        409,
        'Conflict',
        `the HMAC key ${where} changed while it was being edited: nothing was written, run the command again`,
      );
    }
    if (mapped.status === 403) {
      throw new KubeError(
        403,
        'Forbidden',
        `you may not update the HMAC key ${where} (it needs 'get' and 'update' on that Secret)`,
      );
    }
    throw mapped;
  }
}

async function readSecret(
  kubeConfig: KubeConfig,
  location: KeyRingLocation,
  where: string,
): Promise<V1Secret | undefined> {
  try {
    return await kubeCall<V1Secret>(kubeConfig, 'GET', secretPath(location, location.name), {
      action: `read the HMAC key ${where}`,
    });
  } catch (error) {
    if (!(error instanceof KubeError)) throw error;
    const mapped = error;
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

/** The ring in a Secret's data; errors name the Secret and the entry, never key bytes. */
export function parseRing(secret: { data?: Record<string, string> }, where: string): KeyRing {
  try {
    return keyRingFromSecretData(secret.data ?? {});
  } catch (error) {
    // keyRingFromSecretData's messages name entries and lengths, never key bytes.
    throw new KubeError(500, 'Invalid', `${where} is not a valid key ring: ${(error as Error).message}`);
  }
}
