// The one Node the process runs on, as the start-up placement check reads it (src/cli/startup.ts).
// Read with a list by metadata.name field selector, which RBAC authorises as the `list` on nodes
// the controller's Node cache needs anyway: no `get` grant only for this.
import type { NodePlacementFacts } from '../flavor/placement.ts';
import { kubeCall } from '../runtime/fetch.ts';
import type { KubeConfig } from '../runtime/kubeconfig.ts';

interface NodeItem {
  metadata?: { name?: string; labels?: Record<string, string> };
  spec?: { taints?: { key: string; effect?: string }[] };
}

/** The Node named `name`, or undefined when there is none. */
export async function readNodePlacement(
  kubeConfig: KubeConfig,
  name: string,
): Promise<NodePlacementFacts | undefined> {
  const list = await kubeCall<{ items?: NodeItem[] }>(kubeConfig, 'GET', '/api/v1/nodes', {
    query: { fieldSelector: `metadata.name=${name}` },
    action: `read Node ${name}`,
  });
  const node = (list.items ?? []).find((item) => item.metadata?.name === name);
  if (!node) return undefined;
  return {
    name,
    labels: node.metadata?.labels ?? {},
    taints: (node.spec?.taints ?? []).map((t) => ({ key: t.key, ...(t.effect ? { effect: t.effect } : {}) })),
  };
}
