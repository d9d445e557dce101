// A node name is claimed exactly once (ADR 0011), pure: the NodeNameClaim object a binding
// creates, whether an existing claim is this token's, a released one, or another token's, whether
// another token's binding still holds the name (judged from fresh reads), and the checks an
// approval must pass against fresh state. The controller does the reads and writes
// (controller/claims.ts, controller/csrs.ts); nothing here is kept in memory between decisions.
import {
  API_VERSION,
  type ClaimHolder,
  NODE_NAME_CLAIM_KIND,
  type NodeNameClaim,
  type TokenBinding,
} from './resources.ts';

/** The claim a binding creates: its name is the node name. */
export function newClaim(nodeName: string, holder: ClaimHolder): NodeNameClaim {
  return {
    apiVersion: API_VERSION,
    kind: NODE_NAME_CLAIM_KIND,
    metadata: { name: nodeName },
    spec: { holder },
  };
}

/** The claim with its holder gone: the name is free, the record that it was claimed stays. */
export function releasedClaim(claim: NodeNameClaim, at: string): NodeNameClaim {
  return { ...claim, spec: { releasedAt: at } };
}

/** The claim taken over by `holder` (it was released, or its holder's binding is dead). */
export function takenOverClaim(claim: NodeNameClaim, holder: ClaimHolder): NodeNameClaim {
  return { ...claim, spec: { holder } };
}

/** What an existing claim means to the token that wants the name. */
export type ClaimStanding =
  /** This token holds it already (an earlier attempt, or a retry of the same join). */
  | { kind: 'ours' }
  /** Released: anyone may take it over (at its resourceVersion). */
  | { kind: 'free' }
  /** Another token holds it: whether it may be taken depends on that token's binding. */
  | { kind: 'other'; holder: ClaimHolder };

export function claimStanding(claim: NodeNameClaim, tokenUID: string): ClaimStanding {
  const holder = claim.spec.holder;
  if (!holder) return { kind: 'free' };
  if (holder.tokenUID === tokenUID) return { kind: 'ours' };
  return { kind: 'other', holder };
}

/** The holder's token and the Node of the name, read from the API server just now. */
export interface HolderFacts {
  token?: {
    uid: string;
    revoked: boolean;
    deleting: boolean;
    bindings: readonly TokenBinding[];
  };
  node?: { uid: string };
}

/**
 * Whether another token's claim still holds the name, by the rule a binding is live (the same
 * rule the name check has always used): registered, while its Node is; not yet registered, until
 * its token is revoked or deleted. A claim whose token is gone (or re-made: another UID) holds
 * nothing. A claim without a binding yet is an issuance in flight: it holds (fail closed; its
 * token's reconciler releases it if the binding is never written).
 */
export function holderStillHolds(nodeName: string, holder: ClaimHolder, facts: HolderFacts): boolean {
  const token = facts.token;
  if (!token || token.uid !== holder.tokenUID) return false;
  const binding = token.bindings.find((b) => b.nodeName === nodeName);
  return binding ? bindingHoldsName(binding, token, facts.node?.uid) : true;
}

/**
 * Whether a binding still holds its node name: registered, while its Node (that UID) exists; not
 * registered yet, until its token is revoked or deleted.
 */
export function bindingHoldsName(
  binding: TokenBinding,
  token: { revoked: boolean; deleting: boolean },
  nodeUid: string | undefined,
): boolean {
  if (binding.nodeUID !== undefined) return binding.nodeUID === nodeUid;
  return !token.revoked && !token.deleting;
}

// ---------------------------------------------------------------------------------------------
// The approval, checked against fresh state just before it is written

/** Everything an approval rests on, read from the API server just now (not from a cache). */
export interface ApprovalFacts {
  csrName: string;
  nodeName: string;
  /** The UID of the token the CSR's bootstrap user names, as the binding was recorded under. */
  tokenUID: string;
  token?: {
    uid: string;
    tokenId: string;
    revoked: boolean;
    deleting: boolean;
    bindings: readonly TokenBinding[];
    /** A rejoin token (verdict.ts TokenFacts.rejoin): its machine may come back to its own Node. */
    rejoin?: boolean;
  };
  claim?: NodeNameClaim;
  /** The Node of that name, if one exists. */
  node?: { uid: string };
  /**
   * For a retry (another CSR of a binding whose Node UID is not recorded): the binding's own CSR
   * was issued its certificate, read just now. A retry is only one whose first request got none.
   */
  boundCsrIssued?: boolean;
}

type ApprovalCheck = (facts: ApprovalFacts) => string | undefined;

const tokenStillThere: ApprovalCheck = ({ token, tokenUID }) =>
  !token || token.uid !== tokenUID ? 'its token is gone (deleted, or made again under its name)' : undefined;

const tokenNotRevoked: ApprovalCheck = ({ token }) =>
  token?.revoked || token?.deleting ? `token ${token.tokenId} was revoked` : undefined;

// This CSR's binding, or (a retry of the same join) the name's binding not yet registered, whose
// own request was never issued its certificate.
const bindingRecorded: ApprovalCheck = ({ token, csrName, nodeName, boundCsrIssued }) =>
  token?.bindings.some(
    (b) => b.nodeName === nodeName && (b.csrName === csrName || (b.nodeUID === undefined && !boundCsrIssued)),
  )
    ? undefined
    : `no binding of node name ${nodeName} to this CSR is recorded on its token`;

const claimHeld: ApprovalCheck = ({ claim, tokenUID, nodeName }) =>
  claim?.spec.holder?.tokenUID === tokenUID
    ? undefined
    : `the claim on node name ${nodeName} is not held by this CSR's token`;

// A CSR still pending has no certificate yet: a Node of its name is another machine's, except the
// very Node a rejoin token's machine registered before (its binding records that UID).
const nameUnregistered: ApprovalCheck = ({ node, nodeName, token }) =>
  !node || (token?.rejoin && token.bindings.some((b) => b.nodeName === nodeName && b.nodeUID === node.uid))
    ? undefined
    : `node ${nodeName} exists already: this request did not create it`;

const APPROVAL_CHAIN: ApprovalCheck[] = [
  tokenStillThere,
  tokenNotRevoked,
  bindingRecorded,
  claimHeld,
  nameUnregistered,
];

/** Why this CSR must not be approved now, or undefined when every fresh fact allows it. */
export function approvalBlocker(facts: ApprovalFacts): string | undefined {
  for (const check of APPROVAL_CHAIN) {
    const blocker = check(facts);
    if (blocker) return blocker;
  }
  return undefined;
}
