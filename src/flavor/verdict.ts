// The two decisions at the heart of nodeflavor, as chains of small pure checks (cert-manager's
// policy-chain shape): does this CSR bind its bootstrap token to a node name, and what flavor,
// if any, does this Node deserve. The gatherers (controller) collect the facts from caches;
// the reconcilers carry out the verdict. Every failure has a reason (an Event reason and a
// metric label, from a small fixed set) and a message that never holds a secret.
import { TOKEN_LABEL_KEY } from './admission.ts';
import { type TokenProofs, unusedProof } from './attestation-proofs.ts';
import { attestationSealHolds, type SealedFacts } from './attestation-seal.ts';
import type { CsrSubject } from './csr.ts';
import { FLAVOR_TOKEN_PATTERN, verifyFlavorToken } from './flavor-token.ts';
import { joinRequestKind } from './join-request.ts';
import type { KeyRing } from './keyring.ts';
import { type FlavorClassSpec, matchesNodeName, NODES_GROUP, type TokenBinding } from './resources.ts';
import {
  parseVerificationRecord,
  recordIsGenuine,
  VERIFIED_ANNOTATION,
  type VerificationRecord,
} from './verification-record.ts';

export { VERIFIED_ANNOTATION, type VerificationRecord };

export const FAILURE_REASONS = [
  'MalformedCSR',
  'UnknownToken',
  'Revoked',
  'Expired',
  'NoUsesLeft',
  'NodeNameMismatch',
  'NameTaken',
  'AlreadyJoined',
  'Superseded',
  'Conflict',
  'NoBinding',
  'InvalidRecord',
  'FlavorClassNotFound',
  'AttestationRequired',
  'MissingToken',
  'MalformedToken',
  'InvalidToken',
] as const;
export type FailureReason = (typeof FAILURE_REASONS)[number];

export interface Failure {
  reason: FailureReason;
  message: string;
}

// ---------------------------------------------------------------------------------------------
// Binding: CSR → (token, node name)

/** A FlavoredToken as the binding and node decisions see it. */
export interface TokenFacts {
  name: string;
  tokenId: string;
  flavorClassName: string;
  maxUses: number;
  nodeName?: string;
  nodeNamePattern?: string;
  expiresAt: Date;
  /**
   * When the record was created. A token ID can come back (an idempotent retry after its token was
   * deleted): CSRs made before are an earlier token's, never this one's.
   */
  issuedAt?: Date;
  revoked: boolean;
  deleting: boolean;
  stripNodesOnRevoke: boolean;
  bindings: TokenBinding[];
  /** Joins counted so far; never decreases (bindings of deleted nodes may be pruned, uses stay). */
  uses: number;
  /**
   * A token bound to a TPM with allowRejoin and a pinned nodeName (ADR 0014): its machine, re-installed
   * and attested again, may join again under that name. Its bootstrap Secret exists only after a
   * TPM proof (the issuer mints it then), so a CSR made with it is that machine's.
   */
  rejoin?: boolean;
  /** Bound to a TPM (spec.attestation): its bootstrap Secret was minted only after a TPM proof. */
  attested?: boolean;
  /**
   * Its attestation facts and the issuer's seal over them (attestation-seal.ts): only sealed facts
   * are believed (a FlavoredToken written directly may say anything).
   */
  attestationSeal?: { facts: SealedFacts; seal: string | undefined };
  /** Its machine's proofs, and the latest one a binding used: each proof earns one join. */
  proofs?: TokenProofs;
}

/** The status field holds at most this many bindings (the CRD's maxItems). */
export const MAX_BINDINGS = 1000;

export const KUBELET_CLIENT_SIGNER = 'kubernetes.io/kube-apiserver-client-kubelet';

export interface CsrFacts {
  name: string;
  createdAt: Date;
  signerName: string;
  /** spec.usages: what the signer puts in the certificate. */
  usages: string[];
  /** spec.expirationSeconds, when the requester asked for a duration. */
  expirationSeconds?: number;
  /** Already approved (by kube-controller-manager where it auto-approves this group). */
  approved: boolean;
  /** The node name from CN=system:node:<name>, or why the request could not be read. */
  subject: CsrSubject;
}

