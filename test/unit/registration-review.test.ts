// The mutating half of the guard (ADR 0012): a kubelet registering a Node whose name was claimed
// through nodeflavor gets the quarantine taint and the joined mark, whatever its JoinConfiguration
// dropped; a plain node is left alone; a claim that cannot be read refuses the registration.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import {
  decideNodeAdmission,
  JOINED_LABEL_KEY,
  protectedKeysFromFlavorClasses,
  QUARANTINE_TAINT_KEY,
  TOKEN_LABEL_KEY,
} from '../../src/flavor/admission.ts';
import { registrationPatch } from '../../src/flavor/registration-quarantine.ts';
import { reviewNodeRegistration } from '../../src/webhook/registration-review.ts';
import { nodeViewFrom } from '../../src/webhook/review.ts';

const QUARANTINE = { key: QUARANTINE_TAINT_KEY, effect: 'NoSchedule' };

function registration(object: Record<string, unknown>, overrides: Record<string, unknown> = {}) {
  return {
    apiVersion: 'admission.k8s.io/v1',
    kind: 'AdmissionReview',
    request: {
      uid: 'u-1',
      kind: { group: '', version: 'v1', kind: 'Node' },
      resource: { group: '', version: 'v1', resource: 'nodes' },
      name: 'n1',
      operation: 'CREATE',
      userInfo: { username: 'system:node:n1', groups: ['system:nodes', 'system:authenticated'] },
      object,
      oldObject: null,
      ...overrides,
    },
  };
}

/** RFC 6902 add, enough for the patches under test. */
function applyPatch(doc: Record<string, unknown>, patch: { op: string; path: string; value: unknown }[]) {
  const out = structuredClone(doc);
  for (const op of patch) {
    assert.equal(op.op, 'add');
    const parts = op.path
      .split('/')
      .slice(1)
      .map((p) => p.replaceAll('~1', '/').replaceAll('~0', '~'));
    const last = parts.pop() as string;
    let parent: Record<string, unknown> | unknown[] = out;
    for (const part of parts) parent = (parent as Record<string, unknown>)[part] as Record<string, unknown>;
    if (Array.isArray(parent) && last === '-') parent.push(op.value);
    else (parent as Record<string, unknown>)[last] = op.value;
  }
  return out;
}

const claimed = async () => true;
const unclaimed = async () => false;

/** The Node the API server stores after our patch. */
async function registered(object: Record<string, unknown>, nameClaimed: (n: string) => Promise<boolean>) {
  const outcome = await reviewNodeRegistration(registration(object), nameClaimed);
  assert.equal(outcome.httpStatus, 200);
  if (outcome.httpStatus !== 200) throw new Error('unreachable');
  const { response } = outcome.body;
  assert.equal(response.uid, 'u-1');
  assert.equal(response.allowed, true);
  if (!response.patch) return { node: object, result: outcome.result };
  assert.equal(response.patchType, 'JSONPatch');
  const patch = JSON.parse(Buffer.from(response.patch, 'base64').toString());
  return { node: applyPatch(object, patch), result: outcome.result };
}

const view = (node: Record<string, unknown>) => nodeViewFrom(node);

