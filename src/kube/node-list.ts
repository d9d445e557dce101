// The Nodes as the facts `kubectl flavor nodes` shows (the same shape the controller judges).
import { CoreV1Api, type KubeConfig } from '@kubernetes/client-node';
import type { NodeFacts } from '../flavor/verdict.ts';
import { toKubeError } from './kube-error.ts';

export async function listNodeFacts(kubeConfig: KubeConfig): Promise<NodeFacts[]> {
  const core = kubeConfig.makeApiClient(CoreV1Api);
  try {
    const list = await core.listNode();
    return list.items.map((node) => ({
      name: node.metadata?.name ?? '',
      uid: node.metadata?.uid ?? '',
      createdAt: new Date(node.metadata?.creationTimestamp ?? 0),
      labels: node.metadata?.labels ?? {},
      annotations: node.metadata?.annotations ?? {},
      taints: (node.spec?.taints ?? []).map((t) => ({
        key: t.key,
        effect: t.effect,
        ...(t.value !== undefined ? { value: t.value } : {}),
      })),
    }));
  } catch (error) {
    throw toKubeError(error, 'list Nodes');
  }
}
