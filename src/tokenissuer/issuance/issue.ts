// Where a token is minted: the issuance library behind both the token-issuer API and the
// kubectl-flavor CLI. One issuance writes two objects, in this order, then reads the first back:
//   1. FlavoredToken ft-<token ID> (the record: flavor, absolute expiry, uses; never a secret), in
//      its final state: the token ID label, the finalizer; no status (the controller's, once
//      something happens to the token);
//   2. Secret kube-system/bootstrap-token-<token ID>, owned by the FlavoredToken; with
//      usage-bootstrap-signing only for token discovery (file discovery, the default, needs no
//      signature in cluster-info, so live tokens cost it nothing).
// A token bound to a TPM (ADR 0014) gets no Secret here; its record is sealed instead, in a second
// write right after the create (the seal covers the record's uid, known only then): an HMAC under the
// key ring over the attestation facts this issuance established, without which the attestation
// routes and the controller believe none of them (src/flavor/attestation-seal.ts).
// The record comes first so that a Secret never exists without one: a node holding a token the
// controller cannot trace would get no flavor, but it would still join. Nothing in either object,
// nor in the join material, names the flavor where a token holder could read it. The record is
// written in its final state (absolute expiry, token ID label, finalizer): nothing marks it later
// and the controller writes no status until something happens to it (ADR 0015, crash table).
// Revocation is final (src/flavor/withdrawal.ts): after its Secret the issuance reads the record
// back and answers no material for a record revoked or being deleted (the Secret it made is
// deleted again). revokeToken deletes the Secret both before and after it sets spec.revoked, so a
// Secret an issuance made in between (and read back before the revocation) goes too. Keyed
// issuances (ADR 0005) keep their issued mark, written with the record's resourceVersion.
import { randomBytes as cryptoRandomBytes } from 'node:crypto';
import { readableAttestedRecord, refusalRecord } from '../../flavor/attestation-decision.ts';
import {
  ATTESTATION_SEAL_ANNOTATION,
  sealAttestation,
  sealedFactsOf,
} from '../../flavor/attestation-seal.ts';
import {
  type BootstrapToken,
  generateBootstrapToken,
  type RandomBytes,
  TOKEN_ID_PATTERN,
} from '../../flavor/bootstrap-token.ts';
import { deriveFlavorToken } from '../../flavor/flavor-token.ts';
import type { HmacKey, KeyRing } from '../../flavor/keyring.ts';
import { tokenWithJoins } from '../../flavor/node-name-claim.ts';
import {
  API_VERSION,
  type Condition,
  FLAVORED_TOKEN_KIND,
  type FlavoredToken,
  type FlavoredTokenInput,
  ISSUED_ANNOTATION,
  isDnsSubdomain,
  TOKEN_FINALIZER,
  TOKEN_ID_LABEL,
  tokenExpiry,
} from '../../flavor/resources.ts';
import { rfc3339 } from '../../flavor/rfc3339.ts';
import type { Secret } from '../../flavor/secret.ts';
import { expiryText, tokenIdOf } from '../../flavor/token-facts.ts';
import { type TokenNode, type TokenPhase, tokenLifecycle } from '../../flavor/token-lifecycle.ts';
import { type Withdrawal, withdrawal } from '../../flavor/withdrawal.ts';
import type { BootstrapSecretRequest, TokenKube } from '../../kube/tokens.ts';
import { isAlreadyExists, KubeError } from '../../runtime/kube-error.ts';
import { tokenAttestation } from '../attestation/attestation-binding.ts';
import { type AttestationFiles, sharedAttestationFiles } from '../attestation/attestation-files.ts';
import type { IssuanceSettings } from '../config.ts';
import { IssuerError } from '../errors.ts';
import { type IssueRequest, type ValidIssueRequest, validateIssueRequest } from '../request.ts';
import { type ClusterJoinFacts, clusterInfoFullReason, clusterJoinFacts } from './cluster-info.ts';
import { type DiscoveryMode, renderDiscoveryKubeconfig } from './discovery-kubeconfig.ts';
import { type JoinMaterial, renderAttestedJoinMaterial, renderJoinMaterial } from './join-material.ts';

