// A fleet of N realistic, already-flavored nodes for P4 (memory) and P5 (restart): Nodes of about
// 15 KB (status with conditions, addresses, nodeInfo and ~40 container images) carrying a flavor,
// and one FlavoredToken per node whose status binds and verifies it.

import { randomBytes } from 'node:crypto';
import type { KubeConfig } from '@kubernetes/client-node';
import { rfc3339 } from '../src/flavor/rfc3339.ts';
import { kubeJson } from '../src/runtime/fetch.ts';
import { KubeError } from '../src/runtime/kube-error.ts';
import { mapLimit } from './lib.ts';

/**
 * Retries what a loaded API server may drop (a keep-alive connection closed under a request,
 * 429, 5xx); a create retried after its first attempt landed reads the object instead.
 */
async function retried<T>(request: () => Promise<T>, onExists?: () => Promise<T>): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await request();
    } catch (error) {
      if (onExists && error instanceof KubeError && error.status === 409 && attempt > 1) return onExists();
      const transient =
        error instanceof KubeError && (error.status === 0 || error.status === 429 || error.status >= 500);
      if (!transient || attempt >= 8) throw error;
      await new Promise((resolve) => setTimeout(resolve, 250 * attempt));
    }
  }
}

export const FIXTURE_FLAVOR = 'bench-fleet';

function image(i: number): { names: string[]; sizeBytes: number } {
  const digest = randomBytes(32).toString('hex');
  const repo = `registry.example.com/platform/team-${i % 7}/service-${i}`;
  return { names: [`${repo}@sha256:${digest}`, `${repo}:v1.${i}.0`], sizeBytes: 50_000_000 + i * 1_000_003 };
}

export function realisticNode(name: string, tokenId: string, verifiedAt: string): Record<string, unknown> {
  const now = rfc3339(new Date());
  const condition = (type: string, status: string, reason: string) => ({
    type,
    status,
    reason,
    message: `kubelet reports ${type} ${status} (${reason})`,
    lastHeartbeatTime: now,
    lastTransitionTime: now,
  });
  return {
    apiVersion: 'v1',
    kind: 'Node',
    metadata: {
      name,
      labels: {
        'kubernetes.io/hostname': name,
        'kubernetes.io/os': 'linux',
        'kubernetes.io/arch': 'amd64',
        'node.kubernetes.io/instance-type': 'm6i.2xlarge',
        'topology.kubernetes.io/region': 'eu-west-1',
        'topology.kubernetes.io/zone': 'eu-west-1a',
        'nodeflavor.io/flavor': FIXTURE_FLAVOR,
      },
      annotations: {
        'node.alpha.kubernetes.io/ttl': '0',
        'volumes.kubernetes.io/controller-managed-attach-detach': 'true',
        'nodeflavor.io/verified': JSON.stringify({
          tokenID: tokenId,
          flavorClass: FIXTURE_FLAVOR,
          verifiedAt,
        }),
      },
    },
    spec: {
      podCIDR: '10.244.1.0/24',
      podCIDRs: ['10.244.1.0/24'],
      providerID: `aws:///eu-west-1a/i-${randomBytes(8).toString('hex')}`,
    },
    status: {
      capacity: {
        cpu: '8',
        'ephemeral-storage': '101430960Ki',
        'hugepages-1Gi': '0',
        'hugepages-2Mi': '0',
        memory: '32475804Ki',
        pods: '110',
      },
      allocatable: {
        cpu: '8',
        'ephemeral-storage': '93478772582',
        'hugepages-1Gi': '0',
        'hugepages-2Mi': '0',
        memory: '32373404Ki',
        pods: '110',
      },
      conditions: [
        condition('MemoryPressure', 'False', 'KubeletHasSufficientMemory'),
        condition('DiskPressure', 'False', 'KubeletHasNoDiskPressure'),
        condition('PIDPressure', 'False', 'KubeletHasSufficientPID'),
        condition('Ready', 'True', 'KubeletReady'),
      ],
      addresses: [
        { type: 'InternalIP', address: '10.0.1.23' },
        { type: 'Hostname', address: name },
        { type: 'InternalDNS', address: `${name}.eu-west-1.compute.internal` },
      ],
      daemonEndpoints: { kubeletEndpoint: { Port: 10250 } },
      nodeInfo: {
        machineID: randomBytes(16).toString('hex'),
        systemUUID: randomBytes(16).toString('hex'),
        bootID: randomBytes(16).toString('hex'),
        kernelVersion: '6.1.0-27-cloud-amd64',
        osImage: 'Debian GNU/Linux 12 (bookworm)',
        containerRuntimeVersion: 'containerd://2.1.4',
        kubeletVersion: 'v1.37.2',
        kubeProxyVersion: '',
        operatingSystem: 'linux',
        architecture: 'amd64',
      },
      images: Array.from({ length: 40 }, (_, i) => image(i)),
    },
  };
}

