// The record of exactly what nodeflavor applied to a Node (annotation nodeflavor.io/applied): the
// label keys, annotation keys and taint (key, effect) pairs of its FlavorClass as last written.
// It is what lets the controller remove a key the class no longer names even when that key lies
// outside nodeflavor.io/ and no other class names it, without touching keys others own.
// Because the record licenses removals, a forged one could make the controller strip an admin's
// taint, so it carries an HMAC under the key ring over the Node's UID, as the verification record
// does. Anything short of a genuine record proves nothing: the controller then removes only keys
// it owns by claim (nodeflavor.io/ and keys some FlavorClass names), never the rest.
import { z } from 'zod';
import { constantTimeEqual, hmacOf } from './flavor-token.ts';
import { type HmacKey, type KeyRing, keyRingKeys } from './keyring.ts';
import { isQualifiedName, isReservedKubernetesKey, LIMITS, TaintEffectSchema } from './resources.ts';

export const APPLIED_ANNOTATION = 'nodeflavor.io/applied';
/** The record's format version (the `v` field); a reader refuses any other. */
const APPLIED_RECORD_VERSION = 1;

const DOMAIN = 'nodeflavor/applied/v1';
const MAC_PATTERN = /^[A-Za-z0-9_-]{43}$/;

/** A taint's identity: the API server keeps at most one taint per (key, effect). */
export interface TaintId {
  key: string;
  effect: string;
}

/** Keys nodeflavor applied to one Node, each list sorted and without duplicates. */
export interface AppliedKeys {
  labels: string[];
  annotations: string[];
  taints: TaintId[];
}

export const NOTHING_APPLIED: AppliedKeys = Object.freeze({ labels: [], annotations: [], taints: [] });

export function isNothingApplied(applied: AppliedKeys): boolean {
  return applied.labels.length + applied.annotations.length + applied.taints.length === 0;
}

const taintText = (t: TaintId) => `${t.key}:${t.effect}`;
function taintId(text: string): TaintId {
  const at = text.lastIndexOf(':');
  return { key: text.slice(0, at), effect: text.slice(at + 1) };
}

// A class key is never in kubernetes.io/k8s.io: a record naming one is refused outright, so even
// a genuine-looking record can never make the controller remove a key Kubernetes owns.
const RecordKey = z
  .string()
  .max(317)
  .refine((k) => isQualifiedName(k) && !isReservedKubernetesKey(k));

/** `key:Effect`, as `kubectl taint` writes it: a qualified name never holds ':'. */
const RecordTaint = z.string().refine((text) => {
  const { key, effect } = taintId(text);
  return RecordKey.safeParse(key).success && TaintEffectSchema.safeParse(effect).success;
});

const RecordSchema = z.strictObject({
  v: z.literal(APPLIED_RECORD_VERSION),
  labels: z.array(RecordKey).max(LIMITS.labels),
  annotations: z.array(RecordKey).max(LIMITS.annotations),
  taints: z.array(RecordTaint).max(LIMITS.taints),
  mac: z.string().regex(MAC_PATTERN),
});

const sortedUnique = (items: string[]) => [...new Set(items)].sort();

/** The record's fields in canonical form (sorted, unique): what the MAC covers. */
function body(applied: AppliedKeys) {
  return {
    v: APPLIED_RECORD_VERSION,
    labels: sortedUnique(applied.labels),
    annotations: sortedUnique(applied.annotations),
    taints: sortedUnique(applied.taints.map(taintText)),
  };
}

function recordMac(key: HmacKey, nodeUid: string, applied: AppliedKeys): Buffer {
  return hmacOf(key.key, DOMAIN, nodeUid, JSON.stringify(body(applied)));
}

/** Canonical form of a set of applied keys (sorted, unique), as the record holds them. */
export function normalizeApplied(applied: AppliedKeys): AppliedKeys {
  const canonical = body(applied);
  return {
    labels: canonical.labels,
    annotations: canonical.annotations,
    taints: canonical.taints.map(taintId),
  };
}

/** The annotation's value: the record signed with the active key for this Node UID. Deterministic. */
export function signAppliedRecord(ring: KeyRing, nodeUid: string, applied: AppliedKeys): string {
  const mac = recordMac(ring.active, nodeUid, applied).toString('base64url');
  return JSON.stringify({ ...body(applied), mac });
}

export type AppliedRecordReading =
  /** No record: a node never flavored, or flavored by a version that kept none. */
  | { state: 'absent' }
  | { state: 'valid'; applied: AppliedKeys }
  /** Present but proves nothing: `why` is for logs and Events and never quotes the record. */
  | { state: 'invalid'; why: string };

/** Reads and checks the annotation (untrusted text) for this Node UID under the key ring. */
export function readAppliedRecord(
  ring: KeyRing,
  nodeUid: string,
  raw: string | undefined,
): AppliedRecordReading {
  if (raw === undefined) return { state: 'absent' };
  let json: unknown;
  try {
    json = JSON.parse(raw);
  } catch {
    return { state: 'invalid', why: 'it is not JSON' };
  }
  const version = (json as { v?: unknown } | null)?.v;
  if (version !== APPLIED_RECORD_VERSION)
    return { state: 'invalid', why: `its version is not ${APPLIED_RECORD_VERSION}` };
  const parsed = RecordSchema.safeParse(json);
  if (!parsed.success) return { state: 'invalid', why: 'it does not have the record format' };
  const applied = normalizeApplied({
    labels: parsed.data.labels,
    annotations: parsed.data.annotations,
    taints: parsed.data.taints.map(taintId),
  });
  // Every key is tried, in constant time: the MAC is the proof, so no early exit on a match.
  const presented = Buffer.from(parsed.data.mac, 'base64url');
  let genuine = false;
  for (const key of keyRingKeys(ring)) {
    if (constantTimeEqual(presented, recordMac(key, nodeUid, applied))) genuine = true;
  }
  if (!genuine)
    return {
      state: 'invalid',
      why: 'it was not signed by nodeflavor for this node (edited, copied, or signed with a retired key)',
    };
  return { state: 'valid', applied };
}
