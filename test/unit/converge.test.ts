import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import fc from 'fast-check';
import { QUARANTINE_TAINT_KEY, TOKEN_LABEL_KEY } from '../../src/flavor/admission.ts';
import { APPLIED_ANNOTATION, type AppliedKeys, NOTHING_APPLIED } from '../../src/flavor/applied-record.ts';
import {
  classKeys,
  type DesiredNodeState,
  desiredNodeState,
  type ManagedKeys,
  managedKeys,
  nodeMatches,
  onlyBookkeeping,
} from '../../src/flavor/converge.ts';
import type { FlavorClassSpec } from '../../src/flavor/resources.ts';
import { type NodeFacts, VERIFIED_ANNOTATION } from '../../src/flavor/verdict.ts';

const SWEET: FlavorClassSpec = {
  labels: { 'nodeflavor.io/flavor': 'sweet', 'example.com/tier': 'gold' },
  annotations: { 'example.com/contact': 'sre' },
  taints: [{ key: 'example.com/dedicated', value: 'sweet', effect: 'NoSchedule' }],
};
const SOUR: FlavorClassSpec = {
  labels: { 'nodeflavor.io/flavor': 'sour', 'example.com/sour': 'yes' },
  taints: [{ key: 'example.com/sour-only', effect: 'NoExecute' }],
};
const KEYS = managedKeys([SWEET, SOUR]);
const GOOD = 'a'.repeat(52);
const ANNOTATION = 'verification-record';
const sweet = { flavorClass: SWEET, annotation: ANNOTATION };
const NOT_READY = { key: 'node.kubernetes.io/not-ready', effect: 'NoExecute' };
const QUARANTINE = { key: QUARANTINE_TAINT_KEY, effect: 'NoSchedule' };

/** Stands in for the signed record: the converge decision only needs it to be a function of the keys. */
const record = (applied: AppliedKeys) => `record:${JSON.stringify(applied)}`;
const SWEET_APPLIED: AppliedKeys = {
  labels: ['example.com/tier', 'nodeflavor.io/flavor'],
  annotations: ['example.com/contact'],
  taints: [{ key: 'example.com/dedicated', effect: 'NoSchedule' }],
};

function node(overrides: Partial<NodeFacts> = {}): NodeFacts {
  return {
    name: 'n1',
    uid: 'uid-1',
    createdAt: new Date('2030-01-01T00:00:00Z'),
    labels: {},
    annotations: {},
    taints: [],
    ...overrides,
  };
}

type Flavor = { flavorClass: FlavorClassSpec; annotation: string } | undefined;

function desired(
  n: NodeFacts,
  flavor: Flavor,
  keys: ManagedKeys = KEYS,
  applied: AppliedKeys = NOTHING_APPLIED,
): DesiredNodeState {
  return desiredNodeState({ node: n, applied, flavor, keys, record });
}

/** Writes a desired state onto a Node as the controller does: removals, then labels/annotations set, taints replaced. */
function written(n: NodeFacts, d: DesiredNodeState): NodeFacts {
  const labels = { ...n.labels };
  for (const k of d.removeLabels) delete labels[k];
  const annotations = { ...n.annotations };
  for (const k of d.removeAnnotations) delete annotations[k];
  return {
    ...n,
    labels: { ...labels, ...d.labels },
    annotations: { ...annotations, ...d.annotations },
    taints: d.taints.map((t) => ({ ...t })),
  };
}