export const FLAVORED_TOKEN_NAME_PREFIX = 'ft-';
/** Who asked for the token (a username), for audit; on the FlavoredToken, which token holders cannot read. */
export const REQUESTED_BY_ANNOTATION = 'nodeflavor.io/requested-by';
/**
 * Which API caller issued the token (a digest of its identity, see Caller.owner): the issuer API
 * shows and revokes a token only for its owner, or for a caller whose RBAC covers FlavoredTokens.
 */
export const OWNER_ANNOTATION = 'nodeflavor.io/owner';

/** Token IDs are 6 random characters: a clash with an existing token is rare, a second one rarer. */
const MAX_ATTEMPTS = 3;
/**
 * Writes of a keyed issuance's mark: a status write (an attestation's, a binding's) may change the
 * resourceVersion the mark is conditioned on (harmless: each conflict re-reads).
 */
const MAX_MARK_ATTEMPTS = 5;

export interface IssuanceDeps {
  kube: TokenKube;
  /** The HMAC key ring; its active key derives new flavor tokens. */
  keyRing: () => Promise<KeyRing>;
  settings: IssuanceSettings;
  now?: () => Date;
  randomBytes?: RandomBytes;
  /** The attestation files (manufacturer CAs and CRLs, issuer CA); default: one shared per path. */
  attestationFiles?: AttestationFiles;
}

/** The attestation files an issuance or an attestation reads (watched, never read per request). */
export function attestationFilesOf(deps: {
  settings: IssuanceSettings;
  attestationFiles?: AttestationFiles | undefined;
}): AttestationFiles {
  return deps.attestationFiles ?? sharedAttestationFiles(deps.settings.attestation);
}

export interface IssueInput extends IssueRequest {
  /** The authenticated caller, recorded on the FlavoredToken. */
  requestedBy?: string;
  /** The caller's owner digest (OWNER_ANNOTATION). */
  owner?: string;
}

interface IssuedTokenCommon {
  /** The FlavoredToken's name, ft-<tokenID>: the handle for status and revocation. */
  name: string;
  /** The FlavoredToken's uid: which record this material is of (a name can be reused). */
  recordUid: string;
  tokenId: string;
  /** RFC 3339, whole seconds. */
  expiresAt: string;
  material: JoinMaterial;
}

export interface PlainIssuedToken extends IssuedTokenCommon {
  attested: false;
  bootstrapToken: BootstrapToken;
  flavorToken: Secret;
}

/** A token bound to a TPM (ADR 0014): no secret exists until its machine proves it holds the TPM. */
export interface AttestedIssuedToken extends IssuedTokenCommon {
  attested: true;
}

export type IssuedToken = PlainIssuedToken | AttestedIssuedToken;

/** A FlavoredToken as the API and the CLI show it: no secret, ever. */
export interface TokenStatusView {
  id: string;
  tokenID: string | null;
  flavor: string;
  expiresAt: string | null;
  maxUses: number;
  uses: number;
  revoked: boolean;
  /** Derived from spec and status: Revoked, Expired, Consumed or Active. */
  state: 'Active' | 'Expired' | 'Consumed' | 'Revoked';
  nodeName: string | null;
  nodeNamePattern: string | null;
  description: string | null;
  createdAt: string | null;
  /** Where the token is in its life: Issued, Bound, Verified, Failed, Expired or Revoked. */
  phase: TokenPhase;
  /** For Failed: the reason (the same name as the Warning Event), and its message. */
  reason: string | null;
  message: string | null;
  /** When the phase began, as far as the record tells. */
  phaseSince: string | null;
  /** The nodes that used the token, or tried to (with the reason when they did not get it). */
  nodes: TokenNode[];
  conditions: Pick<Condition, 'type' | 'status' | 'reason' | 'message' | 'lastTransitionTime'>[];
  /** For a token bound to a TPM (ADR 0014): its attestations so far and the last refusal; else null. */
  attestation: TokenAttestationView | null;
}