/** What the cluster says about the node name a CSR asks for (gathered from the caches). */
export interface NameFacts {
  /** Another token holds a live join of this name (its Node exists, or has yet to register). */
  boundByOtherToken: boolean;
  /** The Node of this name, if one exists now. */
  node?: { uid: string; createdAt: Date };
  /**
   * The request this token's join of the name was approved on was issued its certificate, or is
   * gone (kube-controller-manager's cleaner deletes issued CSRs after an hour: gone counts as
   * issued): its machine can register (and may have registered, and deleted, a Node) before the
   * join records a Node UID (join-request.ts).
   */
  joinCsrIssued?: boolean;
  /**
   * Another requester (a plain kubeadm token, another token, the node itself) was issued a kubelet
   * client certificate for this name, and its request is still on record: that machine can
   * register the Node. Its CSR's name.
   */
  certifiedElsewhere?: string;
  /** A live token other than this one is issued for exactly this name (its spec.nodeName): its ID. */
  reservedFor?: string;
  /**
   * The token's ledger counts the join it holds under this name (its use is spent). A join judged
   * again before its use was counted (a crash, a conflict) must still find a use left.
   */
  joinCounted?: boolean;
}

export type BindingDecision =
  /** `proof`: for a token bound to a TPM, the proof (its number) this join uses. */
  | { kind: 'bind'; nodeName: string; proof?: number }
  /**
   * This CSR's own join (judged again), or a retry of the same join: approvable, no further use.
   * `proof`: a join judged again before its use was counted counts it with this proof.
   */
  | { kind: 'already-bound'; nodeName: string; retry?: boolean; proof?: number }
  /** A re-installed machine of a rejoin token, its Node still there: the join moves to this CSR. */
  | { kind: 'rebind'; nodeName: string; proof: number }
  | { kind: 'reject'; nodeName?: string; failure: Failure };

type ReadableCsr = CsrFacts & { subject: Extract<CsrSubject, { ok: true }> };

// ---- The request itself, checked as kube-controller-manager's approver and kubelet-csr-approver
// check a kubelet client CSR (k8s.io/kubernetes pkg/apis/certificates ValidateKubeletClientCSR).

/** The signer caps any duration at its own; a request for more than this is not a kubelet's. */
const MAX_CLIENT_CERT_SECONDS = 366 * 24 * 3600;
const CLIENT_USAGES = [
  ['client auth', 'digital signature'],
  ['client auth', 'digital signature', 'key encipherment'],
].map((usages) => usages.join(','));
const ACCEPTED_CURVES = new Set(['P-256', 'P-384', 'P-521']);
const MIN_RSA_BITS = 2048;

type CsrCheck = (csr: ReadableCsr) => string | undefined;

const kubeletSigner: CsrCheck = (csr) =>
  csr.signerName === KUBELET_CLIENT_SIGNER
    ? undefined
    : `signer "${csr.signerName}" is not ${KUBELET_CLIENT_SIGNER}`;

const organizationIsNodes: CsrCheck = (csr) =>
  csr.subject.organizations.length === 1 && csr.subject.organizations[0] === NODES_GROUP
    ? undefined
    : `the subject's organization must be exactly ${NODES_GROUP}`;

const noSubjectAltNames: CsrCheck = (csr) =>
  csr.subject.hasSubjectAltNames
    ? 'a kubelet client certificate has no subject alternative names'
    : undefined;

const clientUsagesOnly: CsrCheck = (csr) =>
  CLIENT_USAGES.includes([...new Set(csr.usages)].sort().join(','))
    ? undefined
    : `usages must be "digital signature" and "client auth" (and optionally "key encipherment"), not ${JSON.stringify(csr.usages)}`;

const acceptableKey: CsrCheck = (csr) => {
  const key = csr.subject.publicKey;
  if (key.algorithm === 'ECDSA' && key.curve && ACCEPTED_CURVES.has(key.curve)) return undefined;
  if (key.algorithm.startsWith('RSA') && (key.bits ?? 0) >= MIN_RSA_BITS) return undefined;
  return `the key (${key.algorithm}${key.curve ? ` ${key.curve}` : ''}${key.bits ? ` ${key.bits} bits` : ''}) is not ECDSA P-256/P-384/P-521 or RSA of at least ${MIN_RSA_BITS} bits`;
};

