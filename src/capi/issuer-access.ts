// How `nodeflavor capi` reaches a workload cluster's issuer: a Secret in the controller's own
// namespace, named `<cluster namespace>.<cluster name>` (namespaces hold no dots, so the name is
// unambiguous), written by whoever administers nodeflavor for that cluster:
//   url     https://… where the workload cluster's issuer API answers (its Ingress or LoadBalancer)
//   ca.crt  the CA of the issuer's serving certificate (the workload's ConfigMap nodeflavor-issuer-ca)
//   token   a bearer the issuer accepts: a token of a workload ServiceAccount for the issuer's
//           audience, allowed `use` of exactly the flavors this cluster's Machines may get, or a JWT
// Kept apart from Cluster API's namespaces on purpose: the controller reads no Secret but these
// (never a `<cluster>-kubeconfig`), and a team that may edit MachineDeployments cannot point its
// Machines' tokens anywhere else, nor widen the flavors that bearer may use. Pure.
import { Secret } from '../flavor/secret.ts';
import type { IssuerAccess } from './issuer-client.ts';

export const ACCESS_KEYS = { url: 'url', ca: 'ca.crt', token: 'token' } as const;

/** The access Secret as cached: its name and the three keys (base64, as the API serves them). */
export interface CachedAccessSecret {
  metadata: { name: string; namespace?: string; resourceVersion?: string };
  data?: Record<string, string>;
}

export function accessSecretName(clusterNamespace: string, clusterName: string): string {
  return `${clusterNamespace}.${clusterName}`;
}

/** The Cluster (namespace/name) an access Secret is for, or undefined for any other Secret. */
export function clusterOfAccessSecret(name: string): string | undefined {
  const dot = name.indexOf('.');
  return dot > 0 && dot < name.length - 1 ? `${name.slice(0, dot)}/${name.slice(dot + 1)}` : undefined;
}

/** Keeps only what the controller reads of a Secret (the three keys): the cache holds nothing else. */
export function trimAccessSecret(raw: unknown): CachedAccessSecret {
  const secret = raw as CachedAccessSecret;
  const data: Record<string, string> = {};
  for (const key of Object.values(ACCESS_KEYS)) {
    const value = secret.data?.[key];
    if (value !== undefined) data[key] = value;
  }
  return {
    metadata: {
      name: secret.metadata.name,
      ...(secret.metadata.namespace ? { namespace: secret.metadata.namespace } : {}),
      ...(secret.metadata.resourceVersion ? { resourceVersion: secret.metadata.resourceVersion } : {}),
    },
    data,
  };
}

export type ParsedAccess = { ok: true; access: IssuerAccess } | { ok: false; message: string };

/** The access a Secret grants, or what is wrong with it (in words that say how to fix it). */
export function parseIssuerAccess(
  secret: CachedAccessSecret | undefined,
  where: { namespace: string; name: string },
): ParsedAccess {
  const ref = `Secret ${where.namespace}/${where.name}`;
  const howTo = `create ${ref} with keys url, ca.crt and token (docs/cluster-api.md#issuer-access)`;
  if (!secret) return { ok: false, message: `no ${ref} says how to reach this cluster's issuer: ${howTo}` };
  const text = (key: string) =>
    secret.data?.[key] === undefined
      ? undefined
      : Buffer.from(secret.data[key], 'base64').toString('utf8').trim();
  const url = text(ACCESS_KEYS.url);
  const token = text(ACCESS_KEYS.token);
  const caPem = text(ACCESS_KEYS.ca);
  if (!url) return { ok: false, message: `${ref} has no url: ${howTo}` };
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    return { ok: false, message: `${ref}: url is not a URL (https://host:port expected)` };
  }
  if (parsed.protocol !== 'https:' || parsed.username !== '' || parsed.password !== '')
    return { ok: false, message: `${ref}: url must be https://host[:port][/path] without credentials` };
  if (!token) return { ok: false, message: `${ref} has no token (a bearer the issuer accepts): ${howTo}` };
  if (caPem !== undefined && caPem !== '' && !caPem.includes('-----BEGIN CERTIFICATE-----'))
    return { ok: false, message: `${ref}: ca.crt is not PEM (-----BEGIN CERTIFICATE-----)` };
  return {
    ok: true,
    access: {
      url: `${parsed.origin}${parsed.pathname}`.replace(/\/+$/, ''),
      caPem: caPem || undefined,
      token: new Secret(token),
    },
  };
}
