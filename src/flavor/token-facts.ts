// A FlavoredToken as every part reads it, the one reader (pure): its public token ID, its expiry,
// the facts the decisions take (with the joins its records carry, ADR 0016), its proofs (ADR
// 0014), whether it reserves its one node name. The controller, the issuer and `kubectl flavor`
// read a token through these alone.
import { tokenProofs } from './attestation-proofs.ts';
import { ATTESTATION_SEAL_ANNOTATION, sealedFactsOf } from './attestation-seal.ts';
import type { JoinSecretFacts } from './bootstrap-secret.ts';
import { TOKEN_ID_PATTERN } from './bootstrap-token.ts';
import { bindingOf } from './node-name-claim.ts';
import type { FlavoredToken, NodeNameClaim, TokenBinding } from './resources.ts';
import { recordExpiresAt, TOKEN_ID_LABEL } from './resources.ts';
import { rfc3339 } from './rfc3339.ts';
import type { TokenFacts } from './verdict.ts';

/** The bootstrap token's public ID (its label, or the status of an older record), if a valid one. */
export function tokenIdOf(token: Pick<FlavoredToken, 'metadata' | 'status'>): string | undefined {
  const id = token.metadata.labels?.[TOKEN_ID_LABEL] ?? token.status?.tokenID;
  return id !== undefined && TOKEN_ID_PATTERN.test(id) ? id : undefined;
}

/**
 * When the token expires: its status's, or what its spec says from its creation (`now` stands in
 * for a record not created yet).
 */
export function tokenExpiresAt(token: FlavoredToken, now: Date = new Date()): Date {
  return recordExpiresAt(token, now);
}

/** The expiry as readers show it (RFC 3339, whole seconds); null when the spec cannot say. */
export function expiryText(token: FlavoredToken): string | null {
  if (token.status?.expiresAt) return token.status.expiresAt;
  if (!token.metadata.creationTimestamp) return token.spec.expiresAt ?? null;
  try {
    return rfc3339(tokenExpiresAt(token));
  } catch {
    return null;
  }
}

/** The latest proof of a token bound to a TPM (the issuer's record, ADR 0014), if any. */
export function latestProofOf(token: FlavoredToken): number | undefined {
  if (token.spec.attestation === undefined) return undefined;
  return tokenProofs(token).latest?.number;
}

/** The joins `token` holds: the bindings its records carry (ADR 0016). */
export function joinsOf(token: FlavoredToken, records: Iterable<NodeNameClaim>): TokenBinding[] {
  const joins: TokenBinding[] = [];
  for (const record of records) {
    if (record.spec.holder?.tokenUID !== token.metadata.uid) continue;
    const binding = bindingOf(record);
    if (binding) joins.push(binding);
  }
  return joins;
}

/**
 * The joins that counted the token's uses (its ledger, status.bindings), each with what its record
 * says of it (ADR 0016): the ledger is written with the use, so no join is missed however the
 * record's watch lags; one whose record is not (or no longer) its own shows no registration.
 */
export function ledgerJoins(
  token: FlavoredToken,
  recordOf: (nodeName: string) => NodeNameClaim | undefined,
): (JoinSecretFacts & { nodeName: string; csrName: string })[] {
  return (token.status?.bindings ?? []).map((entry) => {
    const record = recordOf(entry.nodeName);
    const own = (c: NodeNameClaim | undefined) =>
      c !== undefined && c.spec.holder?.tokenUID === token.metadata.uid;
    const join = own(record) ? record?.status?.join : undefined;
    const same = join?.csrName === entry.csrName ? join : undefined;
    return {
      nodeName: entry.nodeName,
      csrName: entry.csrName,
      boundAt: entry.boundAt,
      ...(same?.registeredAt ? { registeredAt: same.registeredAt } : {}),
      ...(same?.secretDeleted ? { secretDeleted: true } : {}),
      ...(entry.attestation !== undefined ? { proof: entry.attestation } : {}),
    };
  });
}

/**
 * The token as the decisions take it. `joins`: the joins its records carry (a token's bindings
 * live on its joins' NodeNameClaims; its status keeps the ledger of uses).
 */
export function tokenFacts(token: FlavoredToken, joins: TokenBinding[] = []): TokenFacts & { uid: string } {
  const spec = token.spec;
  const sealed = sealedFactsOf({ metadata: token.metadata, spec });
  return {
    name: token.metadata.name ?? '',
    uid: token.metadata.uid ?? '',
    tokenId: tokenIdOf(token) ?? '',
    flavorClassName: spec.flavorClassName,
    maxUses: spec.maxUses ?? 1,
    nodeName: spec.nodeName,
    nodeNamePattern: spec.nodeNamePattern,
    expiresAt: tokenExpiresAt(token),
    ...(token.metadata.creationTimestamp ? { issuedAt: new Date(token.metadata.creationTimestamp) } : {}),
    revoked: spec.revoked === true,
    deleting: token.metadata.deletionTimestamp !== undefined,
    stripNodesOnRevoke: spec.revocationPolicy === 'StripNodes',
    bindings: joins,
    uses: Math.max(token.status?.uses ?? 0, token.status?.bindings?.length ?? 0),
    rejoin: spec.attestation?.allowRejoin === true && spec.nodeName !== undefined,
    attested: spec.attestation !== undefined,
    ...(sealed
      ? {
          attestationSeal: { facts: sealed, seal: token.metadata.annotations?.[ATTESTATION_SEAL_ANNOTATION] },
          proofs: tokenProofs(token),
        }
      : {}),
  };
}

/**
 * Whether a token still reserves the one node name it was issued for (spec.nodeName): not
 * revoked, being deleted, expired, or out of uses (a rejoin token stays its machine's).
 */
export function reservesName(token: FlavoredToken, now: Date): boolean {
  const facts = tokenFacts(token);
  if (facts.nodeName === undefined || facts.revoked || facts.deleting) return false;
  if (now.getTime() >= facts.expiresAt.getTime()) return false;
  return facts.rejoin === true || facts.maxUses === 0 || facts.uses < facts.maxUses;
}
