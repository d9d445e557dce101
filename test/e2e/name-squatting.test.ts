// An insider with one legitimate token: kubeadm lets any bootstrap-token holder ask for a kubelet
// certificate for any node name. nodeflavor's tokens carry their own bootstrap group, which
// kube-controller-manager does not auto-approve; nodeflavor approves only a CSR that a careful
// approver would and whose name is free or already bound to that very token. Where a cluster
// keeps kubeadm's auto-approval, the squatter gets a certificate, but the controller still binds
// nothing to it and the victim keeps its flavor.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { KUBEADM_BOOTSTRAP_GROUP } from '../../src/tokenissuer/config.ts';
import { createBootstrapToken } from './support/bootstrap.ts';
import {
  controllerHarness,
  FLAVOR_LABEL,
  metricOnceSet,
  rejectedMetric,
} from './support/controller-harness.ts';
import { bootstrapTokenOf, createCsrAs, csrDecision } from './support/csr.ts';
import { issue } from './support/nodeflavor.ts';
import { uniqueName } from './support/wait.ts';

describe('name squatting, default setup: nodeflavor is the only approver of its group', () => {
  const h = controllerHarness({});

  it('a holder of another unused token asks for a verified node’s name: denied NameTaken, the victim keeps its flavor', async () => {
    const victimToken = await issue(h.env, h.sweet);
    const victim = uniqueName('victim');
    await h.join(victimToken, victim);
    await h.waitForFlavor(victim, h.sweet);

    const squatterToken = await issue(h.env, h.sour);
    const csr = await createCsrAs(h.env, bootstrapTokenOf(squatterToken), { nodeName: victim });
    const decision = await csrDecision(h.env, csr);
    assert.equal(decision.type, 'Denied', 'no certificate for system:node:<victim>');
    assert.equal(decision.reason, 'NameTaken');
    assert.equal(decision.certificate, false);

    const warning = await h.tokenWarning(squatterToken, 'NameTaken');
    assert.match(warning.message ?? '', /is bound to another token/);
    assert.ok((await rejectedMetric(h.registry, 'NameTaken')) >= 1, 'the rejection is counted');
    const node = await h.env.core.readNode({ name: victim });
    assert.equal(node.metadata?.labels?.[FLAVOR_LABEL], h.sweet, 'the victim keeps its flavor');
    assert.ok(!(await h.nodeEvents(victim)).includes('Conflict'), 'no Conflict on the victim');

    // The squatter's token lost nothing and still joins a node of its own.
    assert.equal((await h.tokenStatus(squatterToken)).uses ?? 0, 0);
    const own = uniqueName('own');
    await h.join(squatterToken, own);
    await h.waitForFlavor(own, h.sour);
  });

  it('asks for the name of an existing Node that no nodeflavor token created: denied NameTaken', async () => {
    const plain = uniqueName('plain');
    await h.env.core.createNode({ body: { metadata: { name: plain } } });
    try {
      await h.settled(plain); // the Node existed before the request, as a victim's does
      const token = await issue(h.env, h.sweet);
      const decision = await csrDecision(
        h.env,
        await createCsrAs(h.env, bootstrapTokenOf(token), { nodeName: plain }),
      );
      assert.equal(decision.type, 'Denied');
      assert.equal(decision.reason, 'NameTaken');
      assert.match(decision.message ?? '', /existed before this request/);
      const node = await h.env.core.readNode({ name: plain });
      assert.ok(
        !(node.spec?.taints ?? []).some((t) => t.key.startsWith('nodeflavor.io/')),
        'the plain node is left alone (no quarantine)',
      );
    } finally {
      await h.env.core.deleteNode({ name: plain });
    }
  });

  it('checks every CSR as a careful approver does: each bad request is denied MalformedCSR and uses nothing', async () => {
    const token = await issue(h.env, h.sweet);
    const bad: [string, Parameters<typeof createCsrAs>[2], RegExp][] = [
      [
        'system:masters',
        { nodeName: uniqueName('o'), organizations: ['system:nodes', 'system:masters'] },
        /exactly system:nodes/,
      ],
      ['a SAN', { nodeName: uniqueName('san'), dnsNames: ['api.example.com'] }, /alternative names/],
      [
        'server auth',
        { nodeName: uniqueName('u'), usages: ['digital signature', 'client auth', 'server auth'] },
        /usages/,
      ],
      ['RSA 1024', { nodeName: uniqueName('rsa'), key: 'rsa-1024' }, /RSA of at least 2048/],
      ['400 days', { nodeName: uniqueName('d'), expirationSeconds: 400 * 24 * 3600 }, /duration/],
    ];
    for (const [what, request, problem] of bad) {
      const decision = await csrDecision(h.env, await createCsrAs(h.env, bootstrapTokenOf(token), request));
      assert.equal(decision.type, 'Denied', what);
      assert.equal(decision.reason, 'MalformedCSR', what);
      assert.match(decision.message ?? '', problem, what);
    }
    assert.equal((await h.tokenStatus(token)).uses ?? 0, 0, 'no bad request used the token');
    const name = uniqueName('careful');
    await h.join(token, name);
    await h.waitForFlavor(name, h.sweet);
  });

  it('a second CSR from a token for a name it bound and that registered is denied AlreadyJoined, with an Event', async () => {
    const pool = await issue(h.env, h.sweet, { maxUses: 0 });
    const name = uniqueName('pool');
    await h.join(pool, name);
    await h.waitForFlavor(name, h.sweet);
    const decision = await csrDecision(
      h.env,
      await createCsrAs(h.env, bootstrapTokenOf(pool), { nodeName: name }),
    );
    assert.equal(decision.type, 'Denied', 'never left pending');
    assert.equal(decision.reason, 'AlreadyJoined');
    await h.tokenWarning(pool, 'AlreadyJoined');
  });

  it('a bootstrap token of nodeflavor’s group that nodeflavor did not issue is denied UnknownToken', async () => {
    const forged = await createBootstrapToken(h.env, { groups: 'system:bootstrappers:nodeflavor' });
    const decision = await csrDecision(
      h.env,
      await createCsrAs(h.env, forged.token, { nodeName: uniqueName('f') }),
    );
    assert.equal(decision.type, 'Denied');
    assert.equal(decision.reason, 'UnknownToken');
  });

  it('knows its group is not auto-approved by kube-controller-manager (metric 0)', async () => {
    assert.equal(await metricOnceSet(h.registry, 'nodeflavor_bootstrap_group_auto_approved'), 0);
  });

  it('a plain kubeadm token’s CSR is left to kube-controller-manager, untouched', async () => {
    const plain = await createBootstrapToken(h.env, { groups: KUBEADM_BOOTSTRAP_GROUP });
    const decision = await csrDecision(
      h.env,
      await createCsrAs(h.env, plain.token, { nodeName: uniqueName('k') }),
    );
    assert.equal(decision.type, 'Approved');
    assert.notEqual(
      decision.reason,
      'NodeflavorBound',
      'approved by kube-controller-manager, not nodeflavor',
    );
  });
});

