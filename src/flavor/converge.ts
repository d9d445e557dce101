// What a Node should look like, pure: from the Node as it is, the record of what nodeflavor applied
// to it last, and what its FlavorClass now says (or no flavor at all), the write that makes it so
// and the record that write leaves. A key is nodeflavor's to remove when it owns it by claim
// (nodeflavor.io/, or a key some FlavorClass names: the admission guard keeps everyone else off
// those) or by record (it applied that key to this very Node); every other key is someone else's
// and stays exactly as it is. See docs/architecture.md#keeping-it-true.
import {
  isProtectedKey,
  type NodeView,
  protectedKeysFromFlavorClasses,
  QUARANTINE_TAINT_KEY,
  TOKEN_LABEL_KEY,
} from './admission.ts';
import {
  APPLIED_ANNOTATION,
  type AppliedKeys,
  type AppliedRecordReading,
  isNothingApplied,
  NOTHING_APPLIED,
  normalizeApplied,
  type TaintId,
} from './applied-record.ts';
import { REFUSED_ANNOTATION } from './refusal-record.ts';
import { type FlavorClassSpec, JOINED_LABEL_KEY, JOINED_LABEL_VALUE } from './resources.ts';
import { VERIFIED_ANNOTATION } from './verification-record.ts';

type Taint = { key: string; value?: string; effect: string };

/** Keys owned by claim: the nodeflavor.io/ prefix and every key a current FlavorClass names. */
export interface ManagedKeys {
  isProtectedLabel: (key: string) => boolean;
  isProtectedAnnotation: (key: string) => boolean;
  isProtectedTaint: (key: string) => boolean;
}

export function managedKeys(classes: Iterable<FlavorClassSpec>): ManagedKeys {
  const keys = protectedKeysFromFlavorClasses([...classes]);
  return {
    isProtectedLabel: (k) => isProtectedKey('label', k, keys),
    isProtectedAnnotation: (k) => isProtectedKey('annotation', k, keys),
    isProtectedTaint: (k) => isProtectedKey('taint', k, keys),
  };
}

interface ConvergeInput {
  node: NodeView;
  /** What the Node's record proves nodeflavor applied; NOTHING_APPLIED without a genuine record. */
  applied: AppliedKeys;
  /** The class to apply and the signed verification annotation; undefined: no flavor, quarantine. */
  flavor: { flavorClass: FlavorClassSpec; annotation: string } | undefined;
  keys: ManagedKeys;
  /**
   * The Node joined through nodeflavor (its name was claimed, it is bound, verified, or already
   * marked): it carries JOINED_LABEL_KEY, which keeps the operator's own pods off it.
   */
  joined?: boolean;
  /** The record annotation for what this write applies (the caller signs it for this Node). */
  record: (applied: AppliedKeys) => string;
  /** Unflavored: why, as the refusal record's annotation value (refusal-record.ts). */
  refusal?: string;
}

export interface DesiredNodeState {
  /** Labels and annotations to own (server-side apply). */
  labels: Record<string, string>;
  annotations: Record<string, string>;
  /** The complete taint list to write (the Node's taints are an atomic list). */
  taints: Taint[];
  /** Keys present, ours (by claim or record) and not wanted: removed explicitly. */
  removeLabels: string[];
  removeAnnotations: string[];
  /** What the Node carries of ours once written: the record the write leaves. */
  applied: AppliedKeys;
}

const sameTaint = (a: TaintId, b: TaintId) => a.key === b.key && a.effect === b.effect;

/** The keys a class applies, as a record holds them. */
export function classKeys(flavorClass: FlavorClassSpec): AppliedKeys {
  return normalizeApplied({
    labels: Object.keys(flavorClass.labels ?? {}),
    annotations: Object.keys(flavorClass.annotations ?? {}),
    taints: (flavorClass.taints ?? []).map((t) => ({ key: t.key, effect: t.effect })),
  });
}

/** What a record proves nodeflavor applied: nothing unless it is genuine (fail safe). */
export function provenApplied(reading: AppliedRecordReading): AppliedKeys {
  return reading.state === 'valid' ? reading.applied : NOTHING_APPLIED;
}

