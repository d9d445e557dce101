// The first version of a Node that a watcher (kube-scheduler) is sent: what must already be
// quarantined (ADR 0012). A watch does not answer until its first event, so instead of opening one
// before the Node exists, note the collection's resourceVersion then, and watch from it later:
// the Node's ADDED event is replayed whenever the watch starts.
import type { V1Node } from '@kubernetes/client-node';
import { kubeFetch, kubeJson, responseLines } from '../../../src/runtime/fetch.ts';
import type { E2EEnvironment } from './environment.ts';

/** Call before Node `name` exists; await the function it returns for the Node's first version. */
export async function firstVersionOf(env: E2EEnvironment, name: string): Promise<() => Promise<V1Node>> {
  const fieldSelector = `metadata.name=${name}`;
  const list = await kubeJson<{ metadata: { resourceVersion: string } }>(
    env.kubeConfig,
    'GET',
    '/api/v1/nodes',
    {
      query: { fieldSelector },
    },
  );
  return async () => {
    const stop = new AbortController();
    try {
      const response = await kubeFetch(env.kubeConfig, '/api/v1/nodes', {
        query: { watch: 'true', fieldSelector, resourceVersion: list.metadata.resourceVersion },
        signal: stop.signal,
        timeoutMs: 0,
      });
      for await (const line of responseLines(response)) {
        const event = JSON.parse(line) as { type: string; object: V1Node };
        if (event.type === 'ADDED') return event.object;
      }
      throw new Error(`the watch of Node ${name} ended without it`);
    } finally {
      stop.abort();
    }
  };
}
