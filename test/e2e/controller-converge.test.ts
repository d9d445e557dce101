// A FlavorClass change converges every node of the flavor exactly (issue 17): an edit, a
// rename (delete one class, create another) and a deletion leave each node with what the class
// now says, or with no flavor at all and quarantined, for keys in any domain; keys others set on
// the node are never touched. The node's nodeflavor.io/applied record is what lets the
// controller remove keys outside nodeflavor.io/ that no class names any more.
import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import type { V1Node, V1Taint } from '@kubernetes/client-node';
import { PatchStrategy, setHeaderOptions } from '@kubernetes/client-node';
import { APPLIED_ANNOTATION } from '../../src/flavor/applied-record.ts';
import { VERIFIED_ANNOTATION } from '../../src/flavor/verdict.ts';
import { controllerHarness, FLAVOR_LABEL } from './support/controller-harness.ts';
import {
  applyFlavorClass,
  deleteFlavorClass,
  type FlavorClassSpecInput,
  issue,
} from './support/nodeflavor.ts';
import { uniqueName, waitFor } from './support/wait.ts';

const QUARANTINE = 'nodeflavor.io/unverified';
const mergePatch = setHeaderOptions('Content-Type', PatchStrategy.MergePatch);

/** A class with keys in several domains, among them a taint outside nodeflavor.io/. */
function classSpec(flavor: string): FlavorClassSpecInput {
  return {
    labels: { [FLAVOR_LABEL]: flavor, 'example.com/tier': 'gold', 'team.example.org/zone': 'a' },
    annotations: { 'example.com/note': 'gpu nodes', 'nodeflavor.io/contact': 'sre' },
    taints: [
      { key: 'example.com/gpu', value: 'present', effect: 'NoSchedule' },
      { key: 'nodeflavor.io/dedicated', value: flavor, effect: 'NoSchedule' },
    ],
  };
}

/** What another party (an admin, another controller) put on the node: never nodeflavor's to touch. */
const OTHERS = {
  labels: { 'other.example.net/rack': 'r1' },
  annotations: { 'other.example.net/owner': 'ops' },
  taint: { key: 'other.example.net/maintenance', value: 'soon', effect: 'NoSchedule' },
};

/** Taints outside kubernetes.io (kube-controller-manager's not-ready taints come and go). */
function ownTaints(node: V1Node): string[] {
  return (node.spec?.taints ?? [])
    .filter((t) => !t.key.includes('kubernetes.io/'))
    .map((t) => `${t.key}=${t.value ?? ''}:${t.effect}`)
    .sort();
}