const sensibleDuration: CsrCheck = (csr) =>
  csr.expirationSeconds === undefined || csr.expirationSeconds <= MAX_CLIENT_CERT_SECONDS
    ? undefined
    : `the requested duration (${csr.expirationSeconds} s) exceeds ${MAX_CLIENT_CERT_SECONDS} s`;

const CSR_CHAIN: CsrCheck[] = [
  kubeletSigner,
  organizationIsNodes,
  noSubjectAltNames,
  clientUsagesOnly,
  acceptableKey,
  sensibleDuration,
];

/** Why this CSR is not a kubelet client request a careful approver would approve, if it is not. */
function checkKubeletCsr(csr: CsrFacts): Failure | undefined {
  if (!csr.subject.ok) return { reason: 'MalformedCSR', message: `CSR ${csr.name}: ${csr.subject.reason}` };
  for (const check of CSR_CHAIN) {
    const problem = check(csr as ReadableCsr);
    if (problem) return { reason: 'MalformedCSR', message: `CSR ${csr.name}: ${problem}` };
  }
  return undefined;
}

// ---- The token and the name.

type BindingCheck = (
  csr: CsrFacts & { nodeName: string },
  token: TokenFacts,
  name: NameFacts,
) => Failure | undefined;

// Whole seconds, both set by the API server: a CSR of this token is never from before its record.
const madeAfterIssue: BindingCheck = (csr, token) =>
  token.issuedAt !== undefined && csr.createdAt.getTime() < token.issuedAt.getTime()
    ? {
        reason: 'UnknownToken',
        message: `CSR ${csr.name} was made before token ${token.tokenId} was issued: it belongs to an earlier token with that ID`,
      }
    : undefined;

const notRevoked: BindingCheck = (_csr, token) =>
  token.revoked || token.deleting
    ? { reason: 'Revoked', message: `token ${token.tokenId} was revoked` }
    : undefined;

const notExpired: BindingCheck = (csr, token) =>
  csr.createdAt.getTime() > token.expiresAt.getTime()
    ? {
        reason: 'Expired',
        message: `token ${token.tokenId} expired at ${token.expiresAt.toISOString()} before the CSR was made`,
      }
    : undefined;

const nameAllowed: BindingCheck = (csr, token) =>
  matchesNodeName({ nodeName: token.nodeName, nodeNamePattern: token.nodeNamePattern }, csr.nodeName)
    ? undefined
    : {
        reason: 'NodeNameMismatch',
        message: `node name "${csr.nodeName}" does not match token ${token.tokenId}'s ${token.nodeName ? `nodeName "${token.nodeName}"` : `nodeNamePattern "${token.nodeNamePattern}"`}`,
      };

// A name is one node's: a live join under another token, a Node that existed before this request
// (so this token did not create it), or another requester's kubelet certificate for it keeps it
// from a second token holder (a squatter); a name a live token is issued for is that token's.
/** The refusal of a node name another token's live join holds. */
export function nameBoundElsewhere(nodeName: string, tokenId: string): Failure {
  return {
    reason: 'NameTaken',
    message: `node name "${nodeName}" is bound to another token: token ${tokenId} cannot claim it`,
  };
}

// A token issued for one node name (spec.nodeName) reserves it while it is live: the machine the
// admin meant is never locked out by a token for any name that asked first.
const nameNotReserved: BindingCheck = (csr, token, name) =>
  name.reservedFor !== undefined && name.reservedFor !== token.tokenId && token.nodeName !== csr.nodeName
    ? {
        reason: 'NameTaken',
        message: `node name "${csr.nodeName}" is reserved for token ${name.reservedFor}, which was issued for exactly that name: token ${token.tokenId} cannot claim it`,
      }
    : undefined;

const nameFree: BindingCheck = (csr, token, name) => {
  if (name.boundByOtherToken) return nameBoundElsewhere(csr.nodeName, token.tokenId);
  // A CSR not yet approved has no credentials yet: any Node of its name is someone else's. One
  // approved by kube-controller-manager may have registered its Node before we judged it;
  // timestamps have whole seconds, so only a Node from an earlier second is surely not its own.
  const second = (date: Date) => Math.floor(date.getTime() / 1000);
  if (name.node && (!csr.approved || second(name.node.createdAt) < second(csr.createdAt)))
    return {
      reason: 'NameTaken',
      message: `node "${csr.nodeName}" existed before this request: token ${token.tokenId} did not create it`,
    };
  if (name.certifiedElsewhere !== undefined)
    return {
      reason: 'NameTaken',
      message: `another requester holds a kubelet certificate for node "${csr.nodeName}" (CSR ${name.certifiedElsewhere}): token ${token.tokenId} cannot claim it`,
    };
  return undefined;
};

