// The controller's writes for FlavoredTokens, bootstrap Secrets and CSRs. Status writes carry
// the object's resourceVersion, so two reconciles racing on one token cannot both consume its
// last use: the loser gets 409 and re-decides on fresh data.

import { bootstrapSecretName } from '../flavor/bootstrap-token.ts';
import {
  FLAVORED_TOKEN_PLURAL,
  type FlavoredTokenStatus,
  GROUP,
  type StoredFlavoredToken,
  TOKEN_FINALIZER,
  VERSION,
} from '../flavor/resources.ts';
import { rfc3339 } from '../flavor/rfc3339.ts';
import { kubeJson } from './fetch.ts';
import { KubeError } from './kube-error.ts';
import type { KubeConfig } from './kubeconfig.ts';

export { TOKEN_FINALIZER };

const TOKENS_PATH = `/apis/${GROUP}/${VERSION}/${FLAVORED_TOKEN_PLURAL}`;

export function tokenPath(name: string): string {
  return `${TOKENS_PATH}/${encodeURIComponent(name)}`;
}

/** Whether FlavoredToken `name` exists, read from the API server (not a cache). */
export async function flavoredTokenExists(kubeConfig: KubeConfig, name: string): Promise<boolean> {
  try {
    await kubeJson(kubeConfig, 'GET', tokenPath(name), { action: 'read a FlavoredToken' });
    return true;
  } catch (error) {
    if (error instanceof KubeError && error.status === 404) return false;
    throw error;
  }
}

export async function writeTokenStatus(
  kubeConfig: KubeConfig,
  token: StoredFlavoredToken,
  status: FlavoredTokenStatus,
): Promise<StoredFlavoredToken> {
  return kubeJson<StoredFlavoredToken>(kubeConfig, 'PUT', `${tokenPath(token.metadata.name)}/status`, {
    action: `update the status of FlavoredToken ${token.metadata.name}`,
    body: { ...token, status },
  });
}

/**
 * Adds or removes our finalizer; the JSON-patch test makes a concurrent edit a 409, not a loss.
 * Returns the patched token (undefined when nothing was to do).
 */
export async function setFinalizer(
  kubeConfig: KubeConfig,
  token: StoredFlavoredToken,
  present: boolean,
): Promise<StoredFlavoredToken | undefined> {
  const current = token.metadata.finalizers ?? [];
  const has = current.includes(TOKEN_FINALIZER);
  if (has === present) return undefined;
  const next = present ? [...current, TOKEN_FINALIZER] : current.filter((f) => f !== TOKEN_FINALIZER);
  const patch = token.metadata.finalizers
    ? [
        { op: 'test', path: '/metadata/finalizers', value: current },
        { op: 'replace', path: '/metadata/finalizers', value: next },
      ]
    : [{ op: 'add', path: '/metadata/finalizers', value: next }];
  return kubeJson<StoredFlavoredToken>(kubeConfig, 'PATCH', tokenPath(token.metadata.name), {
    action: `${present ? 'add' : 'remove'} the finalizer of FlavoredToken ${token.metadata.name}`,
    contentType: 'application/json-patch+json',
    body: patch,
  });
}

/** Deletes a bootstrap token Secret; already gone is fine. Returns whether it existed. */
export async function deleteBootstrapSecret(kubeConfig: KubeConfig, tokenId: string): Promise<boolean> {
  try {
    await kubeJson(
      kubeConfig,
      'DELETE',
      `/api/v1/namespaces/kube-system/secrets/${bootstrapSecretName(tokenId)}`,
      {
        action: `delete bootstrap token Secret of token ${tokenId}`,
      },
    );
    return true;
  } catch (error) {
    if (error instanceof KubeError && error.status === 404) return false;
    throw error;
  }
}

export interface CsrObject {
  metadata: { name: string; uid: string; resourceVersion: string; creationTimestamp: string };
  spec: {
    username?: string;
    signerName?: string;
    request?: string;
    groups?: string[];
    usages?: string[];
    expirationSeconds?: number;
  };
  status?: {
    certificate?: string;
    /**
     * Kept by the controller's trimmed copies instead of the certificate itself: the signer has
     * issued it (its machine may have registered a Node with it, whatever our records say yet).
     */
    issued?: boolean;
    conditions?: { type: string; status: string; reason?: string; message?: string }[];
  };
}

/** Approves or denies a CSR (approver mode), with our reason in the condition. */
export async function decideCsr(
  kubeConfig: KubeConfig,
  csr: CsrObject,
  approve: boolean,
  reason: string,
  message: string,
): Promise<CsrObject> {
  const now = rfc3339(new Date());
  const conditions = [
    ...(csr.status?.conditions ?? []),
    {
      type: approve ? 'Approved' : 'Denied',
      status: 'True',
      reason,
      message,
      lastUpdateTime: now,
      lastTransitionTime: now,
    },
  ];
  return kubeJson<CsrObject>(
    kubeConfig,
    'PUT',
    `/apis/certificates.k8s.io/v1/certificatesigningrequests/${encodeURIComponent(csr.metadata.name)}/approval`,
    {
      action: `${approve ? 'approve' : 'deny'} CSR ${csr.metadata.name}`,
      body: {
        apiVersion: 'certificates.k8s.io/v1',
        kind: 'CertificateSigningRequest',
        ...csr,
        status: { ...csr.status, conditions },
      },
    },
  );
}
