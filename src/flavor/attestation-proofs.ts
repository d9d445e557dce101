// Each proof earns at most one join (ADR 0014, issue 32). A token bound to a TPM gets a bootstrap
// Secret only when its machine proves it holds the TPM; the issuer numbers the proofs on the record
// (attestation-decision.ts, the attested annotation). The controller records on the token's status
// which proof each binding used, and the latest proof any binding used (kept when a binding is
// released, so a deleted Node gives nothing back): a new binding needs a later proof. Decided on
// that durable state, never on whether the bootstrap Secret is gone yet: the API server keeps
// authenticating a deleted Secret's token for a while (its 10 s token cache). Pure.
import { attestedRecord } from './attestation-decision.ts';
import type { FlavoredTokenStatus } from './resources.ts';

export interface Proof {
  /** Its number: the first proof is 1. */
  number: number;
  /** When the issuer recorded it, to the millisecond. */
  at: Date;
}

/** What the token says of its proofs. */
export interface TokenProofs {
  /** The latest proof the issuer recorded (none yet, or its record is not the issuer's: none). */
  latest?: Proof;
  /** The latest proof a binding used (0: none). */
  bound: number;
}

export function tokenProofs(token: {
  metadata: { annotations?: Record<string, string> | undefined };
  status?: FlavoredTokenStatus | undefined;
}): TokenProofs {
  const record = attestedRecord(token);
  const bound = Math.max(
    token.status?.attestation?.bound ?? 0,
    ...(token.status?.bindings ?? []).map((b) => b.attestation ?? 0),
  );
  if (record === undefined || record === 'unreadable') return { bound };
  return { latest: { number: record.count, at: new Date(Date.parse(record.at)) }, bound };
}

/**
 * The proof a new join made with a CSR created at `csrCreatedAt` would use: the latest, if no
 * binding used it yet and the CSR was surely made after it. A CSR's creation time has whole
 * seconds, so its second is compared with the proof's exact time: a CSR stamped in the proof's own
 * second may have been made just before it, with the previous proof's Secret still cached by the
 * API server, and it is not this proof's (fail closed: its machine attests again).
 */
export function unusedProof(proofs: TokenProofs | undefined, csrCreatedAt: Date): number | undefined {
  const latest = proofs?.latest;
  if (!latest || latest.number <= proofs.bound) return undefined;
  return csrCreatedAt.getTime() >= latest.at.getTime() ? latest.number : undefined;
}

/** The status once a binding used `proof`: it stays used when the binding is released. */
export function withProofBound(status: FlavoredTokenStatus, proof: number | undefined): FlavoredTokenStatus {
  if (proof === undefined || (status.attestation?.bound ?? 0) >= proof) return status;
  return { ...status, attestation: { ...status.attestation, bound: proof } };
}
