// Bootstrap tokens and join configurations made the way `kubeadm token create` does, for tests
// that exercise the join path directly (without the token issuer).

import { randomInt } from 'node:crypto';
import { KubeConfig } from '@kubernetes/client-node';
import { stringify } from 'yaml';
import { rfc3339 } from '../../../src/flavor/rfc3339.ts';
import { renderDiscoveryKubeconfig } from '../../../src/tokenissuer/issuance/discovery-kubeconfig.ts';
import type { NodeIdentity } from '../kubelet-sim/kubelet.ts';
import type { E2EEnvironment } from './environment.ts';

const ALPHABET = 'abcdefghijklmnopqrstuvwxyz0123456789';
const randomChars = (n: number) =>
  Array.from({ length: n }, () => ALPHABET[randomInt(ALPHABET.length)]).join('');

export interface TestToken {
  id: string;
  secret: string;
  token: string;
}

export async function createBootstrapToken(
  env: E2EEnvironment,
  options: { expiresAt?: Date; groups?: string; signing?: boolean } = {},
): Promise<TestToken> {
  const id = randomChars(6);
  const secret = randomChars(16);
  const data: Record<string, string> = {
    'token-id': id,
    'token-secret': secret,
    'usage-bootstrap-authentication': 'true',
    'usage-bootstrap-signing': options.signing === false ? 'false' : 'true',
    'auth-extra-groups': options.groups ?? 'system:bootstrappers:kubeadm:default-node-token',
  };
  if (options.expiresAt) data.expiration = rfc3339(options.expiresAt);
  await env.core.createNamespacedSecret({
    namespace: 'kube-system',
    body: {
      metadata: { name: `bootstrap-token-${id}` },
      type: 'bootstrap.kubernetes.io/token',
      stringData: data,
    },
  });
  return { id, secret, token: `${id}.${secret}` };
}

export function joinConfiguration(
  env: E2EEnvironment,
  token: string,
  options: {
    nodeLabels?: Record<string, string>;
    taints?: { key: string; effect: string }[];
    apiVersion?: 'v1beta3' | 'v1beta4';
    /** File discovery from a kubeconfig at this path (see discoveryKubeconfig) instead of token discovery. */
    discoveryFile?: string;
  } = {},
): string {
  const apiVersion = options.apiVersion ?? 'v1beta4';
  const labels = Object.entries(options.nodeLabels ?? {})
    .map(([k, v]) => `${k}=${v}`)
    .join(',');
  const kubeletExtraArgs =
    labels === ''
      ? undefined
      : apiVersion === 'v1beta4'
        ? [{ name: 'node-labels', value: labels }]
        : { 'node-labels': labels };
  return stringify({
    apiVersion: `kubeadm.k8s.io/${apiVersion}`,
    kind: 'JoinConfiguration',
    discovery: {
      ...(options.discoveryFile
        ? { file: { kubeConfigPath: options.discoveryFile } }
        : {
            bootstrapToken: {
              token,
              apiServerEndpoint: env.apiServerEndpoint,
              caCertHashes: [env.caCertHash],
            },
          }),
      tlsBootstrapToken: token,
    },
    nodeRegistration: { kubeletExtraArgs, taints: options.taints ?? [] },
  });
}

/** A file-discovery kubeconfig: the cluster CA (or `caPem`) and the API server, as the issuer renders it. */
export function discoveryKubeconfig(env: E2EEnvironment, caPem = env.caPem): string {
  return renderDiscoveryKubeconfig({ apiServerEndpoint: env.apiServerEndpoint, caCertPem: caPem });
}

/** A client-node KubeConfig authenticated as a joined node (its client certificate). */
export function nodeKubeConfig(identity: NodeIdentity, name: string): KubeConfig {
  const kc = new KubeConfig();
  kc.loadFromOptions({
    clusters: [
      { name: 'c', server: identity.server, caData: Buffer.from(identity.caPem).toString('base64') },
    ],
    users: [
      {
        name,
        certData: Buffer.from(identity.certPem).toString('base64'),
        keyData: Buffer.from(identity.keyPem).toString('base64'),
      },
    ],
    contexts: [{ name: 'c', cluster: 'c', user: name }],
    currentContext: 'c',
  });
  return kc;
}

/** A client-node KubeConfig authenticated with a bearer token (bootstrap or ServiceAccount). */
export function tokenKubeConfig(env: E2EEnvironment, token: string): KubeConfig {
  const kc = new KubeConfig();
  kc.loadFromOptions({
    clusters: [{ name: 'c', server: env.server, caData: Buffer.from(env.caPem).toString('base64') }],
    users: [{ name: 'u', token }],
    contexts: [{ name: 'c', cluster: 'c', user: 'u' }],
    currentContext: 'c',
  });
  return kc;
}
