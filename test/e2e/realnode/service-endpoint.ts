// Reaching a Service from this host the way kube-proxy would route a ClusterIP connection (there is
// no kube-proxy here): the Service's port, its EndpointSlices, one ready endpoint, and TLS checked
// against the name a client in the cluster would use (<service>.<namespace>.svc).
import { request } from 'node:https';
import type { E2EEnvironment } from '../support/environment.ts';

export interface ServiceAddress {
  ip: string;
  port: number;
  /** The DNS name a client in the cluster dials; the serving certificate must name it. */
  serverName: string;
}

interface EndpointSlice {
  ports?: { name?: string; port?: number }[];
  endpoints?: { addresses: string[]; conditions?: { ready?: boolean } }[];
}

/** A ready endpoint of `service`'s port `portName`, as kube-proxy would pick one. */
export async function serviceAddress(
  env: E2EEnvironment,
  namespace: string,
  service: string,
  portName: string,
): Promise<ServiceAddress> {
  const svc = await env.core.readNamespacedService({ name: service, namespace });
  const servicePort = svc.spec?.ports?.find((p) => p.name === portName);
  if (!servicePort) throw new Error(`service ${namespace}/${service} has no port named ${portName}`);
  const response = await fetchJson<{ items: EndpointSlice[] }>(
    env,
    `/apis/discovery.k8s.io/v1/namespaces/${namespace}/endpointslices?labelSelector=kubernetes.io%2Fservice-name%3D${service}`,
  );
  for (const slice of response.items) {
    const port = slice.ports?.find((p) => (p.name ?? '') === (servicePort.name ?? ''))?.port;
    const ready = slice.endpoints?.find((e) => e.conditions?.ready !== false && e.addresses[0]);
    if (port && ready?.addresses[0]) {
      return { ip: ready.addresses[0], port, serverName: `${service}.${namespace}.svc` };
    }
  }
  throw new Error(`service ${namespace}/${service} has no ready endpoint for port ${portName}`);
}

async function fetchJson<T>(env: E2EEnvironment, path: string): Promise<T> {
  const { kubeJson } = await import('../../../src/runtime/fetch.ts');
  return kubeJson<T>(env.kubeConfig, 'GET', path);
}

export interface HttpsAnswer {
  status: number;
  text: string;
}

/** One HTTPS request to a Service address, verifying its certificate for serverName against `caPem`. */
export function serviceRequest(
  address: ServiceAddress,
  caPem: string,
  method: string,
  path: string,
  options: { bearer?: string; body?: unknown } = {},
): Promise<HttpsAnswer> {
  const body = options.body === undefined ? undefined : JSON.stringify(options.body);
  return new Promise((resolve, reject) => {
    const req = request(
      {
        host: address.ip,
        port: address.port,
        servername: address.serverName,
        method,
        path,
        ca: caPem,
        timeout: 10_000,
        headers: {
          ...(options.bearer ? { authorization: `Bearer ${options.bearer}` } : {}),
          ...(body ? { 'content-type': 'application/json' } : {}),
        },
      },
      (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (chunk) => {
          text += chunk;
        });
        res.on('end', () => resolve({ status: res.statusCode ?? 0, text }));
      },
    );
    req.on('timeout', () => req.destroy(new Error(`${method} ${path}: timed out`)));
    req.on('error', reject);
    req.end(body);
  });
}
