// What the issuer e2e files share: a token issuer started as `nodeflavor run` starts it (TLS from
// a throwaway CA, the Helm chart's ServiceAccount as its identity), ServiceAccount tokens for
// callers, and the names of what issuance writes (to prove a request wrote nothing).
import { CustomObjectsApi } from '@kubernetes/client-node';
import {
  type CertificateAuthority,
  createCertificateAuthority,
  issueCertificate,
} from '../../../src/pki/certs.ts';
import { DEFAULT_ISSUER_AUDIENCE, parseIssuerConfig } from '../../../src/tokenissuer/config.ts';
import { type RunningIssuer, type StartOptions, startTokenIssuer } from '../../../src/tokenissuer/server.ts';
import { prepareOperatorIdentity } from './chart.ts';
import type { E2EEnvironment } from './environment.ts';
import { OPERATOR_NAMESPACE } from './nodeflavor.ts';
import { waitFor } from './wait.ts';

export interface TestIssuer {
  issuer: RunningIssuer;
  /** The CA that signed the issuer's serving certificate (clients trust it). */
  ca: CertificateAuthority;
}

/**
 * Starts a token issuer on 127.0.0.1 (a free port) with `settings` over the defaults below, as
 * the chart's ServiceAccount: the chart's RBAC must be enough for it. Pass `ca` to reuse one.
 */
export async function startTestIssuer(
  env: E2EEnvironment,
  settings: Record<string, unknown> = {},
  options: StartOptions & { ca?: CertificateAuthority } = {},
): Promise<TestIssuer> {
  const { ca: given, ...startOptions } = options;
  const ca = given ?? (await createCertificateAuthority('issuer-e2e-ca', 3_600_000));
  const serving = await issueCertificate(ca, {
    commonName: 'nodeflavor-issuer',
    ipAddresses: ['127.0.0.1'],
    usage: 'server',
    validFor: 3_600_000,
  });
  const { issuance, ...rest } = settings as { issuance?: Record<string, unknown> };
  const config = parseIssuerConfig({
    listen: { host: '127.0.0.1', port: 0 },
    tls: { certPem: serving.certPem, keyPem: serving.keyPem },
    keyRing: { namespace: OPERATOR_NAMESPACE },
    issuance: { apiServerEndpoint: env.apiServerEndpoint, ...issuance },
    ...rest,
  });
  const issuer = await startTokenIssuer(
    config,
    (await prepareOperatorIdentity(env)).kubeConfig,
    startOptions,
  );
  // As a Service would: no traffic before the replica's caches have synced (a cluster shared with
  // other test files can hold thousands of FlavoredTokens). Other not-ready reasons (a missing key
  // ring) are what some tests are about, so only the caches are waited for.
  await waitFor(() => issuer.cachesSynced(), {
    what: "the issuer's FlavoredToken and NodeNameClaim caches to sync",
    timeoutMs: 60_000,
  });
  return { issuer, ca };
}

/**
 * A short-lived token for ServiceAccount `namespace/name` (a portal's or a user's credential),
 * issued for the issuer's audience as `kubectl create token --audience` does. `audiences: []`
 * gives a plain token for the API server's own audience.
 */
export async function serviceAccountToken(
  env: E2EEnvironment,
  namespace: string,
  name: string,
  audiences: string[] = [DEFAULT_ISSUER_AUDIENCE],
): Promise<string> {
  const request = await env.core.createNamespacedServiceAccountToken({
    name,
    namespace,
    body: { spec: { expirationSeconds: 3600, audiences } },
  });
  return request.status?.token ?? '';
}

export async function bootstrapSecretNames(env: E2EEnvironment): Promise<Set<string>> {
  const list = await env.core.listNamespacedSecret({
    namespace: 'kube-system',
    fieldSelector: 'type=bootstrap.kubernetes.io/token',
  });
  return new Set(list.items.map((s) => s.metadata?.name ?? ''));
}

export async function flavoredTokenNames(env: E2EEnvironment): Promise<Set<string>> {
  const list = (await env.kubeConfig.makeApiClient(CustomObjectsApi).listClusterCustomObject({
    group: 'nodeflavor.io',
    version: 'v1alpha1',
    plural: 'flavoredtokens',
  })) as { items: { metadata: { name: string } }[] };
  return new Set(list.items.map((t) => t.metadata.name));
}

// The RBAC objects an issuer test gives its callers: a ServiceAccount, a ClusterRole and the
// binding of one to the other (applied with applyObjects).

export function serviceAccountObject(name: string, namespace: string) {
  return { apiVersion: 'v1', kind: 'ServiceAccount', metadata: { name, namespace } };
}

export function clusterRoleObject(name: string, rules: Record<string, unknown>[]) {
  return { apiVersion: 'rbac.authorization.k8s.io/v1', kind: 'ClusterRole', metadata: { name }, rules };
}

/** `use` on FlavorClasses (all, or only `resourceNames`): what the issuer asks before it mints. */
export function useFlavorClassesRole(name: string, resourceNames?: string[]) {
  return clusterRoleObject(name, [
    {
      apiGroups: ['nodeflavor.io'],
      resources: ['flavorclasses'],
      verbs: ['use'],
      ...(resourceNames ? { resourceNames } : {}),
    },
  ]);
}

export function clusterRoleBindingObject(
  name: string,
  role: string,
  serviceAccount: string,
  namespace: string,
) {
  return {
    apiVersion: 'rbac.authorization.k8s.io/v1',
    kind: 'ClusterRoleBinding',
    metadata: { name },
    roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: role },
    subjects: [{ kind: 'ServiceAccount', name: serviceAccount, namespace }],
  };
}