describe('name squatting where kubeadm’s auto-approval is kept: the controller fails closed', () => {
  const h = controllerHarness({ bootstrapGroup: KUBEADM_BOOTSTRAP_GROUP, csrApprover: false });

  it('says loudly that its group is auto-approved for any node name (metric 1)', async () => {
    assert.equal(await metricOnceSet(h.registry, 'nodeflavor_bootstrap_group_auto_approved'), 1);
  });

  it('the squatter gets a certificate from kube-controller-manager, but no binding: the victim keeps its flavor', async () => {
    const victimToken = await issue(h.env, h.sweet, { authExtraGroups: KUBEADM_BOOTSTRAP_GROUP });
    const victim = uniqueName('victim');
    await h.join(victimToken, victim);
    await h.waitForFlavor(victim, h.sweet);

    const squatterToken = await issue(h.env, h.sour, { authExtraGroups: KUBEADM_BOOTSTRAP_GROUP });
    const decision = await csrDecision(
      h.env,
      await createCsrAs(h.env, bootstrapTokenOf(squatterToken), { nodeName: victim }),
    );
    assert.equal(
      decision.type,
      'Approved',
      'what remains possible with auto-approval (docs/threat-model.md)',
    );
    await h.tokenWarning(squatterToken, 'NameTaken');
    assert.deepEqual(
      (await h.tokenStatus(squatterToken)).bindings ?? [],
      [],
      'nothing bound to the squatter',
    );
    const node = await h.env.core.readNode({ name: victim });
    assert.equal(node.metadata?.labels?.[FLAVOR_LABEL], h.sweet, 'the victim keeps its flavor');
    assert.ok(!(await h.nodeEvents(victim)).includes('Conflict'), 'no Conflict on the victim');
  });
});