export interface TokenAttestationView {
  /** The manufacturer CA that vouched for the EK, when it was bound by certificate. */
  ekCertificateIssuer: string | null;
  allowRejoin: boolean;
  /** How many times its machine proved itself, and when it last did. */
  attestations: number;
  attestedAt: string | null;
  /** The last refusal worth a look (another TPM, a bad proof, a late or replayed answer). */
  lastRefusal: { reason: string; message: string; at: string } | null;
}

function attestationView(token: FlavoredToken): TokenAttestationView | null {
  const bound = token.spec.attestation;
  if (!bound) return null;
  const attested = readableAttestedRecord(token);
  return {
    ekCertificateIssuer: bound.ekCertificateIssuer ?? null,
    allowRejoin: bound.allowRejoin,
    attestations: attested?.count ?? 0,
    attestedAt: attested?.at ?? null,
    lastRefusal: refusalRecord(token) ?? null,
  };
}

export function flavoredTokenName(tokenId: string): string {
  return FLAVORED_TOKEN_NAME_PREFIX + tokenId;
}

/** What an issuance has ready before it writes anything: validated, authorised input and facts. */
export interface PreparedIssuance {
  request: ValidIssueRequest;
  spec: FlavoredTokenInput['spec'];
  /** The record's annotations (who asked). */
  annotations: Record<string, string>;
  ring: KeyRing;
  facts: ClusterJoinFacts;
  /** For a token bound to a TPM: the issuer CA its material pins, if one is configured. */
  issuerCaPem?: string | undefined;
  now: () => Date;
}

/**
 * Validates the request and reads everything the material needs before anything is written, so
 * that these failures leave nothing behind.
 */
export async function prepareIssuance(deps: IssuanceDeps, input: IssueInput): Promise<PreparedIssuance> {
  const now = deps.now ?? (() => new Date());
  const { requestedBy, owner, ...body } = input;
  const request = validateIssueRequest(body, deps.settings, now());

  const flavor = await deps.kube.getFlavorClass(request.flavorClassName);
  if (!flavor || flavor.metadata.deletionTimestamp) {
    throw new IssuerError(
      'NotFound',
      `FlavorClass '${request.flavorClassName}' not found: create it or check --flavor (flavorClassName)`,
    );
  }
  // A flavor that requires a measured boot state is earned only through a TPM (ADR 0014).
  // Bound by an EK certificate: a bare public key may be a software key, which quotes anything.
  if (flavor.spec.measuredBoot && request.attestation?.ekCertificate === undefined) {
    throw new IssuerError(
      'InvalidRequest',
      `invalid request: attestation.ekCertificate is required: FlavorClass '${request.flavorClassName}' requires a measured boot state (measuredBoot), which only a TPM a manufacturer vouches for can show`,
      [
        {
          field: 'attestation.ekCertificate',
          message: `is required by FlavorClass '${request.flavorClassName}' (measuredBoot)`,
        },
      ],
    );
  }
  const ring = await deps.keyRing();
  const { facts, signatures } = await readJoinFacts(deps);
  if (deps.settings.discovery === 'token') {
    const full = clusterInfoFullReason(signatures, deps.settings.maxClusterInfoSignatures);
    if (full) throw new IssuerError('Unavailable', full);
  }

  const spec: FlavoredTokenInput['spec'] = {
    flavorClassName: request.flavorClassName,
    maxUses: request.maxUses,
    // Absolute, in its final form from the first write: the printer columns, the issuer's views
    // and the controller read it from the spec, and the Secret expires at exactly this second.
    expiresAt:
      request.expiresAt ??
      rfc3339(wholeSeconds(tokenExpiry({ ttl: request.ttl ?? deps.settings.defaultTtl }, now()))),
    ...(request.nodeName !== undefined ? { nodeName: request.nodeName } : {}),
    ...(request.nodeNamePattern !== undefined ? { nodeNamePattern: request.nodeNamePattern } : {}),
    ...(request.description !== undefined ? { description: request.description } : {}),
    ...(request.attestation !== undefined
      ? {
          attestation: await tokenAttestation(
            request.attestation,
            deps.settings.attestation,
            attestationFilesOf(deps),
            now(),
          ),
        }
      : {}),
  };
  const annotations = {
    ...(requestedBy ? { [REQUESTED_BY_ANNOTATION]: requestedBy.slice(0, 1024) } : {}),
    ...(owner ? { [OWNER_ANNOTATION]: owner } : {}),
  };
  const issuerCaPem =
    request.attestation !== undefined ? await attestationFilesOf(deps).issuerCaPem() : undefined;
  return { request, spec, annotations, ring, facts, issuerCaPem, now };
}