describe('registration quarantine (the mutating webhook)', () => {
  // What a node administrator may have left of the issued JoinConfiguration.
  const joinConfigurations: [string, Record<string, unknown>][] = [
    [
      'as issued (taint and token label)',
      { metadata: { name: 'n1', labels: { [TOKEN_LABEL_KEY]: 'x' } }, spec: { taints: [QUARANTINE] } },
    ],
    ['taint dropped', { metadata: { name: 'n1', labels: { [TOKEN_LABEL_KEY]: 'x' } }, spec: {} }],
    [
      'token label dropped',
      {
        metadata: { name: 'n1', labels: { 'kubernetes.io/hostname': 'n1' } },
        spec: { taints: [QUARANTINE] },
      },
    ],
    [
      'both dropped',
      {
        metadata: { name: 'n1', labels: { 'kubernetes.io/hostname': 'n1' } },
        spec: { podCIDR: '10.0.0.0/24' },
      },
    ],
    ['no labels, no taints at all', { metadata: { name: 'n1' }, spec: {} }],
    ['no spec', { metadata: { name: 'n1' } }],
    [
      'another taint only',
      { metadata: { name: 'n1' }, spec: { taints: [{ key: 'example.com/x', effect: 'NoExecute' }] } },
    ],
  ];
  for (const [what, object] of joinConfigurations) {
    test(`a claimed name registered with ${what}: quarantined and marked from the first version`, async () => {
      const { node, result } = await registered(object, claimed);
      assert.equal(result, 'Quarantined');
      const v = view(node);
      assert.ok(
        v.taints.some((t) => t.key === QUARANTINE_TAINT_KEY && t.effect === 'NoSchedule'),
        `quarantined: ${JSON.stringify(v.taints)}`,
      );
      assert.equal(v.labels[JOINED_LABEL_KEY], 'true');
      // Other taints and labels are kept as the kubelet sent them.
      for (const t of view(object).taints)
        assert.ok(v.taints.some((k) => k.key === t.key && k.effect === t.effect));
      for (const [k, value] of Object.entries(view(object).labels)) assert.equal(v.labels[k], value);
      // And the validating guard lets exactly that registration through.
      const decision = decideNodeAdmission(
        {
          operation: 'CREATE',
          username: 'system:node:n1',
          groups: ['system:nodes'],
          nodeName: 'n1',
          newNode: v,
        },
        {
          controllerUsernames: ['system:serviceaccount:nodeflavor:nodeflavor'],
          adminGroups: [],
          protectedKeys: protectedKeysFromFlavorClasses([]),
        },
      );
      assert.equal(decision.allowed, true, JSON.stringify(decision));
    });
  }

  test('a name nobody claimed, registered without a token label: left exactly as it is', async () => {
    const object = { metadata: { name: 'n1', labels: { 'kubernetes.io/hostname': 'n1' } }, spec: {} };
    const { node, result } = await registered(object, unclaimed);
    assert.equal(result, 'NotJoined');
    assert.deepEqual(node, object);
  });

  test('an unclaimed name presenting a flavor token is quarantined too (it claims to be ours)', async () => {
    const object = { metadata: { name: 'n1', labels: { [TOKEN_LABEL_KEY]: 'x' } }, spec: {} };
    const { node } = await registered(object, unclaimed);
    assert.ok(view(node).taints.some((t) => t.key === QUARANTINE_TAINT_KEY));
  });

  test('already quarantined and marked: no patch at all', async () => {
    const object = {
      metadata: { name: 'n1', labels: { [JOINED_LABEL_KEY]: 'true' } },
      spec: { taints: [QUARANTINE] },
    };
    const outcome = await reviewNodeRegistration(registration(object), claimed);
    assert.ok(outcome.httpStatus === 200 && outcome.body.response.patch === undefined);
  });

  test('a claim that cannot be read refuses the registration (the kubelet retries): unknown is never trusted', async () => {
    const outcome = await reviewNodeRegistration(
      registration({ metadata: { name: 'n1' }, spec: {} }),
      async () => {
        throw new Error('connect ECONNREFUSED');
      },
    );
    assert.ok(outcome.httpStatus === 200);
    if (outcome.httpStatus !== 200) return;
    assert.equal(outcome.body.response.allowed, false);
    assert.equal(outcome.body.response.status?.code, 503);
    assert.match(outcome.body.response.status?.message ?? '', /could not check whether node name "n1"/);
    assert.equal(outcome.result, 'ClaimUnreadable');
  });

  test('anything but a kubelet registering a Node is not ours to mark, and no claim is read', async () => {
    let reads = 0;
    const counting = async () => {
      reads += 1;
      return true;
    };
    const others = [
      { operation: 'UPDATE', oldObject: { metadata: { name: 'n1' } } },
      { userInfo: { username: 'admin', groups: ['system:masters'] } },
      { subResource: 'status' },
      { resource: { group: '', version: 'v1', resource: 'pods' } },
    ];
    for (const overrides of others) {
      const outcome = await reviewNodeRegistration(
        registration({ metadata: { name: 'n1' } }, overrides),
        counting,
      );
      assert.ok(outcome.httpStatus === 200 && outcome.body.response.allowed && !outcome.body.response.patch);
    }
    assert.equal(reads, 0);
  });

  test('a body without a uid is an HTTP 400; one with a uid but unreadable is refused', async () => {
    assert.equal((await reviewNodeRegistration({ nonsense: true }, claimed)).httpStatus, 400);
    const outcome = await reviewNodeRegistration(
      { apiVersion: 'admission.k8s.io/v1', kind: 'AdmissionReview', request: { uid: 'u-2' } },
      claimed,
    );
    assert.ok(outcome.httpStatus === 200 && outcome.body.response.allowed === false);
  });
});

describe('registrationPatch', () => {
  test('adds only what is missing, never twice', () => {
    const shape = { hasLabels: true, hasSpec: true, hasTaints: true };
    const node = { labels: { [JOINED_LABEL_KEY]: 'true' }, annotations: {}, taints: [QUARANTINE] };
    assert.deepEqual(registrationPatch(node, shape, true), []);
    const noTaint = registrationPatch({ ...node, taints: [] }, shape, true);
    assert.deepEqual(noTaint, [{ op: 'add', path: '/spec/taints/-', value: QUARANTINE }]);
  });

  test('a kubelet may set the joined mark only when it registers', () => {
    const policy = {
      controllerUsernames: ['c'],
      adminGroups: [],
      protectedKeys: protectedKeysFromFlavorClasses([]),
    };
    const kubelet = { username: 'system:node:n1', groups: ['system:nodes'], nodeName: 'n1' };
    const before = { labels: {}, annotations: {}, taints: [] };
    const after = { labels: { [JOINED_LABEL_KEY]: 'true' }, annotations: {}, taints: [] };
    assert.equal(
      decideNodeAdmission({ ...kubelet, operation: 'CREATE', newNode: after }, policy).allowed,
      true,
    );
    const update = decideNodeAdmission(
      { ...kubelet, operation: 'UPDATE', oldNode: before, newNode: after },
      policy,
    );
    assert.equal(update.allowed, false);
    const removal = decideNodeAdmission(
      { ...kubelet, operation: 'UPDATE', oldNode: after, newNode: before },
      policy,
    );
    assert.equal(removal.allowed, false, 'the mark never goes by a kubelet');
  });
});
