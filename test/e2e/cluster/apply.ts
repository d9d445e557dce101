// Server-side apply of plain manifest objects (the harness's own, rendered Helm charts, CRDs).
import {
  KubeConfig,
  type KubernetesObject,
  KubernetesObjectApi,
  PatchStrategy,
} from '@kubernetes/client-node';

export async function applyObjects(
  kubeconfigPath: string,
  objects: object[],
  fieldManager = 'nodeflavor-e2e',
): Promise<void> {
  const kc = new KubeConfig();
  kc.loadFromFile(kubeconfigPath);
  const client = KubernetesObjectApi.makeApiClient(kc);
  for (const object of objects) {
    await client.patch(
      object as KubernetesObject,
      undefined,
      undefined,
      fieldManager,
      true,
      PatchStrategy.ServerSideApply,
    );
  }
}
