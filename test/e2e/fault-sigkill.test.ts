// Fault tolerance: 200 nodes join (tokens issued as they go, two flavors alternating) while the
// controller, a real `nodeflavor run` process, is SIGKILLed at random moments and restarted each
// time. At the end every node carries exactly its flavor (labels and taints of its class, none of
// the other's), no token label, no quarantine taint; every token is used once and its bootstrap
// Secret is gone; tokens issued during the chaos but never used keep a Secret owned by their
// FlavoredToken. The kill schedule comes from a seeded PRNG: the seed is printed, and
// NODEFLAVOR_FAULT_SEED=<seed> replays the same schedule.
import assert from 'node:assert/strict';
import { before, describe, it } from 'node:test';
import { setTimeout as delay } from 'node:timers/promises';
import { VERIFIED_ANNOTATION } from '../../src/flavor/verdict.ts';
import type { IssuedToken } from '../../src/tokenissuer/issuance/issue.ts';
import { freePort } from './cluster/ports.ts';
import type { ManagedProcess } from './cluster/process.ts';
import type { E2EEnvironment } from './support/environment.ts';
import { customObjects, issue, joinWith, opsGet } from './support/nodeflavor.ts';
import { FLAVOR_LABEL, operatorFixture } from './support/operator-fixture.ts';
import { uniqueName, waitFor } from './support/wait.ts';

const NODES = 200;
const CONCURRENCY = 20;
/** Tokens issued during the chaos and never used: their Secrets must survive, owned. */
const SPARES = 6;
const TOKEN_LABEL = 'nodeflavor.io/token';
const QUARANTINE = 'nodeflavor.io/unverified';
const SEED = Number(process.env.NODEFLAVOR_FAULT_SEED ?? Math.floor(Math.random() * 2 ** 31));