/** What the Node should look like: the class's keys when flavored, none (and quarantined) when not. */
export function desiredNodeState(input: ConvergeInput): DesiredNodeState {
  const { node, flavor, keys } = input;
  const applied = flavor ? classKeys(flavor.flavorClass) : NOTHING_APPLIED;
  const labels: Record<string, string> = { ...(flavor?.flavorClass.labels ?? {}) };
  if (input.joined) labels[JOINED_LABEL_KEY] = JOINED_LABEL_VALUE;
  const annotations: Record<string, string> = { ...(flavor?.flavorClass.annotations ?? {}) };
  if (flavor) annotations[VERIFIED_ANNOTATION] = flavor.annotation;
  else if (input.refusal !== undefined) annotations[REFUSED_ANNOTATION] = input.refusal;
  // No record when nothing is applied: an absent record and an empty one prove the same.
  if (!isNothingApplied(applied)) annotations[APPLIED_ANNOTATION] = input.record(applied);

  const recorded = {
    labels: new Set(input.applied.labels),
    annotations: new Set(input.applied.annotations),
    taints: input.applied.taints,
  };
  const wantedTaints: Taint[] = flavor
    ? (flavor.flavorClass.taints ?? [])
    : [{ key: QUARANTINE_TAINT_KEY, effect: 'NoSchedule' }];
  const taints = [
    // Others' taints stay as they are; ours (claimed or recorded) stay only if wanted, as wanted.
    ...node.taints.filter(
      (t) =>
        !keys.isProtectedTaint(t.key) &&
        !recorded.taints.some((r) => sameTaint(r, t)) &&
        !wantedTaints.some((w) => sameTaint(w, t)),
    ),
    ...wantedTaints.map((t) => ({ ...t })),
  ];
  return {
    labels,
    annotations,
    taints,
    // Unflavored, the token label stays: it is the node's only way to be verified once the cause
    // (a missing FlavorClass, a late CSR) is fixed. Verified, it goes: its job is done. The joined
    // mark never goes: a machine that once joined through nodeflavor stays one (fail closed).
    removeLabels: Object.keys(node.labels).filter(
      (k) =>
        (keys.isProtectedLabel(k) || recorded.labels.has(k)) &&
        !Object.hasOwn(labels, k) &&
        k !== JOINED_LABEL_KEY &&
        (flavor !== undefined || k !== TOKEN_LABEL_KEY),
    ),
    removeAnnotations: Object.keys(node.annotations).filter(
      (k) => (keys.isProtectedAnnotation(k) || recorded.annotations.has(k)) && !Object.hasOwn(annotations, k),
    ),
    applied,
  };
}

/** True when the Node already looks as desired (so a reconcile writes nothing). */
export function nodeMatches(node: NodeView, desired: Omit<DesiredNodeState, 'applied'>): boolean {
  const labelsOk =
    Object.entries(desired.labels).every(([k, v]) => node.labels[k] === v) &&
    desired.removeLabels.length === 0;
  const annotationsOk =
    Object.entries(desired.annotations).every(([k, v]) => node.annotations[k] === v) &&
    desired.removeAnnotations.length === 0;
  const taintKey = (t: Taint) => `${t.key}\u0000${t.value ?? ''}\u0000${t.effect}`;
  const have = node.taints.map(taintKey).sort();
  const want = desired.taints.map(taintKey).sort();
  return labelsOk && annotationsOk && have.length === want.length && have.every((t, i) => t === want[i]);
}

/**
 * True when the write would change only nodeflavor's own bookkeeping (the verification and
 * applied records: a re-signature after a key rotation, a record added after an upgrade), which
 * is no news for the Node's Events.
 */
export function onlyBookkeeping(node: NodeView, desired: DesiredNodeState): boolean {
  const bookkeeping = (k: string) =>
    k === VERIFIED_ANNOTATION || k === APPLIED_ANNOTATION || k === REFUSED_ANNOTATION;
  const annotations = Object.fromEntries(
    Object.entries(desired.annotations).filter(([k]) => !bookkeeping(k)),
  );
  return nodeMatches(node, {
    ...desired,
    annotations,
    removeAnnotations: desired.removeAnnotations.filter((k) => !bookkeeping(k)),
  });
}