describe('controller: a FlavorClass change converges every node exactly', () => {
  const h = controllerHarness({});
  const read = (name: string) => h.env.core.readNode({ name });
  // Later files share the cluster: leave no class claiming these keys behind.
  const created = new Set<string>();
  const applyClass = (name: string, spec: FlavorClassSpecInput) => {
    created.add(name);
    return applyFlavorClass(h.env, name, spec);
  };
  after(async () => {
    for (const name of created) await deleteFlavorClass(h.env, name);
  });

  async function flavoredNode(flavor: string): Promise<string> {
    const name = uniqueName(`${flavor.slice(0, 12)}-n`);
    await h.join(await issue(h.env, flavor), name);
    await h.waitForFlavor(name, flavor);
    return name;
  }

  /** Others' keys, written as an admin would; retried when the controller wrote in between. */
  async function addOthersKeys(name: string): Promise<void> {
    await h.env.core.patchNode(
      { name, body: { metadata: { labels: OTHERS.labels, annotations: OTHERS.annotations } } },
      mergePatch,
    );
    await waitFor(
      async () => {
        const node = await read(name);
        const taints: V1Taint[] = [...(node.spec?.taints ?? []), OTHERS.taint];
        await h.env.core.patchNode({
          name,
          body: [
            { op: 'test', path: '/metadata/resourceVersion', value: node.metadata?.resourceVersion },
            { op: 'add', path: '/spec/taints', value: taints },
          ],
        });
        return true;
      },
      { what: `an admin's taint on ${name}` },
    );
  }

  function assertOthersUntouched(node: V1Node): void {
    assert.equal(node.metadata?.labels?.['other.example.net/rack'], 'r1', "others' label kept");
    assert.equal(node.metadata?.annotations?.['other.example.net/owner'], 'ops', "others' annotation kept");
    assert.ok(
      ownTaints(node).includes('other.example.net/maintenance=soon:NoSchedule'),
      "others' taint kept",
    );
  }

  /** The node carries no key of the class and is quarantined. */
  function assertNoFlavor(node: V1Node, spec: FlavorClassSpecInput): void {
    for (const key of Object.keys(spec.labels ?? {}))
      assert.equal(node.metadata?.labels?.[key], undefined, `label ${key} removed`);
    for (const key of [...Object.keys(spec.annotations ?? {}), VERIFIED_ANNOTATION, APPLIED_ANNOTATION])
      assert.equal(node.metadata?.annotations?.[key], undefined, `annotation ${key} removed`);
    assert.deepEqual(ownTaints(node), [
      `${QUARANTINE}=:NoSchedule`,
      'other.example.net/maintenance=soon:NoSchedule',
    ]);
  }

  /** Until the node has lost every key of the class (its labels, annotations and taints). */
  function waitUnflavored(name: string, spec: FlavorClassSpecInput): Promise<V1Node> {
    return waitFor(
      async () => {
        const node = await read(name);
        const labels = Object.keys(spec.labels ?? {}).filter((k) => node.metadata?.labels?.[k] !== undefined);
        const annotations = Object.keys(spec.annotations ?? {}).filter(
          (k) => node.metadata?.annotations?.[k] !== undefined,
        );
        const taints = (spec.taints ?? []).filter((t) => node.spec?.taints?.some((n) => n.key === t.key));
        const quarantined = node.spec?.taints?.some((t) => t.key === QUARANTINE);
        return labels.length + annotations.length + taints.length === 0 && quarantined ? node : undefined;
      },
      { what: `node ${name} to lose every key of its class and be quarantined` },
    );
  }

  it('an edit: a dropped taint outside nodeflavor.io/, a changed label, a dropped annotation', async () => {
    const flavor = uniqueName('edit');
    const spec = classSpec(flavor);
    await applyClass(flavor, spec);
    const name = await flavoredNode(flavor);
    await addOthersKeys(name);

    const edited: FlavorClassSpecInput = {
      labels: { ...spec.labels, 'example.com/tier': 'silver' },
      annotations: { 'nodeflavor.io/contact': 'sre' },
      taints: [{ key: 'nodeflavor.io/dedicated', value: flavor, effect: 'NoSchedule' }],
    };
    await applyClass(flavor, edited);
    await waitFor(
      async () => {
        const n = await read(name);
        return (
          n.metadata?.labels?.['example.com/tier'] === 'silver' &&
          n.metadata?.annotations?.['example.com/note'] === undefined &&
          !n.spec?.taints?.some((t) => t.key === 'example.com/gpu')
        );
      },
      { what: `node ${name} to follow the edit (tier silver, no note, no example.com/gpu taint)` },
    );
    await h.settled(name);
    const settled = await read(name);
    assert.equal(settled.metadata?.labels?.[FLAVOR_LABEL], flavor);
    assert.equal(settled.metadata?.labels?.['team.example.org/zone'], 'a');
    assert.equal(settled.metadata?.annotations?.['nodeflavor.io/contact'], 'sre');
    assert.deepEqual(ownTaints(settled), [
      `nodeflavor.io/dedicated=${flavor}:NoSchedule`,
      'other.example.net/maintenance=soon:NoSchedule',
    ]);
    assertOthersUntouched(settled);
    // The record names exactly the keys the class now has: what a later edit may remove.
    const record = JSON.parse(settled.metadata?.annotations?.[APPLIED_ANNOTATION] ?? '{}');
    assert.deepEqual(record.labels, Object.keys(edited.labels ?? {}).sort());
    assert.deepEqual(record.annotations, ['nodeflavor.io/contact']);
    assert.deepEqual(record.taints, ['nodeflavor.io/dedicated:NoSchedule']);
  });

  it('a deletion: every key of the class goes, the node is quarantined with an Event', async () => {
    const flavor = uniqueName('delete');
    const spec = classSpec(flavor);
    await applyClass(flavor, spec);
    const name = await flavoredNode(flavor);
    await addOthersKeys(name);

    await deleteFlavorClass(h.env, flavor);
    await waitUnflavored(name, spec);
    await h.nodeWarning(name, 'FlavorClassNotFound');
    await h.settled(name);
    const node = await read(name);
    assertNoFlavor(node, spec);
    assertOthersUntouched(node);
  });

  it('a record that proves nothing removes nothing unclaimed, says so, and is replaced', async () => {
    const flavor = uniqueName('forged');
    await applyClass(flavor, classSpec(flavor));
    const name = await flavoredNode(flavor);
    await addOthersKeys(name);
    const genuine = (await read(name)).metadata?.annotations?.[APPLIED_ANNOTATION];
    // What someone hoping to have others' keys stripped would write: their keys, any MAC.
    const forged = JSON.stringify({
      v: 1,
      labels: ['other.example.net/rack'],
      annotations: ['other.example.net/owner'],
      taints: ['other.example.net/maintenance:NoSchedule'],
      mac: 'A'.repeat(43),
    });
    await h.env.core.patchNode({
      name,
      body: [{ op: 'replace', path: '/metadata/annotations/nodeflavor.io~1applied', value: forged }],
    });
    await h.nodeWarning(name, 'InvalidAppliedRecord');
    await waitFor(async () => (await read(name)).metadata?.annotations?.[APPLIED_ANNOTATION] === genuine, {
      what: `node ${name}'s record to be written again`,
    });
    await h.settled(name);
    assertOthersUntouched(await read(name));
  });

  it('a new class: a node that carried its key before the class existed is judged at once, not at the resync', async () => {
    // Set on a joined node while no class named the key (so nothing guarded it).
    const early = uniqueName('early');
    const name = await flavoredNode(h.sweet);
    const key = `example.com/${early}`;
    await h.env.core.patchNode({ name, body: { metadata: { labels: { [key]: 'gold' } } } }, mergePatch);
    await h.settled(name);
    assert.equal((await read(name)).metadata?.labels?.[key], 'gold', 'not protected yet: it stays');
    // The class appears: the controller takes the key off now (its resync is 10 minutes away).
    await applyClass(early, { labels: { [key]: 'gold' } });
    await waitFor(async () => (await read(name)).metadata?.labels?.[key] === undefined, {
      what: `the controller to strip ${key} from ${name} once the class names it`,
      timeoutMs: 30_000,
    });
    assert.equal((await read(name)).metadata?.labels?.[FLAVOR_LABEL], h.sweet, 'its own flavor stays');
  });

  it('a rename: nodes of the old class lose its keys; the new class flavors its own nodes', async () => {
    const oldName = uniqueName('rename-old');
    const newName = uniqueName('rename-new');
    await applyClass(oldName, classSpec(oldName));
    const oldNode = await flavoredNode(oldName);
    await addOthersKeys(oldNode);

    // A rename is a deletion and a creation (`kubectl delete` then `kubectl apply`).
    await deleteFlavorClass(h.env, oldName);
    await waitUnflavored(oldNode, classSpec(oldName));
    await h.nodeWarning(oldNode, 'FlavorClassNotFound');
    await applyClass(newName, classSpec(newName));
    const newNode = await flavoredNode(newName);

    await h.settled(oldNode);
    const old = await read(oldNode);
    assertNoFlavor(old, classSpec(oldName));
    assertOthersUntouched(old);
    const renamed = await read(newNode);
    assert.equal(renamed.metadata?.labels?.['example.com/tier'], 'gold');
    assert.deepEqual(ownTaints(renamed), [
      'example.com/gpu=present:NoSchedule',
      `nodeflavor.io/dedicated=${newName}:NoSchedule`,
    ]);

    // Re-created, the old class flavors its node again: its token was verified, only the class was gone.
    await applyClass(oldName, classSpec(oldName));
    await h.waitForFlavor(oldNode, oldName);
    await h.settled(oldNode);
    const back = await read(oldNode);
    assert.equal(back.metadata?.labels?.['example.com/tier'], 'gold');
    assert.deepEqual(ownTaints(back), [
      'example.com/gpu=present:NoSchedule',
      `nodeflavor.io/dedicated=${oldName}:NoSchedule`,
      'other.example.net/maintenance=soon:NoSchedule',
    ]);
    assertOthersUntouched(back);
  });
});
