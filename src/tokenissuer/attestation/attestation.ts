// The attested join's two requests (ADR 0014), as the issuer carries them out. A node has no
// credential but its TPM, so these are unauthenticated (rate limited per address, routes in
// attestation-routes.ts); every decision is made from the FlavoredToken as just read from the API
// server (src/flavor/attestation-decision.ts), never from memory.
//
//   Both: the record's attestation facts must be sealed by the issuer (attestation-seal.ts: a
//     record written directly earns nothing), and an EK certificate it is bound by must still
//     chain to a trusted, unrevoked manufacturer root (the CAs and CRLs configured now).
//   challenge: the machine's EK must be the token's; its AK must be a restricted signing key of
//     that TPM; the answer is a credential for that AK under that EK (MakeCredential) and a
//     ticket that says how many proofs the record counted. Nothing is written.
//   answer: the proof must show the credential's secret, and no proof may have been recorded since
//     the challenge; then, in this order,
//     1. the record counts one more proof (resourceVersion precondition): of two answers to
//        challenges made before it, only one lands, and a replayed answer earns nothing;
//     2. the bootstrap Secret is made (replacing one an earlier, unused attestation made), expiring
//        after the join window;
//     3. the record is read again: revoked or deleting meanwhile, the Secret goes and the answer
//        is a 409 (a revocation that lands after this read deletes the Secret itself, as it does
//        for a plain issuance, issue.ts revokeToken);
//     4. the answer: the bootstrap token and flavor token sealed under the credential's secret.
//   A crash after 1 leaves a used ticket and at most a Secret nobody knows: the node asks again.
import { createHash, randomBytes as cryptoRandomBytes } from 'node:crypto';
import { z } from 'zod';
import {
  ATTESTED_ANNOTATION,
  type AttestationRefusal,
  badProof,
  ekCertificateRefused,
  ekMismatch,
  notAttested,
  proofsOf,
  replayRefusal,
  ticketRefusal,
  tokenRefusal,
  unsealed,
} from '../../flavor/attestation-decision.ts';
import {
  credentialSecret,
  decodeTicket,
  encodeTicket,
  newTicket,
  proofHolds,
  type SealedJoinSecrets,
  sealJoinSecrets,
  ticketKey,
} from '../../flavor/attestation-exchange.ts';
import {
  ATTESTATION_SEAL_ANNOTATION,
  attestationSealHolds,
  sealedFactsOf,
} from '../../flavor/attestation-seal.ts';
import {
  formatBootstrapToken,
  generateBootstrapToken,
  type RandomBytes,
  TOKEN_ID_PATTERN,
} from '../../flavor/bootstrap-token.ts';
import { deriveFlavorToken } from '../../flavor/flavor-token.ts';
import type { KeyRing } from '../../flavor/keyring.ts';
import { type FlavoredToken, type MeasuredBoot, recordExpiresAt } from '../../flavor/resources.ts';
import { rfc3339 } from '../../flavor/rfc3339.ts';
import { Secret } from '../../flavor/secret.ts';
import { attestationKeyProblems } from '../../flavor/tpm/attestation-key.ts';
import { credentialBlobFile } from '../../flavor/tpm/credential-blob-file.ts';
import { verifyEkCertificate } from '../../flavor/tpm/ek-certificate.ts';
import { ekSpkiDer } from '../../flavor/tpm/ek-identity.ts';
import { makeCredential } from '../../flavor/tpm/make-credential.ts';
import { quoteProblems } from '../../flavor/tpm/quote.ts';
import { parseTpm2bPublic, type TpmPublic } from '../../flavor/tpm/tpm-public.ts';
import { withdrawal } from '../../flavor/withdrawal.ts';
import type { TokenKube } from '../../kube/tokens.ts';
import { isAlreadyExists, KubeError } from '../../runtime/kube-error.ts';
import type { IssuanceSettings } from '../config.ts';
import { IssuerError } from '../errors.ts';
import { attestationFilesOf, bootstrapSecretRequest, flavoredTokenName } from '../issuance/issue.ts';
import { invalidRequest } from '../request.ts';
import type { AttestationFiles } from './attestation-files.ts';
import { involved, type RefusalDeps, refused } from './attestation-refusals.ts';

