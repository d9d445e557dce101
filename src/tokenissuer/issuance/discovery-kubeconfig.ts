// How a joining node learns to trust the API server. Two ways kubeadm supports:
//   file  (default) discovery.file.kubeConfigPath: a kubeconfig holding the cluster CA and the API
//         server, installed on the machine beside the JoinConfiguration. kubeadm trusts that CA
//         for TLS and needs no signature in kube-public/cluster-info, so a live token costs the
//         cluster nothing there however many are outstanding.
//   token discovery.bootstrapToken with caCertHashes: kubeadm checks a JWS that the bootstrap
//         signer adds to cluster-info for every live token with usage-bootstrap-signing. Those
//         signatures grow cluster-info by 85 bytes of value per token towards the 1 MiB a ConfigMap's
//         values may total: 12,325 signatures.
// The discovery file holds no secret and is the same for every token and flavor of a cluster: it
// is cluster-info's own `kubeconfig` (kubeadm's documented way to make one), re-rendered so that
// it names the endpoint nodes join through. Pure: no I/O.
import { stringify } from 'yaml';

export const DISCOVERY_MODES = ['file', 'token'] as const;
export type DiscoveryMode = (typeof DISCOVERY_MODES)[number];
export const DEFAULT_DISCOVERY_MODE: DiscoveryMode = 'file';

/** Beside the JoinConfiguration the cloud-init writes (/etc/kubernetes/nodeflavor-join.yaml). */
export const DEFAULT_DISCOVERY_KUBECONFIG_PATH = '/etc/kubernetes/nodeflavor-discovery.conf';

const DISCOVERY_PATH_CHARACTERS = /^\/[A-Za-z0-9._/-]{1,254}$/;

const PEM_CERTIFICATE = /^-----BEGIN CERTIFICATE-----\r?\n[\s\S]+?\r?\n-----END CERTIFICATE-----\s*$/;

interface DiscoveryKubeconfigInput {
  /** host:port nodes join through. */
  apiServerEndpoint: string;
  /** The cluster CA certificate(s), PEM, as in cluster-info (a bundle during a CA rotation). */
  caCertPem: string;
}

/**
 * The discovery kubeconfig: one unnamed cluster (the CA and the server), no user, no context, as
 * kube-public/cluster-info holds it; kubeadm picks the unnamed cluster.
 */
export function renderDiscoveryKubeconfig(input: DiscoveryKubeconfigInput): string {
  // The same for every token of a cluster: the last one rendered is reused (no secret in it).
  if (lastRendered?.endpoint === input.apiServerEndpoint && lastRendered.caCertPem === input.caCertPem)
    return lastRendered.kubeconfig;
  const kubeconfig = render(input);
  lastRendered = { endpoint: input.apiServerEndpoint, caCertPem: input.caCertPem, kubeconfig };
  return kubeconfig;
}

let lastRendered: { endpoint: string; caCertPem: string; kubeconfig: string } | undefined;

function render(input: DiscoveryKubeconfigInput): string {
  if (!PEM_CERTIFICATE.test(input.caCertPem.trim() + '\n')) {
    throw new Error('discovery kubeconfig: the cluster CA is not a PEM certificate');
  }
  return stringify(
    {
      apiVersion: 'v1',
      kind: 'Config',
      clusters: [
        {
          name: '',
          cluster: {
            'certificate-authority-data': Buffer.from(input.caCertPem, 'utf8').toString('base64'),
            server: `https://${input.apiServerEndpoint}`,
          },
        },
      ],
    },
    { lineWidth: 0 },
  );
}

/**
 * An absolute path to a file, without `.`/`..` segments, spaces or shell and YAML metacharacters.
 * Never a URL: kubeadm fetches an https kubeConfigPath with the system's trust store, which would
 * drop the CA pinning.
 */
export function isDiscoveryPath(path: string): boolean {
  if (!DISCOVERY_PATH_CHARACTERS.test(path)) return false;
  return path
    .split('/')
    .slice(1)
    .every((segment) => segment !== '' && segment !== '.' && segment !== '..');
}
