// A FlavorClass's status is written, by the controller (as the chart's ServiceAccount, so the
// chart grants flavorclasses/status), and shown by `kubectl get flavorclasses`: the count of
// verified nodes of the flavor, Ready, and the generation it reflects, following joins, spec
// edits and node deletions.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { Condition } from '../../src/flavor/resources.ts';
import { kubeFetch } from '../../src/runtime/fetch.ts';
import { controllerHarness, FLAVOR_LABEL } from './support/controller-harness.ts';
import { applyFlavorClass, customObjects, issue } from './support/nodeflavor.ts';
import { uniqueName, waitFor } from './support/wait.ts';

interface StoredClass {
  metadata: { generation?: number };
  status?: { nodes?: number; observedGeneration?: number; conditions?: Condition[] };
}

describe('controller: FlavorClass status', () => {
  const h = controllerHarness({});
  const readClass = async (name: string) =>
    (await customObjects(h.env.kubeConfig).getClusterCustomObject({
      group: 'nodeflavor.io',
      version: 'v1alpha1',
      plural: 'flavorclasses',
      name,
    })) as StoredClass;
  /** Until the status says `nodes` for the class's current generation, Ready True. */
  const waitStatus = (name: string, nodes: number) =>
    waitFor(
      async () => {
        const stored = await readClass(name);
        const ready = stored.status?.conditions?.find((c) => c.type === 'Ready');
        const current =
          stored.status?.observedGeneration === stored.metadata.generation &&
          ready?.observedGeneration === stored.metadata.generation;
        return stored.status?.nodes === nodes && ready?.status === 'True' && current ? stored : undefined;
      },
      { what: `FlavorClass ${name}'s status to count ${nodes} node(s), Ready, for its generation` },
    );
  /** What `kubectl get flavorclass NAME` prints: the API server's Table of the printer columns. */
  const table = async (name: string): Promise<Record<string, unknown>> => {
    const response = await kubeFetch(h.env.kubeConfig, `/apis/nodeflavor.io/v1alpha1/flavorclasses/${name}`, {
      headers: { Accept: 'application/json;as=Table;v=v1;g=meta.k8s.io' },
    });
    const body = (await response.json()) as {
      columnDefinitions: { name: string }[];
      rows: { cells: unknown[] }[];
    };
    const cells = body.rows[0]?.cells ?? [];
    return Object.fromEntries(body.columnDefinitions.map((c, i) => [c.name, cells[i]]));
  };

  it('counts verified nodes, shows them in kubectl get, follows edits and deletions', async () => {
    await waitStatus(h.sweet, 0);

    const name = uniqueName('cls-n');
    const kubelet = await h.join(await issue(h.env, h.sweet), name);
    await h.waitForFlavor(name, h.sweet);
    const counted = await waitStatus(h.sweet, 1);
    assert.equal(counted.status?.conditions?.find((c) => c.type === 'Ready')?.reason, 'Accepted');
    const columns = await table(h.sweet);
    assert.equal(columns.Nodes, 1);
    assert.equal(columns.Ready, 'True');

    // A spec edit: a new generation, observed on the status and its condition.
    await applyFlavorClass(h.env, h.sweet, { labels: { [FLAVOR_LABEL]: h.sweet }, description: 'edited' });
    const edited = await waitStatus(h.sweet, 1);
    assert.ok(
      (edited.metadata.generation ?? 0) > (counted.metadata.generation ?? 0),
      'the edit is a generation',
    );
    assert.equal((await table(h.sweet)).Description, 'edited');

    // The other class counts none of it.
    await waitStatus(h.sour, 0);

    kubelet.stop();
    await h.env.core.deleteNode({ name });
    await waitStatus(h.sweet, 0);
  });
});
