// Issue 17: whatever happens to the FlavorClasses (edits, renames, deletions, re-creations) and
// whatever others do to the Node meanwhile, reconciling leaves the Node exactly as a simple model
// says: the class's keys (or the quarantine taint when its class is gone) plus every key others
// own, untouched. The decision runs as the controller runs it: the record read back from the
// Node's annotation under a real key ring, the write applied to the Node, again and again.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import fc from 'fast-check';
import { QUARANTINE_TAINT_KEY } from '../../src/flavor/admission.ts';
import { APPLIED_ANNOTATION, readAppliedRecord, signAppliedRecord } from '../../src/flavor/applied-record.ts';
import {
  classKeys,
  type DesiredNodeState,
  desiredNodeState,
  managedKeys,
  nodeMatches,
  provenApplied,
} from '../../src/flavor/converge.ts';
import { newKeyRing } from '../../src/flavor/keyring.ts';
import type { FlavorClassSpec } from '../../src/flavor/resources.ts';
import { type NodeFacts, VERIFIED_ANNOTATION } from '../../src/flavor/verdict.ts';

const ring = newKeyRing();
const UID = 'uid-1';
/** The node joined with a token for this flavor; the other names are other flavors. */
const FLAVOR = 'gpu';
const CLASS_NAMES = [FLAVOR, 'cpu', 'edge'];
const VERIFICATION = 'verification-record';

// Keys a class may name, in several domains (and none), nodeflavor.io/ among them.
const CLASS_LABELS = ['nodeflavor.io/flavor', 'example.com/tier', 'team.example.org/zone', 'zone'];
const CLASS_ANNOTATIONS = ['nodeflavor.io/contact', 'example.com/note', 'team.example.org/owner', 'note'];
const CLASS_TAINTS = ['nodeflavor.io/dedicated', 'example.com/gpu', 'team.example.org/maint', 'dedicated'];
// Keys only others use (Kubernetes' own among them). Others may also write class keys while no
// class names them; the admission guard keeps everyone off keys a class names and off nodeflavor.io/.
const OTHER_LABELS = ['kubernetes.io/hostname', 'other.example.net/rack', 'rack'];
const OTHER_ANNOTATIONS = ['node.alpha.kubernetes.io/ttl', 'other.example.net/owner'];
const OTHER_TAINTS = ['node.kubernetes.io/not-ready', 'other.example.net/maintenance'];
const EFFECTS = ['NoSchedule', 'PreferNoSchedule', 'NoExecute'] as const;

type Kind = 'label' | 'annotation' | 'taint';
type Taint = { key: string; value?: string; effect: string };

type Command =
  | { op: 'apply'; name: string; spec: FlavorClassSpec }
  | { op: 'delete'; name: string }
  | { op: 'rename'; from: string; to: string }
  | { op: 'othersSet'; kind: Kind; key: string; effect: string; value: string }
  | { op: 'othersRemove'; kind: Kind; key: string; effect: string }
  | { op: 'tamper'; how: 'another node' | 'another ring' | 'garbage' | 'removed' }
  | { op: 'reconcile' };

const value = fc.constantFrom('a', 'b', 'gold', 'silver');
const subset = (keys: string[]) => fc.subarray(keys);
const specArb: fc.Arbitrary<FlavorClassSpec> = fc.record({
  labels: subset(CLASS_LABELS).chain((ks) =>
    fc.tuple(...ks.map(() => value)).map((vs) => Object.fromEntries(ks.map((k, i) => [k, vs[i] ?? '']))),
  ),
  annotations: subset(CLASS_ANNOTATIONS).chain((ks) =>
    fc.tuple(...ks.map(() => value)).map((vs) => Object.fromEntries(ks.map((k, i) => [k, vs[i] ?? '']))),
  ),
  taints: fc.uniqueArray(
    fc.record(
      { key: fc.constantFrom(...CLASS_TAINTS), value, effect: fc.constantFrom(...EFFECTS) },
      { requiredKeys: ['key', 'effect'] },
    ),
    { selector: (t) => `${t.key}:${t.effect}`, maxLength: 4 },
  ),
});
const className = fc.constantFrom(...CLASS_NAMES);
const othersKey = (kind: Kind) =>
  kind === 'label'
    ? fc.constantFrom(...CLASS_LABELS, ...OTHER_LABELS)
    : kind === 'annotation'
      ? fc.constantFrom(...CLASS_ANNOTATIONS, ...OTHER_ANNOTATIONS)
      : fc.constantFrom(...CLASS_TAINTS, ...OTHER_TAINTS);