// A token bound to a TPM joins once per proof of its machine (attestation-proofs.ts): a proof no
// binding used, made before the CSR. A rejoin token's joins are its one machine's, under its one
// pinned name (nameAllowed), each after a new proof, not counted against maxUses.
const usesLeft: BindingCheck = (csr, token) => {
  if (!token.rejoin && token.maxUses > 0 && token.uses >= token.maxUses)
    return {
      reason: 'NoUsesLeft',
      message: `token ${token.tokenId} has no uses left (${token.uses}/${token.maxUses})`,
    };
  if (token.attested && unusedProof(token.proofs, csr.createdAt) === undefined)
    return {
      reason: 'NoUsesLeft',
      message: `token ${token.tokenId}'s latest attestation earned a join already, or CSR ${csr.name} was made before it: its machine must attest again`,
    };
  return undefined;
};

// An unlimited token records one binding per live node; at the list's limit it fails closed.
const roomForBinding: BindingCheck = (_csr, token) =>
  token.bindings.length >= MAX_BINDINGS
    ? {
        reason: 'NoUsesLeft',
        message: `token ${token.tokenId} already binds ${MAX_BINDINGS} live nodes: issue another token`,
      }
    : undefined;

const BINDING_CHAIN: BindingCheck[] = [
  madeAfterIssue,
  notRevoked,
  notExpired,
  nameAllowed,
  nameNotReserved,
  nameFree,
  usesLeft,
  roomForBinding,
];

/** The token's joins under other names (its own under this one does not take a place from itself). */
const others = (token: TokenFacts, nodeName: string) => token.bindings.filter((b) => b.nodeName !== nodeName);

/** Does this kubelet client CSR, made with `token`, bind the token to its node name? */
export function decideBinding(
  csr: CsrFacts,
  token: TokenFacts | undefined,
  name: NameFacts = { boundByOtherToken: false },
): BindingDecision {
  const malformed = checkKubeletCsr(csr);
  if (!csr.subject.ok) return { kind: 'reject', failure: malformed as Failure };
  const nodeName = csr.subject.nodeName;
  if (malformed) return { kind: 'reject', nodeName, failure: malformed };
  if (!token)
    return {
      kind: 'reject',
      nodeName,
      failure: {
        reason: 'UnknownToken',
        message: `CSR ${csr.name} was made with a bootstrap token nodeflavor did not issue`,
      },
    };
  // The join this token already holds under the name (join-request.ts says what this request is).
  const existing = token.bindings.find((b) => b.nodeName === nodeName);
  const rejoinProof = token.rejoin ? unusedProof(token.proofs, csr.createdAt) : undefined;
  const kind = existing
    ? joinRequestKind(existing, {
        csr,
        joinCsrIssued: name.joinCsrIssued === true,
        ...(name.node ? { nodeUid: name.node.uid } : {}),
        ...(token.rejoin ? { rejoin: true } : {}),
        provenAgain: rejoinProof !== undefined,
      })
    : undefined;
  if (kind === 'rebind') {
    // A new join of the same machine, once per proof: judged as a new binding would be.
    for (const check of [madeAfterIssue, notRevoked, notExpired, nameAllowed]) {
      const failure = check({ ...csr, nodeName }, token, name);
      if (failure) return { kind: 'reject', nodeName, failure };
    }
    return { kind: 'rebind', nodeName, proof: rejoinProof as number };
  }
  if (kind === 'already-joined')
    return {
      kind: 'reject',
      nodeName,
      failure: {
        reason: 'AlreadyJoined',
        message: `node ${nodeName} already joined with token ${token.tokenId}: a joined node does not bootstrap again`,
      },
    };
  if (kind === 'same' || kind === 'retry') {
    // The same join asked again (a retry), or judged again before its use was counted: still only
    // while its token is live, and, uncounted, while it has a use left.
    const checks = name.joinCounted
      ? kind === 'retry'
        ? [madeAfterIssue, notRevoked, notExpired]
        : []
      : [madeAfterIssue, notRevoked, notExpired, usesLeft, roomForBinding];
    for (const check of checks) {
      const failure = check({ ...csr, nodeName }, { ...token, bindings: others(token, nodeName) }, name);
      if (failure) return { kind: 'reject', nodeName, failure };
    }
    // Uncounted, a token bound to a TPM counts it with the proof it uses (usesLeft found one).
    const proof = !name.joinCounted && token.attested ? unusedProof(token.proofs, csr.createdAt) : undefined;
    return {
      kind: 'already-bound',
      nodeName,
      ...(kind === 'retry' ? { retry: true } : {}),
      ...(proof !== undefined ? { proof } : {}),
    };
  }
  for (const check of BINDING_CHAIN) {
    const failure = check({ ...csr, nodeName }, token, name);
    if (failure) return { kind: 'reject', nodeName, failure };
  }
  const proof = token.attested ? unusedProof(token.proofs, csr.createdAt) : undefined;
  return proof === undefined ? { kind: 'bind', nodeName } : { kind: 'bind', nodeName, proof };
}

