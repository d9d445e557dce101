// API requests by verb, HTTP status and resource, like client-go's rest_client_requests_total: the first
// place to look when the operator is slow (how many writes does a join cost?) or throttled (429).
import { Counter, type Registry } from 'prom-client';
import type { KubeRequestObserver } from './fetch.ts';

export function kubeRequestCounter(registry: Registry): KubeRequestObserver {
  const requests = new Counter({
    name: 'nodeflavor_kube_api_requests_total',
    help: 'Requests to the Kubernetes API by verb, HTTP status code ("0" when no answer came) and resource (with its subresource).',
    labelNames: ['method', 'code', 'resource'],
    registers: [registry],
  });
  return (method, status, resource) => requests.inc({ method, code: String(status), resource });
}
