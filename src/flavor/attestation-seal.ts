// Who established a token's attestation facts (ADR 0014, issue 32). A FlavoredToken can be written
// by anyone RBAC lets create one, and its spec.attestation (the EK the token is bound to, the
// manufacturer CA that vouched for it) would then be the writer's word: a software "EK" it holds
// the key of, or an ekCertificateIssuer typed by hand for a flavor that requires a measured boot.
// So the issuer seals the facts it established itself (after its caller's `use` on the flavor, and
// the EK certificate's chain) with an HMAC under the key ring, over the record's uid and every fact
// a decision rests on; the attestation routes and the controller believe only sealed facts. The
// uid makes a seal worthless on any other record, a re-created one of the same name included.
// Only a holder of the key ring can seal: the issuer, or `kubectl flavor issue` run by an
// administrator who may read it. Pure.
import { constantTimeEqual, hmacOf } from './flavor-token.ts';
import { type HmacKey, type KeyRing, keyRingKeys } from './keyring.ts';
import type { TokenAttestation } from './resources.ts';

/** Set by the issuer on a record whose spec.attestation it established: `<ring key id>.<MAC, base64url>`. */
export const ATTESTATION_SEAL_ANNOTATION = 'nodeflavor.io/attestation-seal';
const DOMAIN = 'nodeflavor/v1/attestation-seal';
const SEAL = /^([0-9a-f]{8})\.([A-Za-z0-9_-]{43})$/;

/** What a seal covers: the record and its immutable facts (spec is immutable once created). */
export interface SealedFacts {
  uid: string;
  flavorClassName: string;
  nodeName?: string | undefined;
  maxUses: number;
  attestation: TokenAttestation;
}

function mac(key: HmacKey, facts: SealedFacts): Buffer {
  const a = facts.attestation;
  return hmacOf(
    key.key,
    DOMAIN,
    facts.uid,
    facts.flavorClassName,
    facts.nodeName ?? '',
    String(facts.maxUses),
    a.ekPublicKey,
    a.ekCertificateIssuer ?? '',
    a.ekCertificate ?? '',
    a.allowRejoin ? 'rejoin' : 'once',
  );
}

export function sealAttestation(key: HmacKey, facts: SealedFacts): string {
  return `${key.id}.${mac(key, facts).toString('base64url')}`;
}

/** Whether `seal` is one the ring made for exactly these facts (constant time; a retired key counts). */
export function attestationSealHolds(ring: KeyRing, facts: SealedFacts, seal: string | undefined): boolean {
  const parsed = SEAL.exec(seal ?? '');
  if (!parsed) return false;
  const key = keyRingKeys(ring).find((k) => k.id === parsed[1]);
  if (!key) return false;
  return constantTimeEqual(Buffer.from(parsed[2] ?? '', 'base64url'), mac(key, facts));
}

/** The facts of a record, as a seal covers them; undefined when it is not bound to a TPM. */
export function sealedFactsOf(record: {
  metadata: { uid?: string | undefined };
  spec: {
    flavorClassName: string;
    nodeName?: string | undefined;
    maxUses?: number;
    attestation?: TokenAttestation;
  };
}): SealedFacts | undefined {
  const attestation = record.spec.attestation;
  if (!attestation) return undefined;
  return {
    uid: record.metadata.uid ?? '',
    flavorClassName: record.spec.flavorClassName,
    nodeName: record.spec.nodeName,
    maxUses: record.spec.maxUses ?? 1,
    attestation,
  };
}
