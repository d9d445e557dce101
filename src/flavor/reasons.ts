// What each failure reason means and what to do about it: the operations guide's table
// (docs/operations.md#a-node-stays-quarantined) in the form `kubectl flavor explain` prints at the
// terminal. A unit test holds the two to the same set of reasons. Pure.
import type { FailureReason } from './verdict.ts';

interface Remedy {
  /** Which check failed, in a few words. */
  check: string;
  /** What happened. */
  meaning: string;
  /** What to do about it. */
  action: string;
}

export const REMEDIES: Readonly<Record<FailureReason, Remedy>> = {
  MissingToken: {
    check: 'the node presents a flavor token',
    meaning:
      'the node registered without the nodeflavor.io/token label: the join configuration was not used as issued',
    action:
      're-join with the material unchanged; a single-use token is used up by now: issue a new one, delete the Node, re-join',
  },
  MalformedToken: {
    check: 'the flavor token is well formed',
    meaning: 'the nodeflavor.io/token label is not a 52-character flavor token (truncated or edited)',
    action: 'issue a new token and re-join',
  },
  InvalidToken: {
    check: 'the flavor token matches the bootstrap token',
    meaning:
      'the flavor token does not belong to the bootstrap token the node joined with: from another issuance or another node, or its key is gone',
    action:
      'treat it as a possible attack (who gave this node which material?); check the key ring was not replaced; issue a new token',
  },
  UnknownToken: {
    check: 'nodeflavor issued the bootstrap token',
    meaning:
      'the node joined with a bootstrap token nodeflavor did not issue (e.g. kubeadm token create), or made its CSR before its token was issued (an earlier, deleted token with the same ID)',
    action: 'join with material from kubectl flavor issue or the issuer API',
  },
  NoBinding: {
    check: 'a CSR made with a nodeflavor token names the node',
    meaning:
      'the node carries a token label, but no CSR made with a nodeflavor token named it within the binding grace',
    action:
      "check the node's CSR exists, was made as system:bootstrap:<id> and names system:node:<node>; check the controller has a leader and can list CSRs",
  },
  NoUsesLeft: {
    check: 'the token has uses left',
    meaning: 'the token was already used by maxUses nodes',
    action: 'issue a new token (or one with a larger maxUses for a pool)',
  },
  Expired: {
    check: 'the token had not expired',
    meaning: 'the CSR was made after the token expired',
    action: 'issue a new token with a suitable --ttl',
  },
  Revoked: {
    check: 'the token is not revoked',
    meaning: 'the token was revoked or its FlavoredToken deleted',
    action: 'intentional: issue a new token if the node should join',
  },
  NodeNameMismatch: {
    check: 'the node name is one the token allows',
    meaning: "the node's name does not match the token's nodeName / nodeNamePattern",
    action: 'fix the hostname, or issue a token for the right name',
  },
  NameTaken: {
    check: 'the node name is free',
    meaning:
      "the CSR asked for a name bound to another token's live node, or for a Node that existed before the request (squatting, or a hostname clash)",
    action:
      'an honest clash (a replacement machine): delete the stale Node and re-join, or use another name; otherwise find who holds this token',
  },
  AlreadyJoined: {
    check: 'the node bootstraps once',
    meaning: 'a second bootstrap CSR for a node that already joined with this token',
    action: 'nothing, unless the node lost its credentials: then delete the Node and re-join',
  },
  Superseded: {
    check: 'one request per join is approved',
    meaning:
      'the same token asked again for the same node name (the kubelet retried): the newer request is the one approved',
    action: 'nothing: the retry joins',
  },
  InvalidRecord: {
    check: "the node's verification record is genuine",
    meaning:
      'the nodeflavor.io/verified record was not signed by nodeflavor for this node (edited, copied, or a retired key)',
    action: 'treat an edit as an attack; after a key mistake, issue a new token and re-join',
  },
  Conflict: {
    check: 'one token claims the node name',
    meaning: 'two tokens bound this name at the same moment: nobody gets the flavor',
    action: 'revoke all tokens but the right one (kubectl flavor revoke ID)',
  },
  FlavorClassNotFound: {
    check: "the token's FlavorClass exists",
    meaning: "the token's FlavorClass does not exist (deleted, renamed, or never created)",
    action: 'create it; the node is verified (or flavored again) on the next reconcile',
  },
  AttestationRequired: {
    check: "the flavor's measured boot requirement",
    meaning:
      'the FlavorClass requires a measured boot state (measuredBoot), and the node joined with a token not bound to a TPM',
    action: "issue a token bound to the machine's TPM (attestation) and re-join the machine with it",
  },
  MalformedCSR: {
    check: 'the CSR is a kubelet client request',
    meaning:
      'the CSR is not a kubelet client request a careful approver accepts (organization, SANs, usages, key or duration)',
    action: 'check the kubelet / bootstrap tooling; re-join',
  },
};

/** The remedy for a reason, if it is one of ours. */
export function remedyFor(reason: string | null | undefined): Remedy | undefined {
  return reason && Object.hasOwn(REMEDIES, reason) ? REMEDIES[reason as FailureReason] : undefined;
}
