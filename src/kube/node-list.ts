// The Nodes as the facts `kubectl flavor nodes` shows (the same shape the controller judges).
import type { NodeFacts } from '../flavor/verdict.ts';
import { nodeFactsOf } from './explain-facts.ts';
import { kubeCall } from './fetch.ts';
import type { KubeConfig } from './kubeconfig.ts';

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
