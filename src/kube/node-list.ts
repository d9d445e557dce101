// The Nodes as the facts `kubectl flavor nodes` shows (the same shape the controller judges).
import type { NodeFacts } from '../flavor/verdict.ts';
import { kubeCall } from '../runtime/fetch.ts';
import type { KubeConfig } from '../runtime/kubeconfig.ts';
import { nodeFactsOf } from './explain-facts.ts';

export async function listNodeFacts(kubeConfig: KubeConfig): Promise<NodeFacts[]> {
  const list = await kubeCall<{ items?: Parameters<typeof nodeFactsOf>[0][] }>(
    kubeConfig,
    'GET',
    '/api/v1/nodes',
    {
      action: 'list Nodes',
    },
  );
  return (list.items ?? []).map(nodeFactsOf);
}