const kindArb = fc.constantFrom<Kind>('label', 'annotation', 'taint');
const effectArb = fc.constantFrom(...EFFECTS);

const commandArb: fc.Arbitrary<Command> = fc.oneof(
  { weight: 3, arbitrary: fc.record({ op: fc.constant('apply' as const), name: className, spec: specArb }) },
  { weight: 1, arbitrary: fc.record({ op: fc.constant('delete' as const), name: className }) },
  { weight: 1, arbitrary: fc.record({ op: fc.constant('rename' as const), from: className, to: className }) },
  {
    weight: 3,
    arbitrary: kindArb.chain((kind) =>
      fc.record({
        op: fc.constant('othersSet' as const),
        kind: fc.constant(kind),
        key: othersKey(kind),
        effect: effectArb,
        value,
      }),
    ),
  },
  {
    weight: 1,
    arbitrary: kindArb.chain((kind) =>
      fc.record({
        op: fc.constant('othersRemove' as const),
        kind: fc.constant(kind),
        key: othersKey(kind),
        effect: effectArb,
      }),
    ),
  },
  {
    weight: 1,
    arbitrary: fc.record({
      op: fc.constant('tamper' as const),
      how: fc.constantFrom(
        'another node' as const,
        'another ring' as const,
        'garbage' as const,
        'removed' as const,
      ),
    }),
  },
  { weight: 3, arbitrary: fc.constant({ op: 'reconcile' as const }) },
);

/** A key's identity on the Node: a taint is identified by key and effect. */
const id = (kind: Kind, key: string, effect = '') =>
  kind === 'taint' ? `t|${key}|${effect}` : `${kind[0]}|${key}`;

function idsOf(spec: FlavorClassSpec): Map<string, string> {
  return new Map([
    ...Object.entries(spec.labels ?? {}).map(([k, v]) => [id('label', k), v] as const),
    ...Object.entries(spec.annotations ?? {}).map(([k, v]) => [id('annotation', k), v] as const),
    ...(spec.taints ?? []).map((t) => [id('taint', t.key, t.effect), t.value ?? ''] as const),
  ]);
}

/** Keys owned by claim: nodeflavor.io/ or named (for taints: by key) by any current class. */
function claimed(classes: Map<string, FlavorClassSpec>, kind: Kind, key: string): boolean {
  if (key.startsWith('nodeflavor.io/')) return true;
  return [...classes.values()].some((c) =>
    kind === 'taint'
      ? (c.taints ?? []).some((t) => t.key === key)
      : Object.hasOwn((kind === 'label' ? c.labels : c.annotations) ?? {}, key),
  );
}

/**
 * The model: who owns what. Others own what they wrote, until nodeflavor takes it (a class
 * claims the key at a reconcile) or removes it (it was nodeflavor's by record: written in the
 * moment between a class dropping a key and the reconcile that removes it). nodeflavor owns the
 * class's keys as of the last reconcile; keys it can no longer prove (its record was lost)
 * stay as they are and are others' from then on.
 */
class Model {
  readonly classes = new Map<string, FlavorClassSpec>();
  readonly others = new Map<string, string>();
  ours = new Map<string, string>();
  recordLost = false;

  reconcile(before: NodeFacts): void {
    const kindOf = (i: string): [Kind, string] => {
      const [k, key] = i.split('|') as [string, string];
      return [k === 'l' ? 'label' : k === 'a' ? 'annotation' : 'taint', key];
    };
    const isClaimed = (i: string) => claimed(this.classes, ...kindOf(i));
    const own = this.classes.get(FLAVOR);
    const wanted = own ? idsOf(own) : new Map<string, string>();
    if (this.recordLost) {
      // Fail safe: what nodeflavor cannot prove it applied stays, as it is on the Node now.
      for (const i of this.ours.keys()) {
        const now = valueOn(before, i);
        if (!isClaimed(i) && !wanted.has(i) && now !== undefined) this.others.set(i, now);
      }
    } else {
      for (const i of this.ours.keys()) if (!isClaimed(i) && !wanted.has(i)) this.others.delete(i);
    }
    for (const i of [...this.others.keys()]) if (isClaimed(i)) this.others.delete(i);
    this.ours = wanted;
    this.recordLost = false;
  }

