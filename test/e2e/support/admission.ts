// Identities and plumbing for the admission e2e tests: ServiceAccounts with TokenRequest tokens
// (the operator, an admin-group member, an ordinary user), the RBAC the operator's admission part
// needs (the Helm chart grants the same), raw HTTPS clients, and a look at the served certificate.
import { connect } from 'node:tls';
import { KubernetesObjectApi } from '@kubernetes/client-node';
import { applyObjects } from '../cluster/apply.ts';
import { KubeHttp } from '../kubelet-sim/http.ts';
import type { E2EEnvironment } from './environment.ts';

export { freePort } from '../cluster/ports.ts';

const REGISTRATION_RESOURCES = [
  'validatingwebhookconfigurations',
  'validatingadmissionpolicies',
  'validatingadmissionpolicybindings',
  'mutatingwebhookconfigurations',
  'mutatingadmissionpolicies',
  'mutatingadmissionpolicybindings',
];

/**
 * The cluster-wide rules the operator's admission part needs, scoped by name as the Helm chart
 * scopes them (create cannot be; list and watch use a metadata.name field selector, which RBAC
 * authorises against resourceNames), plus nodes and FlavorClasses for the controller's side.
 */
export function operatorClusterRules(registrationNames: string[], ownerRoles: string[] = []): object[] {
  return [
    // The registration's owner (--registration-owner), read for its uid, like the chart's own ClusterRole.
    ...(ownerRoles.length > 0
      ? [
          {
            apiGroups: ['rbac.authorization.k8s.io'],
            resources: ['clusterroles'],
            resourceNames: ownerRoles,
            verbs: ['get'],
          },
        ]
      : []),
    { apiGroups: ['admissionregistration.k8s.io'], resources: REGISTRATION_RESOURCES, verbs: ['create'] },
    {
      apiGroups: ['admissionregistration.k8s.io'],
      resources: REGISTRATION_RESOURCES,
      // Each name, and the FlavorClass-keys (ADR 0012) and FlavoredToken (issue 32) policies beside it.
      resourceNames: registrationNames.flatMap((name) => [
        name,
        `${name}-class-keys`,
        `${name}-flavored-tokens`,
      ]),
      verbs: ['get', 'list', 'watch', 'update', 'patch', 'delete'],
    },
    { apiGroups: ['nodeflavor.io'], resources: ['flavorclasses'], verbs: ['get', 'list', 'watch'] },
    // The mutating webhook reads the claim on a registering Node's name; the policy binding that
    // takes every claim as a parameter may only be written by someone who can list them.
    { apiGroups: ['nodeflavor.io'], resources: ['nodenameclaims'], verbs: ['get', 'list', 'watch'] },
    { apiGroups: [''], resources: ['nodes'], verbs: ['get', 'list', 'watch', 'patch'] },
  ];
}

/** The namespaced rules: the webhook's TLS Secret, scoped by name like the chart's. */
export function operatorNamespaceRules(secretNames: string[]): object[] {
  return [
    { apiGroups: [''], resources: ['secrets'], verbs: ['create'] },
    {
      apiGroups: [''],
      resources: ['secrets'],
      resourceNames: secretNames,
      verbs: ['get', 'list', 'watch', 'update', 'patch'],
    },
  ];
}

/** What an "ordinary" node editor may do: everything to Nodes that RBAC can grant. */
export const NODE_EDITOR_RULES = [
  { apiGroups: [''], resources: ['nodes', 'nodes/status'], verbs: ['get', 'list', 'patch', 'update'] },
];

export interface Identity {
  namespace: string;
  name: string;
  username: string;
  token: string;
  http: KubeHttp;
}

/** A ServiceAccount bound to a ClusterRole (and optionally a Role), with a fresh bound token. */
export async function serviceAccountIdentity(
  env: E2EEnvironment,
  options: {
    namespace: string;
    name: string;
    clusterRules: object[];
    namespaceRules?: object[];
  },
  created: object[],
): Promise<Identity> {
  const { namespace, name } = options;
  const subject = [{ kind: 'ServiceAccount', name, namespace }];
  const roleName = `${namespace}-${name}`;
  const objects: object[] = [
    { apiVersion: 'v1', kind: 'Namespace', metadata: { name: namespace } },
    { apiVersion: 'v1', kind: 'ServiceAccount', metadata: { name, namespace } },
    {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'ClusterRole',
      metadata: { name: roleName },
      rules: options.clusterRules,
    },
    {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'ClusterRoleBinding',
      metadata: { name: roleName },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: roleName },
      subjects: subject,
    },
  ];
  if (options.namespaceRules !== undefined) {
    objects.push(
      {
        apiVersion: 'rbac.authorization.k8s.io/v1',
        kind: 'Role',
        metadata: { name, namespace },
        rules: options.namespaceRules,
      },
      {
        apiVersion: 'rbac.authorization.k8s.io/v1',
        kind: 'RoleBinding',
        metadata: { name, namespace },
        roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name },
        subjects: subject,
      },
    );
  }
  await applyObjects(env.kubeconfigPath, objects);
  created.push(...objects);
  const request = await env.core.createNamespacedServiceAccountToken({
    name,
    namespace,
    body: { spec: { expirationSeconds: 3600, audiences: [] } },
  });
  const token = request.status?.token ?? '';
  return {
    namespace,
    name,
    username: `system:serviceaccount:${namespace}:${name}`,
    token,
    http: new KubeHttp(env.server, { ca: env.caPem, bearerToken: token }),
  };
}

/** Deletes what serviceAccountIdentity created (cluster-scoped objects outlive the test otherwise). */
export async function deleteObjects(env: E2EEnvironment, objects: object[]): Promise<void> {
  const client = KubernetesObjectApi.makeApiClient(env.kubeConfig);
  for (const object of [...objects].reverse()) {
    await client.delete(object as never).catch(() => undefined);
  }
}

/** A TCP port nothing listens on right now (the webhook URL must name it before the server starts). */

/** Connects the way the API server does (verifying against `caPem`), returns the served certificate's serial. */
export function servedSerial(port: number, caPem: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = connect({ host: '127.0.0.1', port, ca: caPem, rejectUnauthorized: true }, () => {
      const serial = socket.getPeerX509Certificate()?.serialNumber ?? '';
      socket.end();
      resolve(serial);
    });
    socket.setTimeout(5_000, () => socket.destroy(new Error('TLS handshake timed out')));
    socket.once('error', reject);
  });
}

/** The Status message of a refused request, or its text. */
export function messageOf(result: { body: unknown; text: string }): string {
  const body = result.body as { message?: unknown } | undefined;
  return typeof body?.message === 'string' ? body.message : result.text;
}