describe('desiredNodeState', () => {
  const sweetAnnotations = {
    'example.com/contact': 'sre',
    [VERIFIED_ANNOTATION]: ANNOTATION,
    [APPLIED_ANNOTATION]: record(SWEET_APPLIED),
  };
  const cases: Record<
    string,
    { node: NodeFacts; flavor: Flavor; applied?: AppliedKeys; keys?: ManagedKeys; want: DesiredNodeState }
  > = {
    'flavored, bare node: the class keys, the verification annotation and the record': {
      node: node(),
      flavor: sweet,
      want: {
        labels: { 'nodeflavor.io/flavor': 'sweet', 'example.com/tier': 'gold' },
        annotations: sweetAnnotations,
        taints: [{ key: 'example.com/dedicated', value: 'sweet', effect: 'NoSchedule' }],
        removeLabels: [],
        removeAnnotations: [],
        applied: SWEET_APPLIED,
      },
    },
    'flavored, freshly joined: token label and quarantine go, others stay': {
      node: node({
        labels: { [TOKEN_LABEL_KEY]: GOOD, 'kubernetes.io/hostname': 'n1' },
        annotations: { 'volumes.kubernetes.io/controller-managed-attach-detach': 'true' },
        taints: [QUARANTINE, NOT_READY],
      }),
      flavor: sweet,
      want: {
        labels: { 'nodeflavor.io/flavor': 'sweet', 'example.com/tier': 'gold' },
        annotations: sweetAnnotations,
        taints: [NOT_READY, { key: 'example.com/dedicated', value: 'sweet', effect: 'NoSchedule' }],
        removeLabels: [TOKEN_LABEL_KEY],
        removeAnnotations: [],
        applied: SWEET_APPLIED,
      },
    },
    "flavored, node carrying another class's keys: those not wanted go": {
      node: node({
        labels: { 'nodeflavor.io/flavor': 'sour', 'example.com/sour': 'yes', 'team.io/x': '1' },
        annotations: { 'nodeflavor.io/stale': 'x' },
        taints: [{ key: 'example.com/sour-only', effect: 'NoExecute' }, NOT_READY],
      }),
      flavor: sweet,
      want: {
        labels: { 'nodeflavor.io/flavor': 'sweet', 'example.com/tier': 'gold' },
        annotations: sweetAnnotations,
        taints: [NOT_READY, { key: 'example.com/dedicated', value: 'sweet', effect: 'NoSchedule' }],
        removeLabels: ['example.com/sour'],
        removeAnnotations: ['nodeflavor.io/stale'],
        applied: SWEET_APPLIED,
      },
    },
    'flavored, class taint present with a hand-edited value: replaced, not duplicated': {
      node: node({ taints: [{ key: 'example.com/dedicated', value: 'other', effect: 'NoSchedule' }] }),
      flavor: sweet,
      want: {
        labels: { 'nodeflavor.io/flavor': 'sweet', 'example.com/tier': 'gold' },
        annotations: sweetAnnotations,
        taints: [{ key: 'example.com/dedicated', value: 'sweet', effect: 'NoSchedule' }],
        removeLabels: [],
        removeAnnotations: [],
        applied: SWEET_APPLIED,
      },
    },
    'flavored, keys the record names and the class dropped go, in any domain; others stay': {
      // The class no longer names example.com/gpu, team.example.org/zone or example.com/note, and
      // no other class does: only the record says they are nodeflavor's.
      node: node({
        labels: { 'nodeflavor.io/flavor': 'sweet', 'team.example.org/zone': 'a', 'team.io/x': '1' },
        annotations: { 'example.com/note': 'n', 'team.io/y': '2' },
        taints: [
          { key: 'example.com/gpu', value: 'present', effect: 'NoSchedule' },
          { key: 'example.com/gpu', effect: 'NoExecute' },
          NOT_READY,
        ],
      }),
      flavor: sweet,
      applied: {
        labels: ['nodeflavor.io/flavor', 'team.example.org/zone'],
        annotations: ['example.com/note'],
        taints: [{ key: 'example.com/gpu', effect: 'NoSchedule' }],
      },
      want: {
        labels: { 'nodeflavor.io/flavor': 'sweet', 'example.com/tier': 'gold' },
        annotations: sweetAnnotations,
        // The recorded (key, effect) goes; the same key with another effect is someone else's.
        taints: [
          { key: 'example.com/gpu', effect: 'NoExecute' },
          NOT_READY,
          { key: 'example.com/dedicated', value: 'sweet', effect: 'NoSchedule' },
        ],
        removeLabels: ['team.example.org/zone'],
        removeAnnotations: ['example.com/note'],
        applied: SWEET_APPLIED,
      },
    },
    'flavored, no record (an upgrade, or a record that proved nothing): unclaimed keys stay': {
      node: node({
        labels: { 'nodeflavor.io/flavor': 'sweet', 'team.example.org/zone': 'a' },
        annotations: { 'example.com/note': 'n' },
        taints: [{ key: 'example.com/gpu', value: 'present', effect: 'NoSchedule' }],
      }),
      flavor: sweet,
      want: {
        labels: { 'nodeflavor.io/flavor': 'sweet', 'example.com/tier': 'gold' },
        annotations: sweetAnnotations,
        taints: [
          { key: 'example.com/gpu', value: 'present', effect: 'NoSchedule' },
          { key: 'example.com/dedicated', value: 'sweet', effect: 'NoSchedule' },
        ],
        removeLabels: [],
        removeAnnotations: [],
        applied: SWEET_APPLIED,
      },
    },
    'flavored, a class with no keys: no record; a stale one is removed': {
      node: node({ annotations: { [APPLIED_ANNOTATION]: 'old' } }),
      flavor: { flavorClass: {}, annotation: ANNOTATION },
      want: {
        labels: {},
        annotations: { [VERIFIED_ANNOTATION]: ANNOTATION },
        taints: [],
        removeLabels: [],
        removeAnnotations: [APPLIED_ANNOTATION],
        applied: NOTHING_APPLIED,
      },
    },
    'unflavored: quarantine added, token label kept, flavor keys removed, others kept': {
      node: node({
        labels: {
          [TOKEN_LABEL_KEY]: GOOD,
          'nodeflavor.io/flavor': 'sweet',
          'example.com/tier': 'gold',
          'kubernetes.io/hostname': 'n1',
        },
        annotations: { [VERIFIED_ANNOTATION]: ANNOTATION, 'example.com/contact': 'sre', 'team.io/a': 'b' },
        taints: [{ key: 'example.com/dedicated', value: 'sweet', effect: 'NoSchedule' }, NOT_READY],
      }),
      flavor: undefined,
      want: {
        labels: {},
        annotations: {},
        taints: [NOT_READY, QUARANTINE],
        removeLabels: ['nodeflavor.io/flavor', 'example.com/tier'],
        removeAnnotations: [VERIFIED_ANNOTATION, 'example.com/contact'],
        applied: NOTHING_APPLIED,
      },
    },
    'unflavored, its class deleted: every recorded key goes though no class names it any more': {
      node: node({
        labels: { 'nodeflavor.io/flavor': 'gpu', 'example.com/tier': 'gold', 'team.io/x': '1' },
        annotations: {
          [VERIFIED_ANNOTATION]: ANNOTATION,
          [APPLIED_ANNOTATION]: 'signed',
          'example.com/note': 'n',
        },
        taints: [{ key: 'example.com/gpu', value: 'present', effect: 'NoSchedule' }, NOT_READY],
      }),
      flavor: undefined,
      keys: managedKeys([SOUR]),
      applied: {
        labels: ['example.com/tier', 'nodeflavor.io/flavor'],
        annotations: ['example.com/note'],
        taints: [{ key: 'example.com/gpu', effect: 'NoSchedule' }],
      },
      want: {
        labels: {},
        annotations: {},
        taints: [NOT_READY, QUARANTINE],
        removeLabels: ['nodeflavor.io/flavor', 'example.com/tier'],
        removeAnnotations: [VERIFIED_ANNOTATION, APPLIED_ANNOTATION, 'example.com/note'],
        applied: NOTHING_APPLIED,
      },
    },
    'unflavored, already quarantined: exactly one quarantine taint': {
      node: node({ labels: { [TOKEN_LABEL_KEY]: GOOD }, taints: [QUARANTINE] }),
      flavor: undefined,
      want: {
        labels: {},
        annotations: {},
        taints: [QUARANTINE],
        removeLabels: [],
        removeAnnotations: [],
        applied: NOTHING_APPLIED,
      },
    },
    'unflavored, quarantine key with another effect: replaced by NoSchedule': {
      node: node({ taints: [{ key: QUARANTINE_TAINT_KEY, effect: 'NoExecute' }] }),
      flavor: undefined,
      want: {
        labels: {},
        annotations: {},
        taints: [QUARANTINE],
        removeLabels: [],
        removeAnnotations: [],
        applied: NOTHING_APPLIED,
      },
    },
  };

  for (const [name, c] of Object.entries(cases)) {
    test(name, () => {
      assert.deepEqual(desired(c.node, c.flavor, c.keys ?? KEYS, c.applied ?? NOTHING_APPLIED), c.want);
    });
  }

  test('the returned taints are copies: editing them leaves the FlavorClass alone', () => {
    const d = desired(node(), sweet);
    d.taints[0]!.value = 'changed';
    d.labels['x'] = 'y';
    assert.equal(SWEET.taints?.[0]?.value, 'sweet');
    assert.equal(SWEET.labels?.['x'], undefined);
  });

  test('classKeys: sorted, unique, taints as (key, effect)', () => {
    assert.deepEqual(classKeys(SWEET), SWEET_APPLIED);
    assert.deepEqual(classKeys({}), NOTHING_APPLIED);
  });
});