// ---------------------------------------------------------------------------------------------
// Node: what flavor does it deserve

export interface NodeFacts {
  name: string;
  uid: string;
  createdAt: Date;
  labels: Record<string, string>;
  annotations: Record<string, string>;
  taints: { key: string; value?: string; effect: string }[];
}

/** A binding of this node's name, with the token it belongs to. */
export interface BoundToken {
  token: TokenFacts;
  binding: TokenBinding;
}

export interface NodeDecisionInput {
  node: NodeFacts;
  bindings: BoundToken[];
  /** Why CSRs naming this node were not bound (most recent first), for a precise reason. */
  rejectedClaims: Failure[];
  flavorClasses: ReadonlyMap<string, FlavorClassSpec>;
  keyRing: KeyRing;
  now: Date;
  /** How long a node with a token label may wait for its CSR binding to be seen. */
  bindingGraceMs: number;
  /** Whether the node carries protected labels or annotations (besides the token label). */
  carriesTrustedKeys: boolean;
  /** Whether a FlavoredToken with this token ID exists (deleted tokens leave records behind). */
  tokenExists: (tokenId: string) => boolean;
  /**
   * Whether the node's name is claimed through nodeflavor (a NodeNameClaim, held or released): a
   * machine got a kubelet certificate for it from a nodeflavor token, so a Node of that name is
   * never unmanaged, whatever its kubelet presents.
   */
  nameClaimed?: boolean;
}

/** The Node's verification record as written (not yet checked: see recordIsGenuine). */
export function readVerificationRecord(node: NodeFacts): VerificationRecord | undefined {
  return parseVerificationRecord(node.annotations[VERIFIED_ANNOTATION]);
}

export type NodeVerdict =
  /** The token checks out now: record the verification, then apply the flavor. */
  | { kind: 'verify'; bound: BoundToken; flavorClass: FlavorClassSpec }
  /**
   * Verified before: keep the flavor applied. `bound` is absent when the token was deleted with
   * revocationPolicy Keep and the Node's own verification record, genuine under the key ring for
   * this Node's UID, is what remains.
   */
  | { kind: 'flavored'; bound?: BoundToken; record?: VerificationRecord; flavorClass: FlavorClassSpec }
  /** No flavor: strip managed keys, keep (or restore) the quarantine taint, warn. */
  | { kind: 'unflavored'; failure: Failure }
  /** Too early to judge (the CSR binding may not have been seen yet). */
  | { kind: 'wait'; retryAfterMs: number }
  /** Nothing of ours on this node: leave it alone. */
  | { kind: 'unmanaged' };

function hasTokenLabel(node: NodeFacts): boolean {
  return Object.hasOwn(node.labels, TOKEN_LABEL_KEY);
}