/**
 * Seals the attestation facts this issuance established on the record it just made (a write of
 * its own: the seal covers the record's uid, known only now). The attestation routes and the
 * controller believe a record's attestation facts only with this seal (attestation-seal.ts).
 */
export async function sealRecord(
  deps: Pick<IssuanceDeps, 'kube'>,
  record: FlavoredToken,
  key: HmacKey,
): Promise<FlavoredToken> {
  const facts = sealedFactsOf(record);
  if (!facts) return record;
  const seal = sealAttestation(key, facts);
  if (record.metadata.annotations?.[ATTESTATION_SEAL_ANNOTATION] === seal) return record;
  return deps.kube.annotateFlavoredToken(record.metadata.name ?? '', { [ATTESTATION_SEAL_ANNOTATION]: seal });
}

/**
 * The join material of a token bound to a TPM: no secret in it, only its token ID and where the
 * machine proves itself (ADR 0014).
 */
export function renderAttestedMaterial(
  deps: Pick<IssuanceDeps, 'settings'>,
  prepared: Pick<PreparedIssuance, 'facts' | 'issuerCaPem'>,
  tokenId: string,
  expiresAt: Date,
): JoinMaterial {
  const { url } = deps.settings.attestation;
  if (!url)
    throw new IssuerError('InvalidRequest', 'attested joins need the issuer started with --attestation-url');
  const { facts, issuerCaPem } = prepared;
  return renderAttestedJoinMaterial({
    apiServerEndpoint: facts.apiServerEndpoint,
    caCertHash: facts.caCertHash,
    caCertPem: facts.caCertPem,
    discovery: deps.settings.discovery,
    discoveryKubeconfigPath: deps.settings.discoveryKubeconfigPath,
    tokenId,
    expiresAt,
    issuerUrl: url,
    ...(issuerCaPem !== undefined ? { issuerCaPem } : {}),
    ...(deps.settings.quarantineTaint ? {} : { quarantineTaint: null }),
  });
}

/** The join material for `token` and its flavor token, expiring at `expiresAt`. */
export function renderMaterial(
  deps: Pick<IssuanceDeps, 'settings'>,
  facts: ClusterJoinFacts,
  token: BootstrapToken,
  flavorToken: Secret,
  expiresAt: Date,
): JoinMaterial {
  return renderJoinMaterial({
    apiServerEndpoint: facts.apiServerEndpoint,
    caCertHash: facts.caCertHash,
    caCertPem: facts.caCertPem,
    discovery: deps.settings.discovery,
    discoveryKubeconfigPath: deps.settings.discoveryKubeconfigPath,
    token,
    flavorToken,
    expiresAt,
    ...(deps.settings.quarantineTaint ? {} : { quarantineTaint: null }),
  });
}