  /** The Node after a reconcile: the class's keys (or the quarantine) plus others' keys. */
  expected(): { labels: string[]; annotations: string[]; taints: string[] } {
    const own = this.classes.get(FLAVOR);
    const all = new Map([...this.others, ...this.ours]);
    const entries = (prefix: string) =>
      [...all].filter(([i]) => i.startsWith(prefix)).map(([i, v]) => `${i.slice(2)}=${v}`);
    const annotations = entries('a|');
    if (own) {
      annotations.push(`${VERIFIED_ANNOTATION}=${VERIFICATION}`);
      const applied = classKeys(own);
      if (applied.labels.length + applied.annotations.length + applied.taints.length > 0)
        annotations.push(`${APPLIED_ANNOTATION}=${signAppliedRecord(ring, UID, applied)}`);
    }
    const taints = entries('t|');
    if (!own) taints.push(`${QUARANTINE_TAINT_KEY}|NoSchedule=`);
    return { labels: entries('l|').sort(), annotations: annotations.sort(), taints: taints.sort() };
  }
}

function valueOn(node: NodeFacts, i: string): string | undefined {
  const [k, key, effect] = i.split('|') as [string, string, string?];
  if (k === 'l') return node.labels[key];
  if (k === 'a') return node.annotations[key];
  const taint = node.taints.find((t) => t.key === key && t.effect === effect);
  return taint === undefined ? undefined : (taint.value ?? '');
}

function actual(node: NodeFacts): { labels: string[]; annotations: string[]; taints: string[] } {
  return {
    labels: Object.entries(node.labels)
      .map(([k, v]) => `${k}=${v}`)
      .sort(),
    annotations: Object.entries(node.annotations)
      .map(([k, v]) => `${k}=${v}`)
      .sort(),
    taints: node.taints.map((t) => `${t.key}|${t.effect}=${t.value ?? ''}`).sort(),
  };
}

/** The controller's reconcile of this Node, as nodes.ts does it, minus the I/O. */
function plan(node: NodeFacts, classes: Map<string, FlavorClassSpec>): DesiredNodeState {
  const reading = readAppliedRecord(ring, UID, node.annotations[APPLIED_ANNOTATION]);
  const own = classes.get(FLAVOR);
  return desiredNodeState({
    node,
    applied: provenApplied(reading),
    flavor: own ? { flavorClass: own, annotation: VERIFICATION } : undefined,
    keys: managedKeys(classes.values()),
    record: (applied) => signAppliedRecord(ring, UID, applied),
  });
}

/** The two writes (JSON patch removals, then apply): keys removed, then set; taints replaced. */
function write(node: NodeFacts, d: DesiredNodeState): NodeFacts {
  const labels = { ...node.labels };
  for (const k of d.removeLabels) delete labels[k];
  const annotations = { ...node.annotations };
  for (const k of d.removeAnnotations) delete annotations[k];
  return {
    ...node,
    labels: { ...labels, ...d.labels },
    annotations: { ...annotations, ...d.annotations },
    taints: d.taints.map((t) => ({ ...t })),
  };
}