describe('nodeMatches', () => {
  const flavoredNode = written(node(), desired(node(), sweet));
  const want = desired(flavoredNode, sweet, KEYS, SWEET_APPLIED);
  const cases: Record<string, { node: NodeFacts; desired: DesiredNodeState; matches: boolean }> = {
    'a node written as desired matches': { node: flavoredNode, desired: want, matches: true },
    "others' labels and annotations do not matter": {
      node: {
        ...flavoredNode,
        labels: { ...flavoredNode.labels, 'team.io/x': '1' },
        annotations: { ...flavoredNode.annotations, 'team.io/y': '2' },
      },
      desired: want,
      matches: true,
    },
    'taint order does not matter': {
      node: { ...flavoredNode, taints: [NOT_READY, ...flavoredNode.taints] },
      desired: { ...want, taints: [...want.taints, NOT_READY] },
      matches: true,
    },
    'a label with another value does not match': {
      node: { ...flavoredNode, labels: { ...flavoredNode.labels, 'nodeflavor.io/flavor': 'sour' } },
      desired: want,
      matches: false,
    },
    'a missing annotation does not match': {
      node: { ...flavoredNode, annotations: {} },
      desired: want,
      matches: false,
    },
    'a label still to remove does not match': {
      node: flavoredNode,
      desired: { ...want, removeLabels: ['example.com/sour'] },
      matches: false,
    },
    'an annotation still to remove does not match': {
      node: flavoredNode,
      desired: { ...want, removeAnnotations: ['nodeflavor.io/stale'] },
      matches: false,
    },
    'an extra taint does not match': {
      node: { ...flavoredNode, taints: [...flavoredNode.taints, NOT_READY] },
      desired: want,
      matches: false,
    },
    'a missing taint does not match': {
      node: { ...flavoredNode, taints: [] },
      desired: want,
      matches: false,
    },
    'a taint with another value does not match': {
      node: { ...flavoredNode, taints: [{ key: 'example.com/dedicated', value: 'x', effect: 'NoSchedule' }] },
      desired: want,
      matches: false,
    },
    'a taint with another effect does not match': {
      node: {
        ...flavoredNode,
        taints: [{ key: 'example.com/dedicated', value: 'sweet', effect: 'NoExecute' }],
      },
      desired: want,
      matches: false,
    },
  };

  for (const [name, c] of Object.entries(cases)) {
    test(name, () => {
      assert.equal(nodeMatches(c.node, c.desired), c.matches);
    });
  }

  test('an untouched fresh node does not match its flavored state', () => {
    const fresh = node({ labels: { [TOKEN_LABEL_KEY]: GOOD }, taints: [QUARANTINE] });
    assert.equal(nodeMatches(fresh, desired(fresh, sweet)), false);
    assert.equal(nodeMatches(fresh, desired(fresh, undefined)), true);
  });
});