/** A request without `attestation` gets a plain token: its material carries the two tokens. */
export async function issueToken(
  deps: IssuanceDeps,
  input: IssueInput & { attestation?: undefined },
): Promise<PlainIssuedToken>;
export async function issueToken(deps: IssuanceDeps, input: IssueInput): Promise<IssuedToken>;
export async function issueToken(deps: IssuanceDeps, input: IssueInput): Promise<IssuedToken> {
  const prepared = await prepareIssuance(deps, input);
  const { request, spec, annotations, ring, facts, now } = prepared;
  for (let attempt = 1; ; attempt++) {
    const token = generateBootstrapToken(deps.randomBytes ?? cryptoRandomBytes);
    try {
      if (spec.attestation) {
        const { name, recordUid, material } = await writeTokenObjects(deps, token, spec, annotations, now, {
          render: (expiresAt) => renderAttestedMaterial(deps, prepared, token.id, expiresAt),
          secret: false,
          seal: ring.active,
        });
        return {
          attested: true,
          name,
          recordUid,
          tokenId: token.id,
          expiresAt: material.expiresAt,
          material,
        };
      }
      const flavorToken = deriveFlavorToken(ring.active, token.id, request.flavorClassName);
      const { name, recordUid, material } = await writeTokenObjects(deps, token, spec, annotations, now, {
        render: (expiresAt) => renderMaterial(deps, facts, token, flavorToken, expiresAt),
        secret: true,
      });
      return {
        attested: false,
        name,
        recordUid,
        tokenId: token.id,
        expiresAt: material.expiresAt,
        material,
        bootstrapToken: token,
        flavorToken,
      };
    } catch (error) {
      // An existing FlavoredToken or Secret holds this token ID: draw another one.
      if (!(error instanceof TokenIdTaken)) throw error;
      if (attempt >= MAX_ATTEMPTS) throw new IssuerError('Conflict', 'could not find a free token ID: retry');
    }
  }
}

/**
 * The last cluster-info seen and what it yielded: parsing the CA certificate for its hash was
 * a tenth of the issuer's CPU per token (bench P3 profile), and cluster-info rarely changes.
 */
let lastJoinFacts: { kubeconfig: string; endpoint: string | undefined; facts: ClusterJoinFacts } | undefined;

async function readJoinFacts(
  deps: Pick<IssuanceDeps, 'kube' | 'settings'>,
): Promise<{ facts: ClusterJoinFacts; signatures: number }> {
  const { kubeconfig, signatures } = await deps.kube.readClusterInfo();
  const endpoint = deps.settings.apiServerEndpoint;
  if (lastJoinFacts?.kubeconfig === kubeconfig && lastJoinFacts.endpoint === endpoint)
    return { facts: lastJoinFacts.facts, signatures };
  try {
    const facts = clusterJoinFacts(kubeconfig, endpoint);
    lastJoinFacts = { kubeconfig, endpoint, facts };
    return { facts, signatures };
  } catch (error) {
    throw new IssuerError('Internal', (error as Error).message);
  }
}

/** What a machine needs installed once to join this cluster by file discovery: no secret. */
interface DiscoveryInfo {
  /** How issued JoinConfigurations discover the API server. */
  discovery: DiscoveryMode;
  apiServerEndpoint: string;
  caCertHash: string;
  /** The discovery kubeconfig (the cluster CA and the API server). */
  kubeconfig: string;
  /** Where issued JoinConfigurations expect it. */
  kubeconfigPath: string;
}

export async function discoveryInfo(deps: Pick<IssuanceDeps, 'kube' | 'settings'>): Promise<DiscoveryInfo> {
  const { facts } = await readJoinFacts(deps);
  return {
    discovery: deps.settings.discovery,
    apiServerEndpoint: facts.apiServerEndpoint,
    caCertHash: facts.caCertHash,
    kubeconfig: renderDiscoveryKubeconfig(facts),
    kubeconfigPath: deps.settings.discoveryKubeconfigPath,
  };
}

class TokenIdTaken extends Error {}