function run(commands: Command[]): void {
  const model = new Model();
  let node: NodeFacts = {
    name: 'n1',
    uid: UID,
    createdAt: new Date(0),
    labels: {},
    annotations: {},
    taints: [],
  };
  const reconcile = () => {
    model.reconcile(node);
    node = write(node, plan(node, model.classes));
  };
  for (const c of commands) {
    switch (c.op) {
      case 'apply':
        model.classes.set(c.name, c.spec);
        break;
      case 'delete':
        model.classes.delete(c.name);
        break;
      case 'rename': {
        const spec = model.classes.get(c.from);
        if (!spec || c.from === c.to) break;
        model.classes.delete(c.from);
        model.classes.set(c.to, spec);
        break;
      }
      case 'othersSet':
      case 'othersRemove': {
        if (claimed(model.classes, c.kind, c.key)) break; // the admission guard refuses it
        const i = id(c.kind, c.key, c.effect);
        const set = c.op === 'othersSet' ? c.value : undefined;
        if (set === undefined) model.others.delete(i);
        else model.others.set(i, set);
        node = othersWrite(node, c.kind, c.key, c.effect, set);
        break;
      }
      case 'tamper': {
        // An admin's edit: nodeflavor can no longer prove what it applied.
        const { [APPLIED_ANNOTATION]: _lost, ...annotations } = node.annotations;
        const everything = {
          labels: [...CLASS_LABELS, ...OTHER_LABELS.filter((k) => !k.includes('kubernetes.io'))],
          annotations: [...CLASS_ANNOTATIONS, 'other.example.net/owner'],
          taints: [...CLASS_TAINTS, 'other.example.net/maintenance'].flatMap((key) =>
            EFFECTS.map((effect) => ({ key, effect })),
          ),
        };
        const forged =
          c.how === 'another node'
            ? signAppliedRecord(ring, 'uid-2', everything)
            : c.how === 'another ring'
              ? signAppliedRecord(newKeyRing(), UID, everything)
              : c.how === 'garbage'
                ? '{"v":1,"labels":'
                : undefined;
        node = {
          ...node,
          annotations: forged === undefined ? annotations : { ...annotations, [APPLIED_ANNOTATION]: forged },
        };
        model.recordLost = true;
        break;
      }
      case 'reconcile':
        reconcile();
        break;
    }
  }
  reconcile();
  assert.deepEqual(actual(node), model.expected());
  // Level-based: the next reconcile of the converged Node writes nothing.
  assert.ok(nodeMatches(node, plan(node, model.classes)), 'a second reconcile writes nothing');
}

function othersWrite(
  node: NodeFacts,
  kind: Kind,
  key: string,
  effect: string,
  set: string | undefined,
): NodeFacts {
  if (kind === 'taint') {
    const taints: Taint[] = node.taints.filter((t) => !(t.key === key && t.effect === effect));
    if (set !== undefined) taints.push({ key, value: set, effect });
    return { ...node, taints };
  }
  const field = kind === 'label' ? 'labels' : 'annotations';
  const map = { ...node[field] };
  if (set === undefined) delete map[key];
  else map[key] = set;
  return { ...node, [field]: map };
}

describe('a FlavorClass change converges the Node exactly (model-based)', () => {
  test('random class edits, renames, deletions and re-creations, with others writing the Node', () => {
    fc.assert(
      fc.property(
        // The node joined while its class existed, and was flavored.
        specArb,
        fc.array(commandArb, { maxLength: 40 }),
        (initial, commands) =>
          run([{ op: 'apply', name: FLAVOR, spec: initial }, { op: 'reconcile' }, ...commands]),
      ),
      { numRuns: 1500, seed: 17_2026 },
    );
  });

  test('the cases the issue names, by hand', () => {
    const gpu: FlavorClassSpec = {
      labels: { 'nodeflavor.io/flavor': 'gpu', 'example.com/tier': 'gold' },
      annotations: { 'example.com/note': 'a' },
      taints: [{ key: 'example.com/gpu', value: 'a', effect: 'NoSchedule' }],
    };
    const others: Command[] = [
      { op: 'othersSet', kind: 'label', key: 'other.example.net/rack', effect: 'NoSchedule', value: 'a' },
      {
        op: 'othersSet',
        kind: 'taint',
        key: 'other.example.net/maintenance',
        effect: 'NoExecute',
        value: 'a',
      },
    ];
    const start: Command[] = [{ op: 'apply', name: FLAVOR, spec: gpu }, ...others, { op: 'reconcile' }];
    // A taint outside nodeflavor.io/ dropped from the class; a label changed; an annotation dropped.
    run([
      ...start,
      { op: 'apply', name: FLAVOR, spec: { labels: { ...gpu.labels, 'example.com/tier': 'b' } } },
    ]);
    // Deleted: every key goes, the node is quarantined.
    run([...start, { op: 'delete', name: FLAVOR }]);
    // Renamed away and back (a re-creation).
    run([
      ...start,
      { op: 'rename', from: FLAVOR, to: 'cpu' },
      { op: 'reconcile' },
      { op: 'rename', from: 'cpu', to: FLAVOR },
    ]);
  });
});
