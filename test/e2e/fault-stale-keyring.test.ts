// Key rotation mid-join: a key is added and activated while a controller's key ring watch has
// gone quiet (a failpoint freezes it after the first ring: a stalled watch is only noticed after
// its inactivity timeout, minutes later), and a node joins with a token the new key derived (the
// issuer of another replica, or the CLI, reads the ring fresh). The controller's cached ring does
// not know the key. It must judge the node again with the ring read fresh before calling its
// token invalid: the node ends flavored, with no InvalidToken Event or metric on the way (before
// the fix it was marked InvalidToken and stayed quarantined until the watch caught up).
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { activateKey, addKey } from '../../src/flavor/keyring.ts';
import { readStoredKeyRing, replaceKeyRing } from '../../src/kube/keyring-store.ts';
import { freePort } from './cluster/ports.ts';
import type { ManagedProcess } from './cluster/process.ts';
import type { SimulatedKubelet } from './kubelet-sim/kubelet.ts';
import { prepareOperatorIdentity } from './support/chart.ts';
import { type E2EEnvironment, e2eEnvironment } from './support/environment.ts';
import {
  applyFlavorClass,
  ensureNamespace,
  installCrds,
  issue,
  joinWith,
  metricValue,
  OPERATOR_NAMESPACE,
  opsGet,
  startOperator,
  waitOperatorSettled,
} from './support/nodeflavor.ts';
import { tempDirForThisProcess } from './support/temp-dir.ts';
import { uniqueName, waitFor } from './support/wait.ts';

const FLAVOR_LABEL = 'nodeflavor.io/flavor';
const QUARANTINE = 'nodeflavor.io/unverified';
const KEY_RING = { namespace: OPERATOR_NAMESPACE, name: 'nodeflavor-hmac-keys' };

describe('key rotation mid-join: a token of a key the cached ring lacks', () => {
  let env: E2EEnvironment;
  let operator: ManagedProcess | undefined;
  const kubelets: SimulatedKubelet[] = [];
  const flavor = uniqueName('rotated');
  const logs = tempDirForThisProcess('nodeflavor-stale-ring-');

  before(async () => {
    env = await e2eEnvironment();
    await installCrds(env);
    await ensureNamespace(env, OPERATOR_NAMESPACE);
    await applyFlavorClass(env, flavor, { labels: { [FLAVOR_LABEL]: flavor } });
    await prepareOperatorIdentity(env);
  });

  after(async () => {
    for (const kubelet of kubelets) {
      kubelet.stop();
      await env.core.deleteNode({ name: kubelet.nodeName }).catch(() => undefined);
    }
    await operator?.stop();
  });

  it('is judged again with a fresh ring and verified, never marked InvalidToken', async (t) => {
    const metrics = await freePort();
    operator = startOperator(join(logs, 'operator.log'), ['--no-leader-elect'], {
      metricsPort: metrics,
      failpoints: ['freeze-keyring-watch'],
    });
    await waitFor(async () => (await opsGet(metrics, '/readyz'))[0] === 200, {
      what: 'the controller to be ready with its first ring',
      timeoutMs: 60_000,
    });
    // The cluster is shared: earlier files left nodes, some with wrong tokens on purpose. Count
    // from when this controller has judged them all.
    const existing = (await env.core.listNode()).items.length;
    await waitOperatorSettled(metrics, existing, { timeoutMs: 60_000 });
    const invalidSeries = 'nodeflavor_verifications_total{result="rejected",reason="InvalidToken"}';
    const invalidBefore = await metricValue(metrics, invalidSeries);

    // An admin rotates (`kubectl flavor keys add` + `activate`) while the watch is quiet.
    const stored = await readStoredKeyRing(env.kubeConfig, KEY_RING);
    const added = addKey(stored.ring);
    await replaceKeyRing(env.kubeConfig, KEY_RING, stored, activateKey(added.ring, added.id));
    const token = await issue(env, flavor); // reads the ring fresh: the new key derives it
    const name = `${flavor}-0`;
    const joinedAt = Date.now();
    kubelets.push(await joinWith(token.material, name));

    const settled = await waitFor(
      async () => {
        const node = await env.core.readNode({ name });
        if (node.metadata?.labels?.[FLAVOR_LABEL] === flavor) return 'verified';
        const events = await env.core.listNamespacedEvent({
          namespace: 'default',
          fieldSelector: `involvedObject.name=${name}`,
        });
        return events.items.some((e) => e.reason === 'InvalidToken') ? 'invalid' : undefined;
      },
      { what: `node ${name} to be verified or refused`, timeoutMs: 60_000, intervalMs: 200 },
    );
    t.diagnostic(`node ${settled} ${Date.now() - joinedAt} ms after it registered`);
    assert.equal(settled, 'verified', 'the node was judged with the rotated ring, not refused');
    const node = await env.core.readNode({ name });
    assert.ok(!node.spec?.taints?.some((taint) => taint.key === QUARANTINE), 'the quarantine was lifted');
    const events = await env.core.listNamespacedEvent({
      namespace: 'default',
      fieldSelector: `involvedObject.name=${name}`,
    });
    assert.deepEqual(
      events.items.filter((e) => e.type === 'Warning').map((e) => e.reason),
      [],
      'no Warning on the way',
    );
    assert.equal(await metricValue(metrics, invalidSeries), invalidBefore, 'no InvalidToken verdict counted');
  });
});
