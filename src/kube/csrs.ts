// Kubelet client CSRs as the controller keeps them, and its one write to a CSR: the approval or
// denial (approver mode), at the CSR's resourceVersion.
import { rfc3339 } from '../flavor/rfc3339.ts';
import { kubeJson } from '../runtime/fetch.ts';
import type { KubeConfig } from '../runtime/kubeconfig.ts';

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