/** A node no FlavoredToken binds: a rejected claim, a kept flavor, a late binding, or an intruder. */
function decideUnbound(input: NodeDecisionInput): NodeVerdict {
  const { node } = input;
  const record = readVerificationRecord(node);
  if (record && !input.tokenExists(record.tokenID)) {
    // Proof only if the controller wrote it for this very Node: anyone else's copy is a forgery.
    if (!recordIsGenuine(input.keyRing, node.uid, record))
      return {
        kind: 'unflavored',
        failure: {
          reason: 'InvalidRecord',
          message: `node ${node.name}'s ${VERIFIED_ANNOTATION} record was not written by nodeflavor for this node`,
        },
      };
    const flavorClass = input.flavorClasses.get(record.flavorClass);
    if (!flavorClass) {
      return {
        kind: 'unflavored',
        failure: {
          reason: 'FlavorClassNotFound',
          message: `FlavorClass "${record.flavorClass}" of node ${node.name} does not exist`,
        },
      };
    }
    return { kind: 'flavored', record, flavorClass };
  }
  // A node that claims nothing of ours (no token label, no trusted keys) is not ours to judge,
  // even if its CSR came from a token we did not issue: plain kubeadm joins stay untouched.
  if (!hasTokenLabel(node) && !input.carriesTrustedKeys && !record && !input.nameClaimed)
    return { kind: 'unmanaged' };
  const claim = input.rejectedClaims[0];
  if (claim) return { kind: 'unflavored', failure: claim };
  if (hasTokenLabel(node)) {
    const age = input.now.getTime() - node.createdAt.getTime();
    if (age < input.bindingGraceMs)
      return { kind: 'wait', retryAfterMs: Math.max(250, input.bindingGraceMs - age) };
    return {
      kind: 'unflavored',
      failure: {
        reason: 'NoBinding',
        message: `no CSR made with a nodeflavor token names node ${node.name}`,
      },
    };
  }
  return {
    kind: 'unflavored',
    failure: {
      reason: 'NoBinding',
      message: input.nameClaimed
        ? `node ${node.name} registered under a name claimed through nodeflavor, with no live binding (a machine that joined before, or its Node re-created): it stays quarantined`
        : `node ${node.name} carries trusted keys without a verified binding`,
    },
  };
}

// ---- A node bound to exactly one token: named checks, in order, whose reasons are the Event
// reasons. The first chain applies to every bound node; a node verified before stops after it.

/** What every check of a bound node sees. */
interface BoundNodeFacts {
  node: NodeFacts;
  bound: BoundToken;
  /** The binding was verified for this very Node (its UID). */
  verified: boolean;
  flavorClass: FlavorClassSpec | undefined;
  keyRing: KeyRing;
}

type NodeCheck = (facts: BoundNodeFacts) => Failure | undefined;

// A revoked token strips its nodes when its policy says so; an unverified node never gains by it.
const tokenStillValid: NodeCheck = ({ bound: { token }, verified }) =>
  (token.revoked || token.deleting) && (token.stripNodesOnRevoke || !verified)
    ? { reason: 'Revoked', message: `token ${token.tokenId} was revoked` }
    : undefined;

const flavorClassExists: NodeCheck = ({ bound: { token }, flavorClass }) =>
  flavorClass
    ? undefined
    : {
        reason: 'FlavorClassNotFound',
        message: `FlavorClass "${token.flavorClassName}" of token ${token.tokenId} does not exist`,
      };

const tokenPresented: NodeCheck = ({ node }) =>
  node.labels[TOKEN_LABEL_KEY] === undefined
    ? { reason: 'MissingToken', message: `node ${node.name} registered without the ${TOKEN_LABEL_KEY} label` }
    : undefined;

const tokenWellFormed: NodeCheck = ({ node }) =>
  new RegExp(FLAVOR_TOKEN_PATTERN).test(node.labels[TOKEN_LABEL_KEY] ?? '')
    ? undefined
    : {
        reason: 'MalformedToken',
        message: `node ${node.name}'s ${TOKEN_LABEL_KEY} label is not a flavor token`,
      };

const tokenMatches: NodeCheck = ({ node, bound: { token }, keyRing }) =>
  verifyFlavorToken(keyRing, token.tokenId, token.flavorClassName, node.labels[TOKEN_LABEL_KEY] ?? '').valid
    ? undefined
    : {
        reason: 'InvalidToken',
        message: `node ${node.name}'s flavor token does not match token ${token.tokenId}`,
      };

/**
 * Whether the token is bound to a TPM by an EK certificate from a configured manufacturer, as the
 * issuer established and sealed it (a bare public key could be a software key; a FlavoredToken
 * written directly may name any certificate issuer).
 */