const MAX_ANNOTATE_ATTEMPTS = 5;

export interface AttestationDeps extends RefusalDeps {
  kube: TokenKube;
  keyRing: () => Promise<KeyRing>;
  settings: IssuanceSettings;
  randomBytes?: RandomBytes;
  /** The manufacturer CAs and CRLs (watched files); default: one shared per path. */
  attestationFiles?: AttestationFiles;
}

const base64 = (max: number) =>
  z
    .string()
    .max(max)
    .regex(/^[A-Za-z0-9+/]+={0,2}$/, { message: 'must be base64' });

export const ChallengeRequestSchema = z.strictObject({
  /** The EK's TPM2B_PUBLIC, as `tpm2_createek -u` writes it, base64. */
  ekPublic: base64(2048).meta({ description: "The TPM's EK, TPM2B_PUBLIC (tpm2_createek -u), base64." }),
  /** The AK's TPM2B_PUBLIC, as `tpm2_createak -u` writes it, base64. */
  akPublic: base64(2048).meta({
    description: 'An attestation key, TPM2B_PUBLIC (tpm2_createak -u), base64.',
  }),
});

/** A TPM quote of the PCRs the challenge asked for (a FlavorClass with measuredBoot). */
const QuoteSchema = z.strictObject({
  akPublic: base64(2048).meta({ description: 'The AK that signed the quote, TPM2B_PUBLIC, base64.' }),
  message: base64(1024).meta({ description: 'TPMS_ATTEST (tpm2_quote -m), base64.' }),
  signature: base64(1024).meta({ description: 'TPMT_SIGNATURE (tpm2_quote -s), base64.' }),
  pcrValues: base64(2048).meta({ description: 'The PCR values, in index order (tpm2_pcrread -o), base64.' }),
});

export const AnswerRequestSchema = z.strictObject({
  ticket: z.string().max(1024).meta({ description: 'The ticket the challenge answered.' }),
  quote: QuoteSchema.optional().meta({
    description: "The quote the challenge asked for (its 'quote' was not null).",
  }),
  proof: z
    .string()
    .regex(/^[0-9a-f]{64}$/, { message: 'must be 64 lowercase hex digits' })
    .meta({ description: 'HMAC-SHA256 under the recovered secret of "proof:" and the ticket, hex.' }),
});

export interface ChallengeResponse {
  ticket: string;
  /** What `tpm2_activatecredential -i` reads, base64. */
  credential: string;
  deadline: string;
  /** The flavor requires a measured boot state: quote these PCRs over this nonce with the AK. */
  quote: { pcrs: string; nonce: string } | null;
}

export interface AnswerResponse extends SealedJoinSecrets {
  /** When the minted bootstrap token stops working: `kubeadm join` must have run by then. */
  joinBy: string;
}

function invalid(message: string): IssuerError {
  return new IssuerError('InvalidRequest', message);
}

function parseBody<T>(schema: z.ZodType<T>, body: unknown): T {
  const parsed = schema.safeParse(body);
  if (!parsed.success) throw invalidRequest(parsed.error);
  return parsed.data;
}

function parseKey(text: string, what: string): TpmPublic {
  try {
    return parseTpm2bPublic(Buffer.from(text, 'base64'));
  } catch (error) {
    throw invalid(`${what} is not a TPM2B_PUBLIC: ${(error as Error).message}`);
  }
}

/** The EK's identity as the ticket's secret is bound to it: SHA-256 of its SubjectPublicKeyInfo. */
function ekDigest(token: FlavoredToken): string {
  return createHash('sha256').update(ekSpkiOf(token)).digest('hex');
}

/**
 * The token, if it may be attested now: bound to a TPM by the issuer (sealed), live, unexpired,
 * unused (or re-joinable); else the refusal.
 */
async function usableToken(
  deps: AttestationDeps,
  token: FlavoredToken | undefined,
  tokenId: string,
  now: Date,
  ring: KeyRing,
): Promise<FlavoredToken> {
  const unusable = tokenRefusal(token, tokenId, now);
  if (unusable || !token) throw await refused(deps, token, unusable ?? notAttested(tokenId));
  const facts = sealedFactsOf(token);
  if (!facts || !attestationSealHolds(ring, facts, token.metadata.annotations?.[ATTESTATION_SEAL_ANNOTATION]))
    throw await refused(deps, token, unsealed(tokenId));
  return token;
}