describe('onlyBookkeeping', () => {
  const flavoredNode = written(node(), desired(node(), sweet));
  test('a node lacking only its records (an upgrade, a re-signature) is bookkeeping', () => {
    const { [APPLIED_ANNOTATION]: _record, ...annotations } = flavoredNode.annotations;
    const upgraded = { ...flavoredNode, annotations: { ...annotations, [VERIFIED_ANNOTATION]: 'older' } };
    const d = desired(upgraded, sweet);
    assert.equal(nodeMatches(upgraded, d), false);
    assert.equal(onlyBookkeeping(upgraded, d), true);
  });
  test('a class edit or a drift is not', () => {
    const drifted = { ...flavoredNode, labels: { ...flavoredNode.labels, 'example.com/tier': 'x' } };
    assert.equal(onlyBookkeeping(drifted, desired(drifted, sweet, KEYS, SWEET_APPLIED)), false);
    const dropped = { flavorClass: { ...SWEET, annotations: {} }, annotation: ANNOTATION };
    assert.equal(onlyBookkeeping(flavoredNode, desired(flavoredNode, dropped, KEYS, SWEET_APPLIED)), false);
  });
});

describe('desiredNodeState / nodeMatches properties', () => {
  const labelKeys = [
    TOKEN_LABEL_KEY,
    'nodeflavor.io/flavor',
    'nodeflavor.io/other',
    'example.com/tier',
    'example.com/sour',
    'kubernetes.io/hostname',
    'team.io/x',
  ];
  const annotationKeys = [VERIFIED_ANNOTATION, 'nodeflavor.io/note', 'example.com/contact', 'team.io/y'];
  const taintKeys = [
    QUARANTINE_TAINT_KEY,
    'example.com/dedicated',
    'example.com/sour-only',
    'nodeflavor.io/x',
    'node.kubernetes.io/not-ready',
    'team.io/z',
  ];
  const effects = ['NoSchedule', 'PreferNoSchedule', 'NoExecute'] as const;
  const value = fc.constantFrom('a', 'b', 'sweet', 'gold');
  const taint = fc.record(
    { key: fc.constantFrom(...taintKeys), value: value, effect: fc.constantFrom(...effects) },
    { requiredKeys: ['key', 'effect'] },
  );
  // The API server keeps one taint per (key, effect); FlavorClasses too.
  const taints = fc.uniqueArray(taint, { selector: (t) => `${t.key}\u0000${t.effect}`, maxLength: 6 });
  const stringMap = (keys: string[]) =>
    fc.dictionary(fc.constantFrom(...keys), value, { maxKeys: keys.length });
  const nodeArb = fc.record({
    labels: stringMap(labelKeys),
    annotations: stringMap(annotationKeys),
    taints,
  });
  const classArb: fc.Arbitrary<FlavorClassSpec> = fc.record(
    {
      labels: stringMap(labelKeys.filter((k) => k !== TOKEN_LABEL_KEY)),
      annotations: stringMap(annotationKeys.filter((k) => k !== VERIFIED_ANNOTATION)),
      taints: taints.map((ts) => ts.filter((t) => t.key !== QUARANTINE_TAINT_KEY)),
    },
    { requiredKeys: [] },
  );
  const flavorArb = fc.option(fc.record({ flavorClass: classArb, annotation: fc.constant(ANNOTATION) }), {
    nil: undefined,
  });
  // A record as a previous write may have left it: any keys of any class (or none).
  const appliedArb = fc.option(classArb.map(classKeys), { nil: NOTHING_APPLIED });

  test('reconciling twice writes nothing the second time', () => {
    fc.assert(
      fc.property(nodeArb, flavorArb, classArb, appliedArb, (facts, flavor, otherClass, applied) => {
        const n = node(facts);
        const keys = managedKeys([SWEET, SOUR, otherClass, ...(flavor ? [flavor.flavorClass] : [])]);
        const first = desired(n, flavor, keys, applied);
        const after = written(n, first);
        const second = desired(after, flavor, keys, first.applied);
        assert.ok(nodeMatches(after, second), JSON.stringify({ after, second }));
        assert.ok(nodeMatches(written(after, second), second));
        // The second pass asks for the same keys and removes nothing more.
        assert.deepEqual(second.labels, first.labels);
        assert.deepEqual(second.annotations, first.annotations);
        assert.deepEqual(second.removeLabels, []);
        assert.deepEqual(second.removeAnnotations, []);
        assert.deepEqual(second.applied, first.applied);
      }),
      { numRuns: 1000, seed: 20300101 },
    );
  });

  test('the written node carries every wanted key, no unwanted key of ours, and keeps the rest', () => {
    fc.assert(
      fc.property(nodeArb, flavorArb, appliedArb, (facts, flavor, applied) => {
        const n = node(facts);
        const keys = managedKeys([SWEET, SOUR, ...(flavor ? [flavor.flavorClass] : [])]);
        const after = written(n, desired(n, flavor, keys, applied));
        const ours = {
          label: (k: string) => keys.isProtectedLabel(k) || applied.labels.includes(k),
          annotation: (k: string) => keys.isProtectedAnnotation(k) || applied.annotations.includes(k),
          taint: (t: { key: string; effect: string }) =>
            keys.isProtectedTaint(t.key) ||
            applied.taints.some((r) => r.key === t.key && r.effect === t.effect),
        };
        for (const [k, v] of Object.entries(n.labels)) {
          if (!ours.label(k)) assert.equal(after.labels[k], v, `label ${k} kept`);
        }
        for (const [k, v] of Object.entries(n.annotations)) {
          if (!ours.annotation(k)) assert.equal(after.annotations[k], v, `annotation ${k} kept`);
        }
        const wantedTaints = flavor?.flavorClass.taints ?? [];
        for (const t of n.taints) {
          if (ours.taint(t) || wantedTaints.some((w) => w.key === t.key && w.effect === t.effect)) continue;
          assert.ok(
            after.taints.some((w) => w.key === t.key && w.effect === t.effect && w.value === t.value),
            `taint ${t.key} kept`,
          );
        }
        const wantedLabels = flavor?.flavorClass.labels ?? {};
        for (const k of Object.keys(after.labels)) {
          if (!ours.label(k) || Object.hasOwn(wantedLabels, k)) continue;
          // Only the token label may stay unwanted, and only on an unflavored node.
          assert.equal(k, TOKEN_LABEL_KEY);
          assert.equal(flavor, undefined);
        }
        for (const t of after.taints) {
          if (!ours.taint(t) || t.key === QUARANTINE_TAINT_KEY) continue;
          assert.ok(
            wantedTaints.some((w) => w.key === t.key && w.effect === t.effect),
            `taint ${t.key} wanted`,
          );
        }
        const quarantined = after.taints.some((t) => t.key === QUARANTINE_TAINT_KEY);
        assert.equal(quarantined, flavor === undefined);
      }),
      { numRuns: 1000, seed: 7 },
    );
  });
});