async function writeTokenObjects(
  deps: IssuanceDeps,
  token: BootstrapToken,
  spec: FlavoredTokenInput['spec'],
  annotations: Record<string, string>,
  now: () => Date,
  /**
   * The material, and whether the token's bootstrap Secret is made now (not for an attested token,
   * whose record is sealed instead, with this key).
   */
  output: { render: (expiresAt: Date) => JoinMaterial; secret: boolean; seal?: HmacKey },
): Promise<{ name: string; recordUid: string; material: JoinMaterial }> {
  const name = flavoredTokenName(token.id);
  let record: FlavoredToken;
  try {
    record = await deps.kube.createFlavoredToken(tokenRecord(token.id, spec, annotations));
  } catch (error) {
    if (isAlreadyExists(error)) throw new TokenIdTaken();
    throw error;
  }

  let secretCreated = false;
  try {
    // Two writes and a read (ADR 0015): no status write (the controller writes none either until
    // something happens to the token) and no issued mark.
    // Rendered before the Secret exists: if the material cannot be made, the rollback leaves nothing.
    const expiresAt = recordExpiry(record, spec, now);
    const material = output.render(expiresAt);
    if (output.seal) await sealRecord(deps, record, output.seal);
    if (output.secret) {
      await deps.kube.createBootstrapSecret(bootstrapSecretRequest(deps, token, record, expiresAt));
      secretCreated = true;
      // The record read back after its Secret (a quorum read): a revocation or deletion that
      // landed before this read gets no answer and the rollback deletes the Secret (the
      // revocation's own deletes may have run before it existed); one landing after it deletes
      // the Secret itself (revokeToken deletes after setting spec.revoked). Without a Secret
      // (a token bound to a TPM) the material holds no secret, and attestation checks the record.
      const withdrawn = withdrawal(await deps.kube.getFlavoredToken(name), record.metadata.uid);
      if (withdrawn) throw withdrawnWhileIssuing(name, withdrawn);
    }
    return { name, recordUid: record.metadata.uid ?? '', material };
  } catch (error) {
    // Roll back so that a failed issuance leaves nothing: the Secret (if made) and the record
    // (its revocation finalizer released: the Secret it guards is gone and no node used it).
    // If the rollback fails too, the record stays until it expires: no node holds its secret
    // (it was never answered), and a Secret it owns goes with it or at its expiry.
    if (secretCreated) await deleteSecretTwice(deps, token.id);
    await deps.kube.deleteFlavoredToken(name, record.metadata.uid ?? '').catch(() => undefined);
    if (isAlreadyExists(error)) throw new TokenIdTaken();
    throw error;
  }
}

/** A rollback's Secret delete, tried once more on failure: one left behind lives until expiry. */
async function deleteSecretTwice(deps: Pick<IssuanceDeps, 'kube'>, tokenId: string): Promise<void> {
  for (let attempt = 1; attempt <= 2; attempt++) {
    try {
      await deps.kube.deleteBootstrapSecret(tokenId);
      return;
    } catch {
      // Tried again once; the original error is what the caller hears.
    }
  }
}

/**
 * Marks `record` issued, on the version read: a 409 (the controller's status write, a label) or
 * 404 re-reads it and tries again on the fresh version, unless the record was withdrawn (revoked,
 * being deleted, gone or replaced): then nothing is marked and the reason is returned. Marked by a
 * concurrent attempt at the same record (an idempotent retry) counts as marked. Since each mark is
 * conditioned on a version that was read as issuable, a mark never lands on a withdrawn record.
 */
