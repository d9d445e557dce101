// The reads and writes of NodeNameClaims (ADR 0011), and the fresh reads an approval rests on.
// Reads here go to the API server (a quorum read), never to a cache: they are what a trust
// decision is re-checked against.
import {
  GROUP,
  NODE_NAME_CLAIM_PLURAL,
  type NodeNameClaim,
  NodeNameClaimSchema,
  VERSION,
} from '../flavor/resources.ts';
import { kubeJson } from '../runtime/fetch.ts';
import { orUndefinedIfNotFound } from '../runtime/kube-error.ts';
import type { KubeConfig } from '../runtime/kubeconfig.ts';
import { type TrimmedNode, trimNode } from './node-writes.ts';

export const CLAIMS_PATH = `/apis/${GROUP}/${VERSION}/${NODE_NAME_CLAIM_PLURAL}`;

export function claimPath(nodeName: string): string {
  return `${CLAIMS_PATH}/${encodeURIComponent(nodeName)}`;
}

/** Creates the claim; a KubeError 409 when the name is claimed already (the atomic step). */
export async function createClaim(kubeConfig: KubeConfig, claim: NodeNameClaim): Promise<NodeNameClaim> {
  const written = await kubeJson(kubeConfig, 'POST', CLAIMS_PATH, {
    action: `claim node name ${claim.metadata.name}`,
    body: claim,
  });
  return NodeNameClaimSchema.parse(written);
}

/** The claim on `nodeName` as the API server has it now; undefined when there is none. */
export async function readClaim(
  kubeConfig: KubeConfig,
  nodeName: string,
  options: { timeoutMs?: number } = {},
): Promise<NodeNameClaim | undefined> {
  const raw = await orUndefinedIfNotFound(
    kubeJson(kubeConfig, 'GET', claimPath(nodeName), {
      action: `read the claim on node name ${nodeName}`,
      ...options,
    }),
  );
  return raw === undefined ? undefined : NodeNameClaimSchema.parse(raw);
}

/** Replaces the claim at its resourceVersion (a KubeError 409 when it changed since it was read). */
export async function replaceClaim(kubeConfig: KubeConfig, claim: NodeNameClaim): Promise<NodeNameClaim> {
  const written = await kubeJson(kubeConfig, 'PUT', claimPath(claim.metadata.name ?? ''), {
    action: `update the claim on node name ${claim.metadata.name}`,
    body: claim,
  });
  return NodeNameClaimSchema.parse(written);
}

/** Deletes exactly this version of the claim (a KubeError 409 when it changed; gone already is fine). */
export async function deleteClaimVersion(kubeConfig: KubeConfig, claim: NodeNameClaim): Promise<void> {
  await orUndefinedIfNotFound(
    kubeJson(kubeConfig, 'DELETE', claimPath(claim.metadata.name ?? ''), {
      action: `collect the released claim on node name ${claim.metadata.name}`,
      body: {
        apiVersion: 'v1',
        kind: 'DeleteOptions',
        preconditions: { uid: claim.metadata.uid, resourceVersion: claim.metadata.resourceVersion },
      },
    }),
  );
}

/** The Node as the API server has it now (trimmed); undefined when there is none. */
export async function readNode(kubeConfig: KubeConfig, name: string): Promise<TrimmedNode | undefined> {
  const raw = await orUndefinedIfNotFound(
    kubeJson(kubeConfig, 'GET', `/api/v1/nodes/${encodeURIComponent(name)}`, { action: `read Node ${name}` }),
  );
  return raw === undefined ? undefined : trimNode(raw);
}