export function ekCertified(token: Pick<TokenFacts, 'attestationSeal'>, keyRing: KeyRing): boolean {
  const sealed = token.attestationSeal;
  return (
    sealed?.facts.attestation.ekCertificateIssuer !== undefined &&
    attestationSealHolds(keyRing, sealed.facts, sealed.seal)
  );
}

// A flavor that requires a measured boot state is earned only through a TPM (ADR 0014): the issuer
// checked the quote before it minted the bootstrap token; a token not bound to a TPM never earns it.
const attestedIfRequired: NodeCheck = ({ bound: { token }, flavorClass, keyRing }) =>
  flavorClass?.measuredBoot && !ekCertified(token, keyRing)
    ? {
        reason: 'AttestationRequired',
        message: `FlavorClass "${token.flavorClassName}" requires a measured boot state, and token ${token.tokenId} is not bound to a TPM by a manufacturer's EK certificate the issuer checked and sealed`,
      }
    : undefined;

/** Every bound node, verified or not. */
const BOUND_NODE_CHAIN: NodeCheck[] = [tokenStillValid, flavorClassExists, attestedIfRequired];
/** A node not verified yet: the flavor token its kubelet presented, checked under the key ring. */
const PRESENTED_TOKEN_CHAIN: NodeCheck[] = [tokenPresented, tokenWellFormed, tokenMatches];

function firstFailure(chain: NodeCheck[], facts: BoundNodeFacts): Failure | undefined {
  for (const check of chain) {
    const failure = check(facts);
    if (failure) return failure;
  }
  return undefined;
}

/**
 * Whether the Node carries the record nodeflavor signed for this very Node naming this token and
 * its class: written with the flavor in the same Node write, it is the proof of a verification
 * until the token reconciler has copied it onto the binding (and after, while the key verifies).
 */
export function recordVerifiesToken(
  node: NodeFacts,
  token: Pick<TokenFacts, 'tokenId' | 'flavorClassName'>,
  keyRing: KeyRing,
): VerificationRecord | undefined {
  const record = readVerificationRecord(node);
  const genuine =
    record !== undefined &&
    record.tokenID === token.tokenId &&
    record.flavorClass === token.flavorClassName &&
    recordIsGenuine(keyRing, node.uid, record);
  return genuine ? record : undefined;
}

/** Verified before: the binding records it for this Node's UID, or the Node's own record does. */
function verifiedBefore(node: NodeFacts, bound: BoundToken, keyRing: KeyRing): boolean {
  if (bound.binding.verifiedAt !== undefined && bound.binding.nodeUID === node.uid) return true;
  return recordVerifiesToken(node, bound.token, keyRing) !== undefined;
}

export function decideNode(input: NodeDecisionInput): NodeVerdict {
  const { node } = input;
  // A binding recorded for another Node UID belongs to a Node that is gone (the token reconciler
  // releases it): this Node never inherits its flavor, and is judged on its own binding, if any.
  const bindings = input.bindings.filter((b) => !b.binding.nodeUID || b.binding.nodeUID === node.uid);
  if (bindings.length === 0) return decideUnbound({ ...input, bindings });
  const tokenNames = new Set(bindings.map((b) => b.token.name));
  if (tokenNames.size > 1) {
    const ids = bindings.map((b) => b.token.tokenId).sort();
    return {
      kind: 'unflavored',
      failure: {
        reason: 'Conflict',
        message: `node name ${node.name} is claimed by several tokens (${ids.join(', ')}): resolve by revoking all but one`,
      },
    };
  }
  const bound = bindings[0] as BoundToken;
  const facts: BoundNodeFacts = {
    node,
    bound,
    verified: verifiedBefore(node, bound, input.keyRing),
    flavorClass: input.flavorClasses.get(bound.token.flavorClassName),
    keyRing: input.keyRing,
  };
  const failure =
    firstFailure(BOUND_NODE_CHAIN, facts) ??
    (facts.verified ? undefined : firstFailure(PRESENTED_TOKEN_CHAIN, facts));
  if (failure) return { kind: 'unflavored', failure };
  const flavorClass = facts.flavorClass as FlavorClassSpec;
  return facts.verified ? { kind: 'flavored', bound, flavorClass } : { kind: 'verify', bound, flavorClass };
}