/**
 * Creates nodes `from` .. `count - 1` of the fleet (and their tokens); a level sweep grows the
 * fleet by passing the previous count as `from`. Returns the names of all `count` nodes.
 */
export async function createFleet(
  kubeConfig: KubeConfig,
  count: number,
  onProgress: (done: number) => void,
  from = 0,
): Promise<string[]> {
  await kubeJson(kubeConfig, 'PATCH', `/apis/nodeflavor.io/v1alpha1/flavorclasses/${FIXTURE_FLAVOR}`, {
    contentType: 'application/apply-patch+yaml',
    query: { fieldManager: 'bench', force: true },
    body: {
      apiVersion: 'nodeflavor.io/v1alpha1',
      kind: 'FlavorClass',
      metadata: { name: FIXTURE_FLAVOR },
      spec: { labels: { 'nodeflavor.io/flavor': FIXTURE_FLAVOR } },
    },
  });
  const names = Array.from({ length: count }, (_, i) => `fleet-${String(i).padStart(5, '0')}`);
  let done = from;
  await mapLimit(names.slice(from), 32, async (name, index) => {
    const i = from + index;
    const tokenId = `f${i.toString(36).padStart(5, '0')}`.slice(-6);
    const verifiedAt = rfc3339(new Date());
    const body = realisticNode(name, tokenId, verifiedAt);
    const node = await retried(
      () => kubeJson<{ metadata: { uid: string } }>(kubeConfig, 'POST', '/api/v1/nodes', { body }),
      () => kubeJson<{ metadata: { uid: string } }>(kubeConfig, 'GET', `/api/v1/nodes/${name}`),
    );
    // Node status is not taken from a create: write it as a kubelet would.
    await retried(() =>
      kubeJson(kubeConfig, 'PATCH', `/api/v1/nodes/${name}/status`, {
        contentType: 'application/merge-patch+json',
        body: { status: body.status },
      }),
    );
    const tokenName = `ft-${tokenId}`;
    const tokenBody = {
      apiVersion: 'nodeflavor.io/v1alpha1',
      kind: 'FlavoredToken',
      metadata: { name: tokenName, labels: { 'nodeflavor.io/token-id': tokenId } },
      spec: { flavorClassName: FIXTURE_FLAVOR, ttl: '24h', maxUses: 1 },
    };
    const tokensPath = '/apis/nodeflavor.io/v1alpha1/flavoredtokens';
    const token = await retried(
      () => kubeJson<Record<string, unknown>>(kubeConfig, 'POST', tokensPath, { body: tokenBody }),
      () => kubeJson<Record<string, unknown>>(kubeConfig, 'GET', `${tokensPath}/${tokenName}`),
    );
    await retried(() =>
      kubeJson(kubeConfig, 'PUT', `/apis/nodeflavor.io/v1alpha1/flavoredtokens/${tokenName}/status`, {
        body: {
          ...token,
          status: {
            tokenID: tokenId,
            uses: 1,
            bindings: [
              {
                nodeName: name,
                csrName: `csr-${tokenId}`,
                boundAt: verifiedAt,
                nodeUID: node.metadata.uid,
                verifiedAt,
              },
            ],
          },
        },
      }),
    );
    done += 1;
    if (done % 500 === 0) onProgress(done);
  });
  return names;
}
