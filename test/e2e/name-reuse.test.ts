// Re-used node names: a Node deleted and replaced by a machine of the same name. The binding of
// the gone Node is released (its uses are never given back), so the new node is judged on its
// own token, and it never inherits the old flavor.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { IssuedToken } from '../../src/tokenissuer/issuance/issue.ts';
import { createBootstrapToken, joinConfiguration } from './support/bootstrap.ts';
import { controllerHarness, FLAVOR_LABEL } from './support/controller-harness.ts';
import { issue, joinWith } from './support/nodeflavor.ts';
import { uniqueName, waitFor } from './support/wait.ts';

describe('re-used node names', () => {
  const h = controllerHarness({});

  /** Stops the node's kubelet, deletes its Node, and waits until its join released the name. */
  async function retire(name: string, kubelet: { stop: () => void }, token: IssuedToken) {
    kubelet.stop();
    await h.env.core.deleteNode({ name });
    await waitFor(async () => (await h.joinRecord(name))?.spec.holder?.tokenUID === undefined, {
      what: `the join of token ${token.name} to release the name of deleted node ${name}`,
    });
  }

  it('a node replaced by a machine of the same name with a new token of another flavor gets the new flavor', async () => {
    const name = uniqueName('reused');
    const sweetToken = await issue(h.env, h.sweet);
    const first = await h.join(sweetToken, name);
    await h.waitForFlavor(name, h.sweet);
    await retire(name, first, sweetToken);
    assert.equal((await h.tokenStatus(sweetToken)).uses, 1, 'the use is not given back');

    const sourToken = await issue(h.env, h.sour);
    await h.join(sourToken, name);
    await h.waitForFlavor(name, h.sour);
    const node = await h.env.core.readNode({ name });
    assert.equal(node.metadata?.labels?.[FLAVOR_LABEL], h.sour, 'judged on its own token, not the old one');
    assert.ok(!(await h.nodeEvents(name)).includes('Conflict'), 'no Conflict');
    const released = await h.env.core.listNamespacedEvent({
      namespace: 'default',
      fieldSelector: `involvedObject.name=${sweetToken.name}`,
    });
    assert.ok(released.items.some((e) => e.reason === 'BindingReleased'));
  });

  it('a pool token whose node comes back under a recycled name verifies again; uses only grow', async () => {
    const pool = await issue(h.env, h.sweet, { maxUses: 0 });
    const name = uniqueName('recycled');
    const first = await h.join(pool, name);
    await h.waitForFlavor(name, h.sweet);
    await retire(name, first, pool);

    await h.join(pool, name);
    await h.waitForFlavor(name, h.sweet);
    const status = await h.tokenStatus(pool);
    assert.equal(status.uses, 2);
    assert.deepEqual(
      status.bindings?.map((b) => b.nodeName),
      [name],
    );
    assert.ok(!(await h.nodeEvents(name)).includes('NodeUIDChanged'));
  });

  it('a replacement that joins with a plain kubeadm token does not inherit the old flavor', async () => {
    const token = await issue(h.env, h.sweet);
    const name = uniqueName('plainafter');
    const first = await h.join(token, name);
    await h.waitForFlavor(name, h.sweet);
    await retire(name, first, token);

    const plain = await createBootstrapToken(h.env);
    const kubelet = await joinWith(joinConfiguration(h.env, plain.token), name);
    try {
      await h.settled(name);
      const node = await h.env.core.readNode({ name });
      assert.equal(node.metadata?.labels?.[FLAVOR_LABEL], undefined, 'no flavor');
      assert.equal(node.metadata?.annotations?.['nodeflavor.io/verified'], undefined, 'no record');
    } finally {
      kubelet.stop();
    }
  });
});