/**
 * Why the EK certificate the token is bound by does not vouch for its EK now (the manufacturer
 * CAs and CRLs configured now: a root removed or an intermediate revoked since the issuance).
 */
async function ekCertificateRefusal(
  deps: AttestationDeps,
  token: FlavoredToken,
  tokenId: string,
  now: Date,
): Promise<AttestationRefusal | undefined> {
  const bound = token.spec.attestation;
  if (bound?.ekCertificateIssuer === undefined && bound?.ekCertificate === undefined) return undefined;
  if (bound.ekCertificate === undefined)
    return ekCertificateRefused(tokenId, 'the token does not hold the certificate to check');
  const trust = await attestationFilesOf(deps).manufacturerTrust();
  if (!trust)
    return ekCertificateRefused(
      tokenId,
      'no TPM manufacturer CAs are configured (--tpm-manufacturer-ca-file)',
    );
  const verdict = await verifyEkCertificate(bound.ekCertificate, trust, now);
  if (!verdict.ok) return ekCertificateRefused(tokenId, verdict.reason);
  if (!verdict.ekSpkiDer.equals(ekSpkiOf(token)))
    return ekCertificateRefused(tokenId, "its key is not the token's EK");
  return undefined;
}

async function readToken(deps: AttestationDeps, tokenId: string): Promise<FlavoredToken | undefined> {
  if (!TOKEN_ID_PATTERN.test(tokenId)) return undefined;
  return deps.kube.getFlavoredToken(flavoredTokenName(tokenId));
}

export async function challenge(
  deps: AttestationDeps,
  tokenId: string,
  body: unknown,
): Promise<ChallengeResponse> {
  const request = parseBody(ChallengeRequestSchema, body);
  const now = deps.now();
  const ring = await deps.keyRing();
  const record = await usableToken(deps, await readToken(deps, tokenId), tokenId, now, ring);
  const ek = parseKey(request.ekPublic, 'ekPublic');
  if (!ekSpkiDer({ publicKey: ek.publicKey }).equals(ekSpkiOf(record)))
    throw await refused(deps, record, ekMismatch(tokenId));
  const certificate = await ekCertificateRefusal(deps, record, tokenId, now);
  if (certificate) throw await refused(deps, record, certificate);
  const ak = parseKey(request.akPublic, 'akPublic');
  const problems = attestationKeyProblems(ak);
  if (problems.length > 0) throw invalid(`akPublic is not an attestation key: ${problems.join('; ')}`);

  const ticket = newTicket(
    {
      record: record.metadata.uid ?? '',
      key: ring.active.id,
      issuedAt: now.getTime(),
      deadline: now.getTime() + deps.settings.attestation.challengeSeconds * 1000,
      akName: ak.name.toString('hex'),
      // Readable: usableToken refused a record whose attested annotation is not the issuer's.
      proofs: proofsOf(record) ?? 0,
    },
    deps.randomBytes ?? cryptoRandomBytes,
  );
  const secret = credentialSecret(ring.active, ticket, ekDigest(record));
  let made: ReturnType<typeof makeCredential>;
  try {
    made = makeCredential({ ekPublic: ek, akName: ak.name, credential: Buffer.from(secret.reveal(), 'hex') });
  } catch (error) {
    // The machine's EK public area names parameters no TPM's standard EK has (its key matched).
    throw invalid(`ekPublic cannot protect a credential: ${(error as Error).message}`);
  }
  deps.count?.('challenged');
  const encoded = encodeTicket(ticket);
  const measured = (await deps.kube.getFlavorClass(record.spec.flavorClassName))?.spec.measuredBoot;
  return {
    ticket: encoded,
    credential: credentialBlobFile(made).toString('base64'),
    deadline: rfc3339(new Date(ticket.deadline)),
    quote: measured ? { pcrs: pcrSelection(measured), nonce: quoteNonce(encoded).toString('hex') } : null,
  };
}

/** `tpm2_quote -l` / `tpm2_pcrread` syntax for the flavor's PCRs: sha256:0,7. */
function pcrSelection(measured: MeasuredBoot): string {
  return `sha256:${measured.pcrs
    .map((p) => p.index)
    .sort((a, b) => a - b)
    .join(',')}`;
}

