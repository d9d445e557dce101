// A flavored Machine's NodeFlavorVerified condition, decided purely from its token's status as the
// workload cluster's issuer reports it (GET /v1/tokens/{id}, written there by nodeflavor's
// controller alone) and the Node Cluster API linked to the Machine. True only when the token's
// own verified node IS the Machine's Node: Cluster API links a Node by the providerID, which
// many kubelets report themselves; nodeflavor binds the node the API server authenticated with
// this Machine's token, so a Node that took the Machine's providerID is caught here.
import type { TokenNode, TokenPhase } from '../flavor/token-lifecycle.ts';
import { Reason } from './resources.ts';

/** What of the issuer's token status view this needs (the rest is ignored). */
export interface TokenStatus {
  flavor: string;
  phase: TokenPhase;
  reason: string | null;
  message: string | null;
  nodes: Pick<TokenNode, 'nodeName' | 'boundAt' | 'verifiedAt' | 'reason' | 'message'>[];
}

export interface VerificationInput {
  /** The FlavorClass the Machine's annotation asks for now. */
  flavor: string;
  tokenId: string;
  token: TokenStatus;
  /** The Node Cluster API linked (Machine status.nodeRef), if any yet. */
  nodeRefName: string | undefined;
}

export interface MachineVerdict {
  status: 'True' | 'False';
  reason: Reason;
  message: string;
  /** Nothing more will change without an event (no need to ask the issuer again soon). */
  settled: boolean;
}

const verdict = (
  status: 'True' | 'False',
  reason: Reason,
  message: string,
  settled = false,
): MachineVerdict => ({
  status,
  reason,
  message,
  settled,
});

export function verifyMachine(input: VerificationInput): MachineVerdict {
  const { token, tokenId, nodeRefName } = input;
  const bound = token.nodes.filter((n) => n.boundAt !== null);
  const verified = bound.find((n) => n.verifiedAt !== null);
  if (token.flavor !== input.flavor)
    return verdict(
      'False',
      Reason.FlavorChanged,
      `token ${tokenId} was issued for flavor ${token.flavor}, and the Machine now asks for ${input.flavor}: roll the MachineDeployment out to replace it`,
      true,
    );
  if (verified) {
    if (nodeRefName === undefined)
      return verdict(
        'False',
        Reason.WaitingForNodeRef,
        `node ${verified.nodeName} joined with token ${tokenId} and is verified; waiting for Cluster API to link the Machine to its Node`,
      );
    if (nodeRefName !== verified.nodeName)
      return verdict(
        'False',
        Reason.NodeMismatch,
        `Cluster API linked Node ${nodeRefName} (by its providerID), but the node that joined with this Machine's token ${tokenId} is ${verified.nodeName}: the linked Node is not this Machine's`,
      );
    return verdict(
      'True',
      Reason.Verified,
      `node ${verified.nodeName} joined with token ${tokenId} and is verified as ${token.flavor}`,
      true,
    );
  }
  switch (token.phase) {
    case 'Revoked':
      return verdict(
        'False',
        Reason.TokenRevoked,
        `token ${tokenId} was revoked before its node was verified`,
        true,
      );
    case 'Expired':
      return verdict(
        'False',
        Reason.TokenExpired,
        `token ${tokenId} expired before a node joined with it: the Machine did not join in time (a MachineHealthCheck replaces it)`,
        true,
      );
    case 'Issued':
      return verdict(
        'False',
        Reason.WaitingForNode,
        `token ${tokenId} is in place; waiting for the node to join with it`,
      );
    default:
      break;
  }
  const failing = bound.find((n) => n.reason !== null);
  if (failing || token.phase === 'Failed') {
    const why = failing?.reason ?? token.reason ?? 'Failed';
    const detail = failing?.message ?? token.message ?? '';
    return verdict(
      'False',
      Reason.VerificationFailed,
      `node ${failing?.nodeName ?? '?'} with token ${tokenId} is not verified: ${why}${detail ? `: ${detail}` : ''}`,
    );
  }
  const node = bound[0]?.nodeName ?? '?';
  return verdict(
    'False',
    Reason.Verifying,
    `node ${node} joined with token ${tokenId}; nodeflavor is verifying it`,
  );
}
