// The start-up decisions of `nodeflavor run` (ADR 0003): in a Pod, only on a trusted Node; the
// controller runs only as the identity the admission guard exempts, and only with a guard in
// front of Nodes unless told otherwise.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { parseRunFlags } from '../../src/cli/run-flags.ts';
import {
  guardDecision,
  identityRefusal,
  placementDecision,
  type StartupConfig,
} from '../../src/cli/startup-checks.ts';
import { parseConfig } from '../../src/config.ts';
import {
  DEFAULT_TRUSTED_NODE_LABELS,
  isTrustedNodeLabelKey,
  type NodePlacementFacts,
  placementFailure,
} from '../../src/flavor/placement.ts';

const config = (args: string[] = []): StartupConfig => parseConfig(parseRunFlags(args, {}));
const SA = 'system:serviceaccount:nodeflavor:nodeflavor';

describe('identityRefusal', () => {
  it('lets the configured ServiceAccount run the controller', () => {
    assert.equal(identityRefusal(config(), SA), undefined);
    assert.equal(
      identityRefusal(config(['--namespace=ops', '--service-account=nf']), 'system:serviceaccount:ops:nf'),
      undefined,
    );
  });

  it('refuses any other identity in one line that says how to run as the ServiceAccount', () => {
    const line = identityRefusal(config(), 'kubernetes-admin');
    assert.ok(line);
    assert.doesNotMatch(line, /\n/);
    assert.match(line, /refusing to run the controller as "kubernetes-admin"/);
    assert.match(line, new RegExp(`only "${SA}" write flavors`));
    assert.match(line, /kubectl -n nodeflavor create token nodeflavor/);
  });

  it('names the flags that would match when the identity is another ServiceAccount', () => {
    const line = identityRefusal(config(), 'system:serviceaccount:ops:nf') ?? '';
    assert.match(line, /--namespace=ops --service-account=nf/);
  });

  it('does not care who runs a process without the controller (only the controller writes flavors)', () => {
    assert.equal(identityRefusal(config(['--no-controller']), 'kubernetes-admin'), undefined);
  });
});

describe('guardDecision', () => {
  it('is content when this process runs the guard, or runs no controller', () => {
    assert.deepEqual(guardDecision(config()), { guarded: true });
    assert.deepEqual(guardDecision(config(['--no-controller', '--no-webhook']), { state: 'absent' }), {
      guarded: true,
    });
  });

  it("is content with another process's registration", () => {
    const decision = guardDecision(config(['--no-webhook']), {
      state: 'present',
      kinds: ['ValidatingWebhookConfiguration'],
    });
    assert.deepEqual(decision, { guarded: true });
  });

  it('refuses a controller with no guard, in one line naming the flag and the chart value', () => {
    for (const finding of [
      { state: 'absent' } as const,
      { state: 'unreadable', why: 'read ValidatingWebhookConfiguration nodeflavor: forbidden' } as const,
    ]) {
      const decision = guardDecision(config(['--no-webhook']), finding);
      assert.equal(decision.guarded, false);
      assert.ok(decision.refusal);
      assert.doesNotMatch(decision.refusal, /\n/);
      assert.match(decision.refusal, /refusing to run the controller unguarded/);
      assert.match(decision.refusal, /--allow-unguarded-nodes/);
      assert.match(decision.refusal, /controller\.allowUnguardedNodes=true/);
      assert.equal(decision.warning, undefined);
    }
  });

  it('runs unguarded with --allow-unguarded-nodes, with a loud warning instead', () => {
    const decision = guardDecision(config(['--no-webhook', '--allow-unguarded-nodes']), { state: 'absent' });
    assert.equal(decision.refusal, undefined);
    assert.equal(decision.guarded, false);
    assert.match(decision.warning ?? '', /^NODES ARE UNGUARDED: /);
  });

  it('reads the flag from NODEFLAVOR_ALLOW_UNGUARDED_NODES too', () => {
    const parsed = parseConfig(parseRunFlags(['--no-webhook'], { NODEFLAVOR_ALLOW_UNGUARDED_NODES: 'true' }));
    assert.equal(parsed.allowUnguardedNodes, true);
    assert.equal(config().allowUnguardedNodes, false);
  });
});