export async function markIssuedUnlessWithdrawn(
  deps: Pick<IssuanceDeps, 'kube'>,
  record: FlavoredToken,
  at: string,
): Promise<Withdrawal | undefined> {
  const name = record.metadata.name ?? '';
  const uid = record.metadata.uid;
  let current: FlavoredToken | undefined = record;
  for (let attempt = 1; ; attempt++) {
    const why = withdrawal(current, uid);
    if (why !== undefined) return why;
    if (current === undefined) return 'gone'; // (withdrawal says so; this tells the compiler)
    if (current.metadata.annotations?.[ISSUED_ANNOTATION] !== undefined) return undefined;
    try {
      await deps.kube.markFlavoredTokenIssued(name, at, current.metadata.resourceVersion);
      return undefined;
    } catch (error) {
      if (!(error instanceof KubeError && (error.status === 409 || error.status === 404))) throw error;
      if (attempt >= MAX_MARK_ATTEMPTS) {
        throw new IssuerError(
          'Unavailable',
          `FlavoredToken '${name}' kept changing while it was being marked issued: retry`,
        );
      }
    }
    current = await deps.kube.getFlavoredToken(name);
  }
}

/** The answer to an issuance (without Idempotency-Key) whose record was withdrawn meanwhile. */
function withdrawnWhileIssuing(name: string, why: Withdrawal): IssuerError {
  const what = why === 'revoked' ? 'revoked' : 'deleted';
  return new IssuerError(
    'Conflict',
    `token '${name}' was ${what} while it was being issued: nothing was issued (request a new token if you still need one)`,
  );
}

/** The FlavoredToken an issuance creates: its record, never a secret. */
export function tokenRecord(
  tokenId: string,
  spec: FlavoredTokenInput['spec'],
  annotations: Record<string, string>,
): FlavoredTokenInput {
  return {
    apiVersion: API_VERSION,
    kind: FLAVORED_TOKEN_KIND,
    metadata: {
      name: flavoredTokenName(tokenId),
      labels: { [TOKEN_ID_LABEL]: tokenId },
      finalizers: [TOKEN_FINALIZER],
      ...(Object.keys(annotations).length > 0 ? { annotations } : {}),
    },
    spec,
  };
}

/** The token's expiry, whole seconds: the controller computes the same from spec and creation time. */
export function recordExpiry(record: FlavoredToken, spec: FlavoredTokenInput['spec'], now: () => Date): Date {
  const created = record.metadata.creationTimestamp ? new Date(record.metadata.creationTimestamp) : now();
  return wholeSeconds(tokenExpiry(spec, created));
}

/** The bootstrap token Secret for `token`, owned by its record. */
export function bootstrapSecretRequest(
  deps: Pick<IssuanceDeps, 'settings'>,
  token: BootstrapToken,
  record: FlavoredToken,
  expiresAt: Date,
): BootstrapSecretRequest {
  return {
    token,
    expiration: rfc3339(expiresAt),
    authExtraGroups: deps.settings.authExtraGroups,
    description: deps.settings.secretDescription,
    owner: { name: record.metadata.name ?? '', uid: record.metadata.uid ?? '' },
    signing: deps.settings.discovery === 'token',
  };
}

function wholeSeconds(date: Date): Date {
  return new Date(Math.floor(date.getTime() / 1000) * 1000);
}

/**
 * The FlavoredToken for a reference: a token ID (6 characters, looked up by label) or the
 * FlavoredToken's name. undefined when there is none.
 */
export async function findToken(
  deps: Pick<IssuanceDeps, 'kube'>,
  ref: string,
): Promise<FlavoredToken | undefined> {
  if (TOKEN_ID_PATTERN.test(ref)) {
    return (
      (await deps.kube.findFlavoredTokenByTokenId(ref)) ??
      (await deps.kube.getFlavoredToken(flavoredTokenName(ref)))
    );
  }
  if (!isDnsSubdomain(ref)) {
    throw new IssuerError(
      'InvalidRequest',
      'a token reference is a token ID (6 characters) or a FlavoredToken name',
      [{ field: 'id', message: 'must be a token ID or a FlavoredToken name' }],
    );
  }
  return deps.kube.getFlavoredToken(ref);
}

/** findToken, or IssuerError NotFound. */
async function getToken(deps: Pick<IssuanceDeps, 'kube'>, ref: string): Promise<FlavoredToken> {
  const token = await findToken(deps, ref);
  if (!token)
    throw new IssuerError('NotFound', `token '${ref}' not found: check the ID (kubectl flavor list)`);
  return token;
}