/** mulberry32: a tiny seeded PRNG, uniform on [0, 1). */
function prng(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** The sum of a counter over all its label sets, from a Prometheus text page. */
function counterSum(metrics: string, name: string): number {
  let sum = 0;
  for (const line of metrics.split('\n')) {
    if (line.startsWith(`${name}{`) || line.startsWith(`${name} `)) sum += Number(line.split(' ').pop());
  }
  return sum;
}

interface TokenObject {
  metadata: { name: string; uid: string; deletionTimestamp?: string };
  spec: { maxUses?: number; flavorClassName: string };
  status?: { uses?: number; bindings?: { nodeName: string; verifiedAt?: string }[] };
}

interface Kill {
  /** Not before this many joins completed (spreads the kills over the burst). */
  atJoin: number;
  /** How long the controller works (after its caches synced) before the kill: a random moment. */
  jitterMs: number;
  /** How long the controller stays dead before its restart. */
  downMs: number;
}

describe('fault tolerance: the controller SIGKILLed at random moments during a 200-node burst', () => {
  const run = uniqueName('sk');
  const flavors = [`${run}-sweet`, `${run}-sour`] as const;
  const fx = operatorFixture({
    logPrefix: 'nodeflavor-sigkill-',
    flavorClasses: {
      [flavors[0]]: { labels: { [FLAVOR_LABEL]: flavors[0], 'sigkill.example.com/sweet': 'yes' } },
      [flavors[1]]: {
        labels: { [FLAVOR_LABEL]: flavors[1], 'sigkill.example.com/sour': 'yes' },
        taints: [{ key: 'sigkill.example.com/sour', value: 'yes', effect: 'NoSchedule' }],
      },
    },
  });
  const { operators, kubelets } = fx;
  let env: E2EEnvironment;
  before(() => {
    env = fx.env;
  });

  async function startController(): Promise<{ op: ManagedProcess; port: number }> {
    const port = await freePort();
    return { op: fx.start(['--no-leader-elect'], { metricsPort: port }), port };
  }

  async function listTokens(): Promise<Map<string, TokenObject>> {
    const list = (await customObjects(env.kubeConfig).listClusterCustomObject({
      group: 'nodeflavor.io',
      version: 'v1alpha1',
      plural: 'flavoredtokens',
    })) as { items: TokenObject[] };
    return new Map(list.items.map((t) => [t.metadata.name, t]));
  }

  async function bootstrapSecrets(): Promise<
    Map<string, { ownerReferences?: { kind: string; name: string; uid: string }[] }>
  > {
    const list = await env.core.listNamespacedSecret({
      namespace: 'kube-system',
      fieldSelector: 'type=bootstrap.kubernetes.io/token',
    });
    return new Map(list.items.map((s) => [s.metadata?.name ?? '', s.metadata ?? {}]));
  }

  it('every node ends with exactly its flavor; no token over its uses; no orphan', async (t) => {
    t.diagnostic(`seed ${SEED} (replay the kill schedule with NODEFLAVOR_FAULT_SEED=${SEED})`);
    const random = prng(SEED);
    const killCount = 5 + Math.floor(random() * 4); // 5..8
    // One kill in each slice of joins 10..190, at a random point of the slice.
    const span = (NODES - 20) / killCount;
    const kills: Kill[] = Array.from({ length: killCount }, (_, k) => ({
      atJoin: Math.floor(10 + k * span + random() * span),
      jitterMs: Math.floor(random() * 2500),
      downMs: Math.floor(random() * 1500),
    }));
    // Spares are issued right after these joins (while the controller may well be dead).
    const spareAt = Array.from({ length: SPARES }, () => Math.floor(random() * NODES));
    t.diagnostic(
      `kills: ${kills.map((k) => `after join ${k.atJoin}, ${k.jitterMs} ms into work, down ${k.downMs} ms`).join('; ')}`,
    );

    const names = Array.from({ length: NODES }, (_, i) => `${run}-${i}`);
    const flavorOf = (i: number) => flavors[i % 2] as string;
    const tokens = new Array<IssuedToken>(NODES);
    const spares: { token: IssuedToken; flavor: string }[] = [];
    let current = await startController();
    let joined = 0;
    let failed: Error | undefined;
    const started = Date.now();

    const chaos = async () => {
      for (const kill of kills) {
        await waitFor(() => joined >= kill.atJoin || failed !== undefined, {
          what: `join ${kill.atJoin} of the burst`,
          timeoutMs: 240_000,
          intervalMs: 50,
        });
        if (failed) return;
        // Killing a process that is still loading its code proves little: let it sync and
        // work, then kill it at a random moment of that work.
        const { op, port } = current;
        await waitFor(async () => (await opsGet(port, '/readyz'))[0] === 200, {
          what: `controller ${operators.length} to sync its caches`,
          timeoutMs: 60_000,
        });
        await delay(kill.jitterMs); // fault injection at a random moment, not synchronisation
        const reconciles = counterSum((await opsGet(port, '/metrics'))[1], 'nodeflavor_reconciles_total');
        await op.kill();
        t.diagnostic(
          `SIGKILL ${operators.length} at join ${joined}, after ${reconciles} reconciles (${((Date.now() - started) / 1000).toFixed(1)} s)`,
        );
        await delay(kill.downMs);
        current = await startController();
      }
    };
    let next = 0;
    const worker = async () => {
      while (next < NODES && !failed) {
        const i = next++;
        try {
          const token = await issue(env, flavorOf(i), { maxUses: 1 });
          tokens[i] = token;
          kubelets.push(await joinWith(token.material, names[i] as string));
          joined += 1;
          for (const at of spareAt) {
            if (at !== i) continue;
            const flavor = flavorOf(i + 1);
            spares.push({ token: await issue(env, flavor, { maxUses: 1 }), flavor });
          }
        } catch (error) {
          failed ??= new Error(`join ${i} (${names[i]}) failed: ${(error as Error).message}`);
        }
      }
    };
    await Promise.all([chaos(), ...Array.from({ length: CONCURRENCY }, worker)]);
    if (failed) throw failed;
    t.diagnostic(
      `${NODES} joins and ${kills.length} kills in ${((Date.now() - started) / 1000).toFixed(1)} s`,
    );
    const byName = new Map(names.map((name, i) => [name, i]));

    /** Everything that is not (yet) as it must end; [] when converged. */
    async function problems(): Promise<string[]> {
      const found: string[] = [];
      const nodes = (await env.core.listNode()).items.filter((n) => byName.has(n.metadata?.name ?? ''));
      if (nodes.length !== NODES) found.push(`${nodes.length} of ${NODES} nodes exist`);
      for (const node of nodes) {
        const name = node.metadata?.name ?? '';
        const i = byName.get(name) as number;
        const labels = node.metadata?.labels ?? {};
        const taints = (node.spec?.taints ?? []).map((taint) => taint.key);
        const sour = i % 2 === 1;
        const wrong: string[] = [];
        if (labels[FLAVOR_LABEL] !== flavorOf(i)) wrong.push(`flavor=${labels[FLAVOR_LABEL]}`);
        if ((labels['sigkill.example.com/sweet'] === 'yes') === sour) wrong.push('sweet label');
        if ((labels['sigkill.example.com/sour'] === 'yes') !== sour) wrong.push('sour label');
        if (taints.includes('sigkill.example.com/sour') !== sour) wrong.push('sour taint');
        if (labels[TOKEN_LABEL] !== undefined) wrong.push('token label left');
        if (taints.includes(QUARANTINE)) wrong.push('quarantine taint');
        const record = node.metadata?.annotations?.[VERIFIED_ANNOTATION];
        const tokenId = record ? (JSON.parse(record) as { tokenID?: string }).tokenID : undefined;
        if (tokenId !== tokens[i]?.tokenId) wrong.push(`verified by token ${tokenId ?? '(none)'}`);
        if (wrong.length > 0) found.push(`${name}: ${wrong.join(', ')}`);
      }
      const records = await listTokens();
      for (const [i, token] of tokens.entries()) {
        const record = records.get(token.name);
        if (!record) {
          found.push(`FlavoredToken ${token.name} is gone`);
          continue;
        }
        const uses = record.status?.uses ?? 0;
        const bindings = record.status?.bindings ?? [];
        if (uses !== 1 || bindings.length !== 1 || bindings[0]?.nodeName !== names[i])
          found.push(`${token.name}: uses ${uses}, bound to ${bindings.map((b) => b.nodeName).join(',')}`);
      }
      const secrets = await bootstrapSecrets();
      for (const token of tokens) {
        if (secrets.has(`bootstrap-token-${token.tokenId}`))
          found.push(`consumed token ${token.tokenId} still has its bootstrap Secret`);
      }
      return found;
    }
    await waitFor(
      async () => {
        const found = await problems();
        if (found.length === 0) return true;
        throw new Error(`${found.length} problem(s), e.g. ${found.slice(0, 5).join('; ')}`);
      },
      {
        what: 'every node to end exactly flavored and every token consumed',
        timeoutMs: 150_000,
        intervalMs: 1000,
      },
    );
    t.diagnostic(`converged ${((Date.now() - started) / 1000).toFixed(1)} s after the burst began`);
    assert.ok(current.op.running, `the last controller is still running:\n${current.op.lastLines()}`);

    // No token over its uses, among every FlavoredToken this test made.
    const records = await listTokens();
    for (const token of [...tokens, ...spares.map((s) => s.token)]) {
      const record = records.get(token.name);
      assert.ok(record, `FlavoredToken ${token.name} exists`);
      assert.ok(
        (record.status?.uses ?? 0) <= (record.spec.maxUses ?? 1),
        `${token.name}: uses ${record.status?.uses} > maxUses ${record.spec.maxUses}`,
      );
    }
    // Every consumed token's bootstrap Secret answers 404.
    for (const token of tokens) {
      const status = await env.core
        .readNamespacedSecret({ namespace: 'kube-system', name: `bootstrap-token-${token.tokenId}` })
        .then(
          () => 200,
          (error: { code?: number }) => error.code,
        );
      assert.equal(status, 404, `bootstrap-token-${token.tokenId} of a consumed token`);
    }
    // No orphan: an unused token keeps its Secret, owned by its (existing) FlavoredToken, and
    // every bootstrap Secret of this test's tokens is owned by one.
    assert.equal(spares.length, SPARES);
    const secrets = await bootstrapSecrets();
    for (const { token } of spares) {
      const record = records.get(token.name);
      assert.equal(record?.status?.uses ?? 0, 0, `spare ${token.name} unused`);
      assert.ok(secrets.has(`bootstrap-token-${token.tokenId}`), `spare ${token.name} keeps its Secret`);
    }
    const testTokenIds = new Set([...tokens, ...spares.map((s) => s.token)].map((tk) => tk.tokenId));
    for (const [name, meta] of secrets) {
      const id = name.replace(/^bootstrap-token-/, '');
      if (!testTokenIds.has(id)) continue;
      const owner = meta.ownerReferences?.find((o) => o.kind === 'FlavoredToken');
      const record = owner ? records.get(owner.name) : undefined;
      assert.ok(
        record && record.metadata.uid === owner?.uid && !record.metadata.deletionTimestamp,
        `${name} is owned by an existing FlavoredToken`,
      );
    }

    // The spares are revoked by deletion (the last controller runs the finalizer): record and
    // Secret both go, leaving nothing behind for the files after this one.
    for (const { token } of spares) {
      await customObjects(env.kubeConfig).deleteClusterCustomObject({
        group: 'nodeflavor.io',
        version: 'v1alpha1',
        plural: 'flavoredtokens',
        name: token.name,
      });
    }
    await waitFor(
      async () => {
        const [left, secretsLeft] = [await listTokens(), await bootstrapSecrets()];
        return spares.every(
          ({ token }) => !left.has(token.name) && !secretsLeft.has(`bootstrap-token-${token.tokenId}`),
        );
      },
      { what: 'the deleted spare tokens and their Secrets to be gone', timeoutMs: 30_000, intervalMs: 250 },
    );
  });
});