describe('placementDecision: the operator runs only on a trusted Node', () => {
  const inPod = (args: string[] = []) => parseConfig(parseRunFlags(['--node-name=n1', ...args], {}));
  const node = (labels: Record<string, string>, taints: NodePlacementFacts['taints'] = []) => ({
    name: 'n1',
    labels,
    taints,
  });
  const CONTROL_PLANE = { 'node-role.kubernetes.io/control-plane': '' };
  const SYSTEM = { 'node-restriction.kubernetes.io/nodeflavor-system': 'true' };

  it('checks nothing outside a Pod (no --node-name)', () => {
    assert.equal(config().nodeName, undefined);
    assert.deepEqual(placementDecision(config(), undefined), {});
    assert.deepEqual(placementDecision(config(), node({})), {});
  });

  it('takes the Node from --node-name or NODEFLAVOR_NODE_NAME, never from a bare NODE_NAME (CI agents set it)', () => {
    assert.equal(inPod().nodeName, 'n1');
    assert.equal(parseConfig(parseRunFlags([], { NODEFLAVOR_NODE_NAME: 'n2' })).nodeName, 'n2');
    assert.equal(parseConfig(parseRunFlags([], { NODE_NAME: 'built-in' })).nodeName, undefined);
  });

  it('runs on a control-plane node or a node an admin marked as a system node', () => {
    assert.deepEqual(DEFAULT_TRUSTED_NODE_LABELS, [
      'node-role.kubernetes.io/control-plane',
      'node-restriction.kubernetes.io/nodeflavor-system',
    ]);
    assert.deepEqual(placementDecision(inPod(), node(CONTROL_PLANE)), {});
    assert.deepEqual(placementDecision(inPod(), node(SYSTEM)), {});
    // Other taints (the control plane's own NoSchedule) are the scheduler's business.
    const tainted = node(CONTROL_PLANE, [
      { key: 'node-role.kubernetes.io/control-plane', effect: 'NoSchedule' },
    ]);
    assert.deepEqual(placementDecision(inPod(), tainted), {});
  });

  it('refuses, in one line saying how to mark a system node, every node that is not trusted', () => {
    const cases: [string, NodePlacementFacts | undefined, RegExp][] = [
      ['no trusted label', node({ 'kubernetes.io/hostname': 'n1' }), /carries none of the trusted labels/],
      // A kubelet may set node.kubernetes.io/ and foreign labels itself: they prove nothing.
      ['a label a kubelet can set', node({ 'node.kubernetes.io/nodeflavor-system': 'true' }), /none of/],
      [
        'joined through nodeflavor',
        node({ ...SYSTEM, 'nodeflavor.io/joined': 'true' }),
        /nodeflavor\.io\/joined/,
      ],
      [
        'joined, with a control-plane label',
        node({ ...CONTROL_PLANE, 'nodeflavor.io/joined': '' }),
        /it joined through nodeflavor/,
      ],
      [
        'quarantined',
        node(SYSTEM, [{ key: 'nodeflavor.io/unverified', effect: 'NoSchedule' }]),
        /quarantine taint nodeflavor\.io\/unverified/,
      ],
      ['missing', undefined, /no Node named "n1" exists/],
    ];
    for (const [what, facts, why] of cases) {
      const decision = placementDecision(inPod(), facts);
      assert.equal(decision.warning, undefined, what);
      const line = decision.refusal ?? '';
      assert.match(line, /^refusing to run on Node n1: /, what);
      assert.match(line, why, what);
      assert.doesNotMatch(line, /\n/, what);
      assert.match(
        line,
        /kubectl label node <name> node-restriction\.kubernetes\.io\/nodeflavor-system=true/,
        what,
      );
      assert.match(line, /--allow-untrusted-node/, what);
    }
  });

  it('the trusted keys are the flags given (--trusted-node-label, repeated), not the defaults', () => {
    const own = inPod(['--trusted-node-label=node-role.kubernetes.io/infra']);
    assert.deepEqual(own.trustedNodeLabels, ['node-role.kubernetes.io/infra']);
    assert.ok(placementDecision(own, node(CONTROL_PLANE)).refusal);
    assert.deepEqual(placementDecision(own, node({ 'node-role.kubernetes.io/infra': '' })), {});
    const two = inPod([
      '--trusted-node-label=node-role.kubernetes.io/infra',
      '--trusted-node-label=node-restriction.kubernetes.io/ops',
    ]);
    assert.deepEqual(placementDecision(two, node({ 'node-restriction.kubernetes.io/ops': 'x' })), {});
  });

  it('runs on an untrusted Node only with --allow-untrusted-node, with a loud warning', () => {
    const decision = placementDecision(inPod(['--allow-untrusted-node']), node({}));
    assert.equal(decision.refusal, undefined);
    assert.match(decision.warning ?? '', /^RUNNING ON AN UNTRUSTED NODE: .*--allow-untrusted-node/);
    assert.equal(inPod().allowUntrustedNode, false);
  });

  it('takes as trusted only label keys a kubelet cannot set on itself (NodeRestriction)', () => {
    for (const key of [
      'node-role.kubernetes.io/control-plane',
      'node-role.kubernetes.io/infra',
      'node-restriction.kubernetes.io/nodeflavor-system',
    ]) {
      assert.ok(isTrustedNodeLabelKey(key), key);
    }
    for (const key of [
      'node.kubernetes.io/system', // kubelet's own namespace: --node-labels may set it
      'kubelet.kubernetes.io/system',
      'kubernetes.io/hostname',
      'example.com/system',
      'nodeflavor.io/system',
      'node-role.kubernetes.io/', // no name
      'node-role.kubernetes.io',
      'xnode-role.kubernetes.io/a',
      'node-role.kubernetes.io/-a',
      `node-role.kubernetes.io/${'a'.repeat(64)}`,
    ]) {
      assert.ok(!isTrustedNodeLabelKey(key), key);
      assert.throws(
        () => parseConfig(parseRunFlags([`--trusted-node-label=${key}`], {})),
        /--trusted-node-labels\.0: .*a kubelet could set on its own Node.*node-restriction\.kubernetes\.io\//,
        key,
      );
    }
    assert.throws(() => parseConfig({ trustedNodeLabels: [] }), /--trusted-node-labels/);
  });

  it('judges in a fixed order: joined first, then quarantined, then unmarked', () => {
    const all = node({}, [{ key: 'nodeflavor.io/unverified' }]);
    assert.equal(placementFailure(all, DEFAULT_TRUSTED_NODE_LABELS)?.reason, 'Quarantined');
    const joined = node({ 'nodeflavor.io/joined': 'true' }, [{ key: 'nodeflavor.io/unverified' }]);
    assert.equal(placementFailure(joined, DEFAULT_TRUSTED_NODE_LABELS)?.reason, 'JoinedThroughNodeflavor');
    assert.equal(placementFailure(node({}), DEFAULT_TRUSTED_NODE_LABELS)?.reason, 'NotMarkedTrusted');
  });
});