export async function listTokens(deps: Pick<IssuanceDeps, 'kube' | 'now'>): Promise<TokenStatusView[]> {
  const now = (deps.now ?? (() => new Date()))();
  const [tokens, records] = await Promise.all([deps.kube.listFlavoredTokens(), deps.kube.listJoinRecords()]);
  return tokens.map((token) => tokenStatusView(tokenWithJoins(token, records), now));
}

/** The token's view, with what its joins' records say (ADR 0016). */
export async function tokenViewOf(
  deps: Pick<IssuanceDeps, 'kube'>,
  token: FlavoredToken,
  now: Date,
): Promise<TokenStatusView> {
  const tokenId = tokenIdOf(token);
  const records = tokenId ? await deps.kube.listJoinRecords(tokenId) : [];
  return tokenStatusView(tokenWithJoins(token, records), now);
}

/**
 * Revokes a token: its bootstrap Secret goes at once (no node can authenticate with it from now
 * on), then spec.revoked is set, then the Secret is deleted once more (see below); the controller
 * does the rest (conditions, StripNodes). Safe to repeat: a Secret already gone is fine.
 */
export async function revokeToken(
  deps: Pick<IssuanceDeps, 'kube' | 'now'>,
  ref: string | FlavoredToken,
): Promise<TokenStatusView> {
  const token = typeof ref === 'string' ? await getToken(deps, ref) : ref;
  const name = token.metadata.name ?? '';
  const tokenId = tokenIdOf(token);
  if (tokenId) await deps.kube.deleteBootstrapSecret(tokenId);
  if (token.spec.revoked) return tokenViewOf(deps, token, (deps.now ?? (() => new Date()))());
  let revoked: FlavoredToken;
  try {
    revoked = await deps.kube.markFlavoredTokenRevoked(name);
  } catch (error) {
    if (error instanceof KubeError && error.status === 404) {
      throw new IssuerError('NotFound', `token '${name}' not found: it was deleted meanwhile`);
    }
    throw error;
  }
  // Once more, now that the record says revoked: an issuance still under way may have made the
  // Secret after the first delete and read the record back before spec.revoked landed. Any
  // issuance reading it from here on finds it revoked, deletes its Secret and answers nothing.
  if (tokenId) await deps.kube.deleteBootstrapSecret(tokenId);
  return tokenViewOf(deps, revoked, (deps.now ?? (() => new Date()))());
}

export function tokenStatusView(token: FlavoredToken, now: Date): TokenStatusView {
  const lifecycle = tokenLifecycle(token, now);
  const uses = token.status?.uses ?? 0;
  const maxUses = token.spec.maxUses;
  const expiresAt = expiryText(token);
  const expired = expiresAt !== null && Date.parse(expiresAt) <= now.getTime();
  const state = token.spec.revoked
    ? 'Revoked'
    : expired
      ? 'Expired'
      : maxUses > 0 && uses >= maxUses
        ? 'Consumed'
        : 'Active';
  return {
    id: token.metadata.name ?? '',
    tokenID: tokenIdOf(token) ?? null,
    flavor: token.spec.flavorClassName,
    expiresAt,
    maxUses,
    uses,
    revoked: token.spec.revoked,
    state,
    nodeName: token.spec.nodeName ?? null,
    nodeNamePattern: token.spec.nodeNamePattern ?? null,
    description: token.spec.description ?? null,
    createdAt: token.metadata.creationTimestamp ?? null,
    phase: lifecycle.phase,
    reason: lifecycle.reason,
    message: lifecycle.message,
    phaseSince: lifecycle.since,
    nodes: lifecycle.nodes,
    conditions: (token.status?.conditions ?? []).map(
      ({ type, status, reason, message, lastTransitionTime }) => ({
        type,
        status,
        reason,
        message,
        lastTransitionTime,
      }),
    ),
    attestation: attestationView(token),
  };
}
