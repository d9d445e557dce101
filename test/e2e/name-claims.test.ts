// Two tokens, one node name, the same instant (issue 25, item 1): the bootstrap group may list and
// watch every CSR, so an insider can answer a victim's CSR for a name within milliseconds with
// one of its own. Different tokens are reconciled in parallel (16 workers), and a name check that
// read a cache only the watch updates let both be bound and both approved. A NodeNameClaim (one
// object per name, created before any binding) is the one linearisation point: in every round
// exactly one CSR is approved, the other denied NameTaken, and one token records the binding.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { controllerHarness } from './support/controller-harness.ts';
import { bootstrapTokenOf, createCsrAs, csrDecision } from './support/csr.ts';
import { customObjects, issue } from './support/nodeflavor.ts';
import { uniqueName } from './support/wait.ts';

const ROUNDS = 25;

describe('two tokens ask for one node name at the same instant', () => {
  const h = controllerHarness({});

  it(`${ROUNDS} rounds of simultaneous CSRs: the name is claimed exactly once every time`, async () => {
    const outcomes: string[] = [];
    for (let round = 0; round < ROUNDS; round++) {
      const [a, b] = await Promise.all([issue(h.env, h.sweet), issue(h.env, h.sour)]);
      const name = uniqueName('contested');
      const csrs = await Promise.all(
        [a, b].map((token) => createCsrAs(h.env, bootstrapTokenOf(token), { nodeName: name })),
      );
      const decisions = await Promise.all(csrs.map((csr) => csrDecision(h.env, csr)));
      const summary = decisions.map((d) => `${d.type}/${d.reason}`).join(' ');
      outcomes.push(summary);
      const approved = decisions.filter((d) => d.type === 'Approved');
      assert.equal(approved.length, 1, `round ${round}: exactly one approved, got ${summary}`);
      const denied = decisions.find((d) => d.type === 'Denied');
      assert.equal(denied?.reason, 'NameTaken', `round ${round}: the other is denied NameTaken (${summary})`);
      const statuses = await Promise.all([a, b].map((token) => h.tokenStatus(token)));
      const binders = statuses.filter((s) => (s.bindings ?? []).some((binding) => binding.nodeName === name));
      assert.equal(binders.length, 1, `round ${round}: one token records the binding`);
      const claim = (await customObjects(h.env.kubeConfig).getClusterCustomObject({
        group: 'nodeflavor.io',
        version: 'v1alpha1',
        plural: 'nodenameclaims',
        name,
      })) as { spec: { holder?: { tokenID: string } } };
      const winner = decisions[0]?.type === 'Approved' ? a : b;
      assert.equal(claim.spec.holder?.tokenID, winner.tokenId, `round ${round}: the claim names the winner`);
    }
    process.stderr.write(
      `[name-claims] ${outcomes.length} rounds: ${new Set(outcomes).size} outcome kinds\n`,
    );
  });
});