/** The quote's qualifying data: bound to this ticket, so a quote made for another challenge fails. */
function quoteNonce(ticketText: string): Buffer {
  return createHash('sha256').update(`nodeflavor/v1/quote:${ticketText}`).digest();
}

/**
 * Why the machine's measured state does not earn the flavor, when the flavor requires one: read
 * fresh, so a requirement added since the challenge applies (fail closed).
 */
async function measuredStateRefusal(
  deps: AttestationDeps,
  token: FlavoredToken,
  tokenId: string,
  request: z.output<typeof AnswerRequestSchema>,
  akName: string,
): Promise<AttestationRefusal | undefined> {
  const flavor = await deps.kube.getFlavorClass(token.spec.flavorClassName);
  if (!flavor)
    return {
      status: 409,
      reason: 'FlavorClassNotFound',
      message: `FlavorClass '${token.spec.flavorClassName}' of token ${tokenId} does not exist: nothing to join as`,
      record: false,
    };
  const measured = flavor.spec.measuredBoot;
  if (!measured) return undefined;
  const mismatch = (problem: string): AttestationRefusal => ({
    status: 403,
    reason: 'PCRMismatch',
    message: `token ${tokenId}'s flavor requires a measured boot state (${pcrSelection(measured)}): ${problem}`,
    record: true,
  });
  if (!request.quote) return mismatch('the answer carries no quote');
  const ak = parseKey(request.quote.akPublic, 'quote.akPublic');
  if (ak.name.toString('hex') !== akName) return mismatch("the quote's AK is not the challenge's");
  const problems = quoteProblems({
    ak,
    message: Buffer.from(request.quote.message, 'base64'),
    signature: Buffer.from(request.quote.signature, 'base64'),
    values: Buffer.from(request.quote.pcrValues, 'base64'),
    nonce: quoteNonce(request.ticket),
    required: measured.pcrs,
  });
  return problems.length > 0 ? mismatch(problems.slice(0, 3).join('; ')) : undefined;
}

function ekSpkiOf(token: FlavoredToken): Buffer {
  return ekSpkiDer({ publicKeyPem: token.spec.attestation?.ekPublicKey ?? '' });
}

export async function answer(deps: AttestationDeps, tokenId: string, body: unknown): Promise<AnswerResponse> {
  const request = parseBody(AnswerRequestSchema, body);
  const ticket = decodeTicket(request.ticket);
  if (!ticket) throw invalid('invalid request: ticket is not a ticket this issuer made');
  const now = deps.now();
  const ring = await deps.keyRing();
  const read = await usableToken(deps, await readToken(deps, tokenId), tokenId, now, ring);
  // The ticket's timeliness is judged only once the proof holds: a ticket edited or forged by
  // someone without the TPM is a BadProof, never a recorded LateAnswer or Replayed.
  if (ticket.record !== read.metadata.uid) {
    const stale = ticketRefusal(read, tokenId, ticket, now);
    if (stale) throw await refused(deps, read, stale);
  }
  const key = ticketKey(ring, ticket);
  if (!key)
    throw await refused(deps, read, {
      status: 409,
      reason: 'StaleTicket',
      message: `the challenge for token ${tokenId} was made under a key the issuer no longer holds: ask for a new one`,
      record: false,
    });
  const secret = credentialSecret(key, ticket, ekDigest(read));
  if (!proofHolds(secret, request.ticket, request.proof)) throw await refused(deps, read, badProof(tokenId));
  const late = ticketRefusal(read, tokenId, ticket, now);
  if (late) throw await refused(deps, read, late);
  const certificate = await ekCertificateRefusal(deps, read, tokenId, now);
  if (certificate) throw await refused(deps, read, certificate);
  const measuredState = await measuredStateRefusal(deps, read, tokenId, request, ticket.akName);
  if (measuredState) throw await refused(deps, read, measuredState);

  const record = await useTicket(deps, read, tokenId, ticket.proofs, ring);
  const expiresAt = joinDeadline(deps, record);
  const bootstrapToken = { ...generateBootstrapToken(deps.randomBytes ?? cryptoRandomBytes), id: tokenId };
  await replaceBootstrapSecret(deps, bootstrapSecretRequest(deps, bootstrapToken, record, expiresAt));
  let reread: FlavoredToken | undefined;
  try {
    reread = await deps.kube.getFlavoredToken(record.metadata.name ?? '');
  } catch (error) {
    // Not known to be live: the Secret just made goes again (nobody has its secret yet).
    await deps.kube.deleteBootstrapSecret(tokenId).catch(() => undefined);
    throw error;
  }
  const withdrawn = withdrawal(reread, record.metadata.uid);
  if (withdrawn) {
    await deps.kube.deleteBootstrapSecret(tokenId).catch(() => undefined);
    throw await refused(deps, record, {
      status: 409,
      reason: 'Revoked',
      message: `token ${tokenId} was ${withdrawn === 'revoked' ? 'revoked' : 'deleted'} while it was being attested: it earns nothing`,
      record: false,
    });
  }
  const flavorToken = deriveFlavorToken(ring.active, tokenId, record.spec.flavorClassName);
  deps.count?.('attested');
  deps.events?.emit(
    involved(record),
    'Normal',
    'Attested',
    `a machine proved it holds the TPM token ${tokenId} is bound to; its bootstrap token is valid until ${rfc3339(expiresAt)}`,
  );
  return {
    ...sealJoinSecrets(secret, {
      bootstrapToken: new Secret(formatBootstrapToken(bootstrapToken)),
      flavorToken,
    }),
    joinBy: rfc3339(expiresAt),
  };
}

