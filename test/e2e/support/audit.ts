// The kube-apiserver audit log of the e2e control plane, read to prove the Helm chart grants
// exactly what the operator uses: every rule the rendered chart binds to its ServiceAccount is
// expanded to (namespace, apiGroup, resource, verb[, name]) grants, and each must show up as a
// request the operator made. Only users in AUDITED_GROUPS are logged (at Metadata level: no bodies).
import { closeSync, existsSync, openSync, readSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { AUDIT_LOG } from '../cluster/controlplane.ts';
import type { KubeObject } from './chart.ts';

/** The namespace of the chart release whose RBAC the audit test checks (its ServiceAccounts are logged). */
export const AUDITED_NAMESPACE = 'nodeflavor-rbac';
export const AUDITED_GROUPS = [`system:serviceaccounts:${AUDITED_NAMESPACE}`];

/**
 * The local control plane's audit log (the global setup starts it with auditing on; the API server
 * creates the file on its first audited request), or undefined against another cluster (E2E_KUBECONFIG).
 */
export function auditLogPath(): string | undefined {
  const dir = process.env.E2E_LOCAL_CONTROL_PLANE_DIR;
  return dir ? join(dir, AUDIT_LOG) : undefined;
}

export interface Grant {
  /** Undefined: a ClusterRole's grant, good in every namespace and for cluster-scoped objects. */
  namespace?: string;
  apiGroup: string;
  /** With its subresource: `certificatesigningrequests/approval`. */
  resource: string;
  verb: string;
  /** Set when the rule has resourceNames. */
  name?: string;
}

/** One request as the audit log records it. */
export interface Use {
  username: string;
  namespace?: string;
  apiGroup: string;
  resource: string;
  verb: string;
  name?: string;
  code: number;
  uri: string;
}

interface Rule {
  apiGroups?: string[];
  resources?: string[];
  verbs?: string[];
  resourceNames?: string[];
}
type RbacObject = KubeObject & {
  rules?: Rule[];
  roleRef?: { kind: string; name: string };
  subjects?: { kind: string; name: string; namespace?: string }[];
};

/** Every grant the rendered chart binds to ServiceAccount `namespace/serviceAccount`. */
export function chartGrants(objects: KubeObject[], namespace: string, serviceAccount: string): Grant[] {
  const rbac = objects as RbacObject[];
  const boundTo = (binding: RbacObject) =>
    binding.subjects?.some(
      (s) => s.kind === 'ServiceAccount' && s.name === serviceAccount && s.namespace === namespace,
    ) === true;
  const grants: Grant[] = [];
  for (const binding of rbac.filter((o) => o.kind === 'ClusterRoleBinding' || o.kind === 'RoleBinding')) {
    if (!boundTo(binding) || binding.roleRef === undefined) continue;
    const roleNamespace = binding.kind === 'RoleBinding' ? binding.metadata.namespace : undefined;
    const role = rbac.find(
      (o) =>
        o.kind === binding.roleRef?.kind &&
        o.metadata.name === binding.roleRef.name &&
        (o.kind === 'ClusterRole' || o.metadata.namespace === roleNamespace),
    );
    if (role === undefined)
      throw new Error(`${binding.kind} ${binding.metadata.name}: its role is not rendered`);
    for (const rule of role.rules ?? []) {
      for (const apiGroup of rule.apiGroups ?? [])
        for (const resource of rule.resources ?? [])
          for (const verb of rule.verbs ?? [])
            for (const name of rule.resourceNames ?? [undefined])
              grants.push({
                ...(roleNamespace === undefined ? {} : { namespace: roleNamespace }),
                apiGroup,
                resource,
                verb,
                ...(name === undefined ? {} : { name }),
              });
    }
  }
  return grants;
}

interface AuditEvent {
  stage: string;
  verb: string;
  requestURI: string;
  user: { username: string };
  objectRef?: {
    resource?: string;
    subresource?: string;
    namespace?: string;
    name?: string;
    apiGroup?: string;
  };
  responseStatus?: { code?: number };
}

/** Reads the audit log from byte `from` on: the requests made since, and where the next read starts. */
export function readUses(path: string, from: number): { uses: Use[]; next: number } {
  if (!existsSync(path)) return { uses: [], next: from };
  const size = statSync(path).size;
  const buffer = Buffer.alloc(size - from);
  const fd = openSync(path, 'r');
  try {
    readSync(fd, buffer, 0, buffer.length, from);
  } finally {
    closeSync(fd);
  }
  const text = buffer.toString('utf8');
  // Only whole lines: the API server may be writing the last one.
  const end = text.lastIndexOf('\n') + 1;
  const uses: Use[] = [];
  for (const line of text.slice(0, end).split('\n')) {
    if (line.trim() === '') continue;
    const event = JSON.parse(line) as AuditEvent;
    const ref = event.objectRef;
    if (ref?.resource === undefined) continue; // a non-resource URL (/version, /healthz)
    uses.push({
      username: event.user.username,
      ...(ref.namespace ? { namespace: ref.namespace } : {}),
      apiGroup: ref.apiGroup ?? '',
      resource: ref.subresource ? `${ref.resource}/${ref.subresource}` : ref.resource,
      verb: event.verb,
      ...(ref.name ? { name: ref.name } : {}),
      code: event.responseStatus?.code ?? 0,
      uri: event.requestURI,
    });
  }
  return { uses, next: from + Buffer.byteLength(text.slice(0, end)) };
}

/**
 * Grants the API server checks inside another request, which the audit log therefore never shows
 * as a request of their own: each is used when that other request succeeds.
 */
export const IMPLIED_BY: { grant: Omit<Grant, 'namespace'>; by: (use: Use) => boolean; why: string }[] = [
  {
    grant: {
      apiGroup: 'certificates.k8s.io',
      resource: 'signers',
      verb: 'approve',
      name: 'kubernetes.io/kube-apiserver-client-kubelet',
    },
    by: (use) =>
      use.apiGroup === 'certificates.k8s.io' &&
      use.resource === 'certificatesigningrequests/approval' &&
      use.verb === 'update' &&
      use.code < 300,
    why: 'approving a CSR: the API server checks `approve` on its signer while admitting the approval update',
  },
];

const same = (a: string | undefined, b: string | undefined) => a === b;

/** Whether `use` is a request that needed `grant`. */
export function usesGrant(use: Use, grant: Grant): boolean {
  if (use.code === 403 || use.code === 401) return false;
  if (use.apiGroup !== grant.apiGroup || use.resource !== grant.resource) return false;
  if (grant.namespace !== undefined && use.namespace !== grant.namespace) return false;
  if (grant.name !== undefined && use.name !== grant.name) return false;
  if (use.verb === grant.verb) return true;
  // A server-side apply (patch) of an object that does not exist yet creates it (201), and the
  // API server authorises `create` for it: the audit log records the request as a patch.
  return grant.verb === 'create' && use.verb === 'patch' && use.code === 201;
}

export function isUsed(grant: Grant, uses: Use[]): boolean {
  const implied = IMPLIED_BY.find(
    (i) =>
      i.grant.apiGroup === grant.apiGroup &&
      i.grant.resource === grant.resource &&
      i.grant.verb === grant.verb &&
      same(i.grant.name, grant.name),
  );
  if (implied) return uses.some(implied.by);
  return uses.some((use) => usesGrant(use, grant));
}

export function describeGrant(g: Grant): string {
  const group = g.apiGroup === '' ? 'core' : g.apiGroup;
  return `${g.namespace ?? '(cluster)'} ${group} ${g.resource}${g.name ? `/${g.name}` : ''}: ${g.verb}`;
}
