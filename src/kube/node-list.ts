// The Nodes with just what `kubectl flavor nodes` shows: name, labels, annotations.
import { CoreV1Api, type KubeConfig } from '@kubernetes/client-node';
import { toKubeError } from './kube-error.ts';

export interface NodeSummary {
  name: string;
  labels: Record<string, string>;
  annotations: Record<string, string>;
}

export async function listNodeSummaries(kubeConfig: KubeConfig): Promise<NodeSummary[]> {
  const core = kubeConfig.makeApiClient(CoreV1Api);
  try {
    const list = await core.listNode();
    return list.items.map((node) => ({
      name: node.metadata?.name ?? '',
      labels: node.metadata?.labels ?? {},
      annotations: node.metadata?.annotations ?? {},
    }));
  } catch (error) {
    throw toKubeError(error, 'list Nodes');
  }
}