/**
 * Step 1: counts this proof on the record as judged (the count the challenge saw, plus one, and
 * the time to the millisecond); a concurrent write is judged again, and a proof recorded since
 * makes this answer a replay.
 */
async function useTicket(
  deps: AttestationDeps,
  read: FlavoredToken,
  tokenId: string,
  proofsSeen: number,
  ring: KeyRing,
): Promise<FlavoredToken> {
  let record = read;
  for (let attempt = 1; ; attempt++) {
    const value = JSON.stringify({ count: proofsSeen + 1, at: deps.now().toISOString() });
    try {
      return await deps.kube.annotateFlavoredToken(
        record.metadata.name ?? '',
        { [ATTESTED_ANNOTATION]: value },
        record.metadata.resourceVersion,
      );
    } catch (error) {
      if (!(error instanceof KubeError && (error.status === 409 || error.status === 404))) throw error;
      if (attempt >= MAX_ANNOTATE_ATTEMPTS)
        throw new IssuerError(
          'Unavailable',
          `token ${tokenId} kept changing while it was being attested: retry`,
        );
    }
    const freshRecord = await usableToken(
      deps,
      await deps.kube.getFlavoredToken(record.metadata.name ?? ''),
      tokenId,
      deps.now(),
      ring,
    );
    if (freshRecord.metadata.uid !== read.metadata.uid)
      throw await refused(deps, freshRecord, {
        status: 409,
        reason: 'StaleTicket',
        message: `token ${tokenId} was re-created while it was being attested: ask for a new challenge`,
        record: false,
      });
    const replayed = replayRefusal(freshRecord, tokenId, proofsSeen);
    if (replayed) throw await refused(deps, freshRecord, replayed);
    record = freshRecord;
  }
}

/** The minted bootstrap token lives for the join window, and never past the token itself. */
function joinDeadline(deps: AttestationDeps, record: FlavoredToken): Date {
  const now = deps.now().getTime();
  const tokenEnd = recordExpiresAt(record, deps.now()).getTime();
  const end = Math.min(tokenEnd, now + deps.settings.attestation.joinWindowSeconds * 1000);
  return new Date(Math.floor(end / 1000) * 1000);
}

/** Step 2: a Secret an earlier, unused attestation made is replaced (its secret is dropped with it). */
async function replaceBootstrapSecret(
  deps: AttestationDeps,
  request: ReturnType<typeof bootstrapSecretRequest>,
): Promise<void> {
  try {
    await deps.kube.createBootstrapSecret(request);
  } catch (error) {
    if (!isAlreadyExists(error)) throw error;
    await deps.kube.deleteBootstrapSecret(request.token.id);
    await deps.kube.createBootstrapSecret(request);
  }
}
