// The proof a node keeps once its token record is gone (deleted with revocationPolicy Keep) is the
// nodeflavor.io/verified record on the Node, signed under the key ring for that Node's UID. The
// controller accepts nothing else as proof: a record edited, copied from another Node, or written
// by hand (by anyone who can write the annotation, a kubelet if the guard were off) earns no
// flavor and strips the one the node had.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { VERIFIED_ANNOTATION } from '../../src/flavor/verdict.ts';
import type { IssuedToken } from '../../src/tokenissuer/issuance/issue.ts';
import { controllerHarness, FLAVOR_LABEL } from './support/controller-harness.ts';
import { customObjects, issue } from './support/nodeflavor.ts';
import { uniqueName, waitFor } from './support/wait.ts';

const QUARANTINE = 'nodeflavor.io/unverified';

describe('the verification record: only what the controller signed for this Node is proof', () => {
  const h = controllerHarness({});

  /** A node verified with `flavor`, whose FlavoredToken is then deleted (revocationPolicy Keep). */
  async function keptNode(flavor: string): Promise<string> {
    const token: IssuedToken = await issue(h.env, flavor);
    const name = uniqueName('kept');
    await h.join(token, name);
    await h.waitForFlavor(name, flavor);
    const tokens = customObjects(h.env.kubeConfig);
    const ref = { group: 'nodeflavor.io', version: 'v1alpha1', plural: 'flavoredtokens', name: token.name };
    await tokens.deleteClusterCustomObject(ref);
    await waitFor(
      async () =>
        (await tokens
          .getClusterCustomObject(ref)
          .then(() => false)
          .catch(() => true)) || undefined,
      {
        what: `FlavoredToken ${token.name} to be gone`,
      },
    );
    return name;
  }

  const record = async (name: string) =>
    (await h.env.core.readNode({ name })).metadata?.annotations?.[VERIFIED_ANNOTATION] ?? '';

  async function setRecord(name: string, value: string) {
    await h.env.core.patchNode({
      name,
      body: [{ op: 'replace', path: '/metadata/annotations/nodeflavor.io~1verified', value }],
    });
  }

  async function assertStripped(name: string) {
    await waitFor(
      async () => {
        const node = await h.env.core.readNode({ name });
        return (
          node.metadata?.labels?.[FLAVOR_LABEL] === undefined &&
          node.spec?.taints?.some((t) => t.key === QUARANTINE)
        );
      },
      { what: `node ${name} to lose its flavor and be quarantined` },
    );
  }

  it('a genuine record keeps the flavor after the token is deleted (Keep), and it carries a MAC', async () => {
    const name = await keptNode(h.sour);
    await h.settled(name);
    const node = await h.env.core.readNode({ name });
    assert.equal(node.metadata?.labels?.[FLAVOR_LABEL], h.sour);
    assert.match(JSON.parse(await record(name)).mac ?? '', /^[A-Za-z0-9_-]{43}$/);
  });

  it('a record whose class was edited (sour to sweet) is InvalidRecord: no sweet flavor, the sour one stripped', async () => {
    const name = await keptNode(h.sour);
    const forged = JSON.parse(await record(name)) as { flavorClass: string };
    forged.flavorClass = h.sweet;
    await setRecord(name, JSON.stringify(forged));
    await h.nodeWarning(name, 'InvalidRecord');
    await assertStripped(name);
    const node = await h.env.core.readNode({ name });
    assert.notEqual(node.metadata?.labels?.[FLAVOR_LABEL], h.sweet, 'never the forged flavor');
  });

  it('a genuine record copied onto another Node is InvalidRecord there', async () => {
    const sweetNode = await keptNode(h.sweet);
    const sourNode = await keptNode(h.sour);
    await setRecord(sourNode, await record(sweetNode));
    await h.nodeWarning(sourNode, 'InvalidRecord');
    await assertStripped(sourNode);
    // The original keeps its flavor.
    await h.settled(sweetNode);
    assert.equal((await h.env.core.readNode({ name: sweetNode })).metadata?.labels?.[FLAVOR_LABEL], h.sweet);
  });

  it('a hand-written record without a MAC (what a kubelet could write if the guard were off) is InvalidRecord', async () => {
    const name = await keptNode(h.sour);
    const { mac: _mac, ...unsigned } = JSON.parse(await record(name)) as Record<string, string>;
    await setRecord(name, JSON.stringify({ ...unsigned, flavorClass: h.sweet }));
    await h.nodeWarning(name, 'InvalidRecord');
    await assertStripped(name);
  });
});
