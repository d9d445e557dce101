// Every write (and the fresh reads) the reconcilers make, behind one interface: the process binds it
// to the term's fenced KubeConfig (src/kube), and unit tests to a fake that records the calls, so
// the reconcilers can be tested on event sequences without an API server.
import type { DesiredNodeState } from '../flavor/converge.ts';
import type {
  FlavorClassStatus,
  FlavoredTokenStatus,
  NodeNameClaim,
  StoredFlavoredToken,
} from '../flavor/resources.ts';
import { type CsrObject, decideCsr } from '../kube/csrs.ts';
import { writeFlavorClassStatus } from '../kube/flavor-class-writes.ts';
import type { StoredFlavorClass } from '../kube/flavor-classes.ts';
import {
  createClaim,
  deleteClaimVersion,
  readClaim,
  readNode,
  replaceClaim,
} from '../kube/node-name-claims.ts';
import { type TrimmedNode, writeNodeState } from '../kube/node-writes.ts';
import { KubeTokenStore } from '../kube/tokens.ts';
import type { KubeConfig } from '../runtime/kubeconfig.ts';

export interface ControllerApi {
  /** One JSON patch; a conflict (the Node changed since it was judged) is a KubeError 409. */
  writeNode(node: TrimmedNode, desired: DesiredNodeState): Promise<TrimmedNode>;
  /** PUT status at the token's resourceVersion (409 when stale). */
  writeTokenStatus(token: StoredFlavoredToken, status: FlavoredTokenStatus): Promise<StoredFlavoredToken>;
  /** The token as the API server has it now; undefined when gone. */
  readToken(name: string): Promise<StoredFlavoredToken | undefined>;
  /** Deletes exactly this version of the token (409 when it changed). */
  deleteTokenVersion(token: StoredFlavoredToken): Promise<void>;
  /** Adds or removes the revocation finalizer; undefined when nothing had to change. */
  setFinalizer(token: StoredFlavoredToken, present: boolean): Promise<StoredFlavoredToken | undefined>;
  /** Deletes the token's bootstrap Secret (already gone is fine); whether it existed. */
  deleteBootstrapSecret(tokenId: string): Promise<boolean>;
  /** Approves or denies the CSR at its resourceVersion (409 when stale); the CSR as written. */
  decideCsr(csr: CsrObject, approve: boolean, reason: string, message: string): Promise<CsrObject>;
  /** Whether FlavoredToken `name` exists, read from the API server (not a cache). */
  flavoredTokenExists(name: string): Promise<boolean>;
  /** The Node as the API server has it now (not a cache); undefined when gone. */
  readNode(name: string): Promise<TrimmedNode | undefined>;
  /** Claims a node name: a KubeError 409 when it is claimed already (ADR 0011). */
  createClaim(claim: NodeNameClaim): Promise<NodeNameClaim>;
  /** The claim on a node name as the API server has it now; undefined when none. */
  readClaim(nodeName: string): Promise<NodeNameClaim | undefined>;
  /** Replaces a claim at its resourceVersion (409 when stale). */
  replaceClaim(claim: NodeNameClaim): Promise<NodeNameClaim>;
  /** Deletes exactly this version of a released claim (409 when it changed; gone is fine). */
  deleteClaimVersion(claim: NodeNameClaim): Promise<void>;
  /** Replaces the FlavorClass's status at its resourceVersion (409 when stale); the class as stored. */
  writeClassStatus(flavorClass: StoredFlavorClass, status: FlavorClassStatus): Promise<unknown>;
}

export function kubeControllerApi(kubeConfig: KubeConfig): ControllerApi {
  const tokens = new KubeTokenStore(kubeConfig);
  return {
    writeNode: (node, desired) => writeNodeState(kubeConfig, node, desired),
    writeTokenStatus: (token, status) => tokens.writeTokenStatus(token, status),
    readToken: (name) => tokens.readStoredToken(name),
    deleteTokenVersion: (token) => tokens.deleteTokenVersion(token),
    setFinalizer: (token, present) => tokens.setFinalizer(token, present),
    deleteBootstrapSecret: (tokenId) => tokens.deleteBootstrapSecret(tokenId),
    decideCsr: (csr, approve, reason, message) => decideCsr(kubeConfig, csr, approve, reason, message),
    flavoredTokenExists: async (name) => (await tokens.readStoredToken(name)) !== undefined,
    readNode: (name) => readNode(kubeConfig, name),
    createClaim: (claim) => createClaim(kubeConfig, claim),
    readClaim: (nodeName) => readClaim(kubeConfig, nodeName),
    replaceClaim: (claim) => replaceClaim(kubeConfig, claim),
    deleteClaimVersion: (claim) => deleteClaimVersion(kubeConfig, claim),
    writeClassStatus: (flavorClass, status) => writeFlavorClassStatus(kubeConfig, flavorClass, status),
  };
}
