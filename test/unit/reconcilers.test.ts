// The join, node and token reconcilers on event sequences over the real wiring table, without an
// API server (test/unit/support/controller-sim.ts): each scenario runs to quiescence and then
// asserts what was written, how often, and that a further pass writes nothing.

import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ATTESTED_ANNOTATION } from '../../src/flavor/attestation-decision.ts';
import { deriveFlavorToken } from '../../src/flavor/flavor-token.ts';
import type { NodeNameClaim, StoredFlavoredToken } from '../../src/flavor/resources.ts';
import type { CsrObject } from '../../src/kube/csrs.ts';
import type { TrimmedNode } from '../../src/kube/node-writes.ts';
import {
  assertQuiescent,
  ControllerSim,
  decisionOf,
  FakeApi,
  FLAVOR,
  issueToken,
  kubeletCsr,
  QUARANTINE,
  RING,
  registerNode,
  revoke,
  sign,
  T0,
} from './support/controller-sim.ts';

function assertFlavored(api: FakeApi, nodeName: string, tokenName: string): void {
  const node = api.nodes.get(nodeName) as TrimmedNode;
  assert.equal(node.metadata.labels?.['nodeflavor.io/flavor'], FLAVOR, 'flavored');
  assert.equal(node.metadata.labels?.['nodeflavor.io/token'], undefined, 'token label removed');
  assert.equal(node.metadata.labels?.['nodeflavor.io/joined'], 'true', 'marked as joined through nodeflavor');
  assert.deepEqual(node.spec.taints, [], 'quarantine lifted');
  const token = api.tokens.get(tokenName) as StoredFlavoredToken;
  assert.equal(token.status?.uses, 1);
  const join = api.claims.get(nodeName)?.status?.join;
  assert.equal(join?.nodeUID, node.metadata.uid, 'the join record names the Node');
  assert.ok(join?.verifiedAt, 'the join record says it was verified');
  assert.equal(join?.secretDeleted, true, 'and that the consumed token Secret was deleted');
}

/** A CSR made for `nodeName` with `tokenId`, judged: approved (the node may register now). */
async function approved(sim: ControllerSim, tokenId: string, nodeName: string): Promise<string> {
  const csr = await kubeletCsr(sim.api, tokenId, nodeName, sim.now + 1000);
  sim.now += 1000;
  sim.deliver();
  await sim.settle();
  assert.equal(decisionOf(sim.api, csr), 'Approved NodeflavorBound');
  return csr;
}

/** A fresh controller whose node `nodeName` was approved, signed and registered (delivered). */
async function registered(nodeName: string) {
  const api = new FakeApi();
  const t = issueToken(api);
  const sim = new ControllerSim(api);
  const csr = await approved(sim, t.tokenId, nodeName);
  sign(api, csr);
  registerNode(api, nodeName, t.flavorToken, sim.now + 1000);
  sim.deliver();
  return { api, sim, t, csr };
}

describe('a join, from its request to its record (ADR 0016)', () => {
  it('CSR, then Node: claim, count, approve in one pass; one Node write; the record says verified, the Secret goes', async () => {
    const api = new FakeApi();
    const t = issueToken(api);
    const sim = new ControllerSim(api);
    const csr = await kubeletCsr(api, t.tokenId, 'n1', T0 + 1000);
    sim.deliver();
    await sim.settle();
    const joinRequests = () => api.requests.filter((r) => !r.startsWith('class-status'));
    assert.deepEqual(joinRequests(), [
      'POST claim n1',
      'GET node n1',
      `PUT status ${t.name}`,
      `PUT approval ${csr}`,
    ]);
    sign(api, csr);
    registerNode(api, 'n1', t.flavorToken, T0 + 2000);
    sim.deliver();
    await sim.settle();
    assert.deepEqual(joinRequests().slice(4), [
      'PATCH node n1',
      `delete-secret ${t.tokenId}`,
      'PUT claim n1',
    ]);
    assertFlavored(api, 'n1', t.name);
    assert.ok(!api.secrets.has(t.tokenId));
    const history = api.claims.get('n1')?.status?.history?.map((e) => e.event);
    assert.deepEqual(history, ['Claimed', 'Registered', 'Verified']);
    assert.deepEqual(
      sim.events.filter((e) => e.startsWith('Normal')),
      [],
      'no Normal Event on the join (--verified-events is off by default)',
    );
    await assertQuiescent(sim);
  });

  it('with --verified-events, the flavored Node gets one Normal Verified Event', async () => {
    const api = new FakeApi();
    const t = issueToken(api);
    const sim = new ControllerSim(api, { verifiedEvents: true });
    await approved(sim, t.tokenId, 'n1');
    registerNode(api, 'n1', t.flavorToken, sim.now + 1000);
    sim.deliver();
    await sim.settle();
    assert.deepEqual(
      sim.events.filter((e) => e.startsWith('Normal')),
      ['Normal Verified Node/n1'],
    );
  });

  it('a refused node: its record says why (from the Node), and the token holder is told', async () => {
    const { api, sim, t } = await registered('n5');
    const node = api.nodes.get('n5') as TrimmedNode;
    (node.metadata.labels as Record<string, string>)['nodeflavor.io/token'] = 'x'.repeat(52);
    node.metadata.resourceVersion = api.nextRv();
    sim.deliver();
    await sim.settle();
    const stored = api.nodes.get('n5') as TrimmedNode;
    assert.equal(
      stored.metadata.labels?.['nodeflavor.io/flavor'],
      undefined,
      'not flavored on a wrong token',
    );
    assert.match(stored.metadata.annotations?.['nodeflavor.io/refused'] ?? '', /"reason":"InvalidToken"/);
    const join = api.claims.get('n5')?.status?.join;
    assert.equal(join?.failure?.reason, 'InvalidToken', 'the record says why');
    assert.equal(join?.nodeUID, stored.metadata.uid);
    assert.ok(sim.events.includes('Warning InvalidToken Node/n5'));
    assert.ok(sim.events.includes(`Warning InvalidToken FlavoredToken/${t.name}`));
    await assertQuiescent(sim);
  });

  it('a revoked token (StripNodes) strips its node once and every reconciler then rests', async () => {
    const { api, sim, t } = await registered('n6');
    await sim.settle();
    assertFlavored(api, 'n6', t.name);
    const token = api.tokens.get(t.name) as StoredFlavoredToken;
    Object.assign(token.spec, { revocationPolicy: 'StripNodes' });
    revoke(api, t.name);
    sim.deliver();
    await sim.settle();
    const node = api.nodes.get('n6') as TrimmedNode;
    assert.equal(node.metadata.labels?.['nodeflavor.io/flavor'], undefined, 'stripped');
    assert.deepEqual(node.spec.taints, [QUARANTINE], 'quarantined again');
    assert.equal(api.claims.get('n6')?.status?.join?.failure?.reason, 'Revoked');
    await assertQuiescent(sim);
  });

  it('a conflicting writer adds a taint meanwhile: the write keeps it and does not conflict', async () => {
    const { api, sim } = await registered('n4');
    const notReady = { key: 'node.kubernetes.io/not-ready', effect: 'NoSchedule' };
    const theirs = api.nodes.get('n4') as TrimmedNode;
    theirs.spec.taints?.push(notReady);
    theirs.metadata.resourceVersion = api.nextRv();
    sim.held.add('nodes'); // our cache has not seen it when we write
    await sim.settle();
    const node = api.nodes.get('n4') as TrimmedNode;
    assert.deepEqual(node.spec.taints, [notReady], 'ours lifted, theirs kept');
    assert.equal(api.writes.filter((w) => w === 'node n4').length, 1, 'no conflict, no second write');
  });
});

describe('a new leader knows everything from the objects alone', () => {
  it('sees the Node before its token and CSR: it waits (grace) instead of judging, then verifies', async () => {
    const api = new FakeApi();
    const t = issueToken(api);
    const old = new ControllerSim(api);
    await approved(old, t.tokenId, 'n2');
    registerNode(api, 'n2', t.flavorToken, old.now + 1000);
    // The new leader's Node watch delivers first; its token, CSR and claim watches lag.
    const sim = new ControllerSim(api, {}, ['tokens', 'csrs', 'claims']);
    sim.now = old.now + 1500;
    const before = api.writes.length;
    await sim.settle();
    assert.deepEqual(
      api.writes.slice(before).filter((w) => !w.startsWith('class-status')),
      [],
      'nothing judged while its join may still come',
    );
    sim.held.clear();
    sim.deliver();
    sim.advance(5000);
    await sim.settle();
    assertFlavored(api, 'n2', t.name);
    assert.equal(api.writes.filter((w) => w.startsWith('node ')).length, 1, 'one Node write');
    await assertQuiescent(sim);
  });

  it('judges a Node on its first pass as it will on every later one: a request still being parsed is waited for', async () => {
    const api = new FakeApi();
    // A plain join's request (a bootstrap token nodeflavor did not issue), and a Node of that name
    // carrying a flavor label it gave itself.
    await kubeletCsr(api, 'zzzzzz', 'forged', T0, 'csr-forged', 'system:bootstrap:zzzzzz', [
      'system:bootstrappers:kubeadm:default-node-token',
      'system:authenticated',
    ]);
    registerNode(api, 'forged', undefined, T0);
    const node = api.nodes.get('forged') as TrimmedNode;
    node.metadata.labels = { ...node.metadata.labels, 'nodeflavor.io/flavor': FLAVOR };
    const first = new ControllerSim(api);
    // A replica that just started: its CSR's subject is not parsed yet when the Node's turn comes.
    await first.reconcile('nodes', 'forged');
    const refusal = () => api.nodes.get('forged')?.metadata.annotations?.['nodeflavor.io/refused'] ?? '';
    assert.match(refusal(), /"reason":"UnknownToken"/, 'the reason a later pass gives, not NoBinding');
    await first.settle();
    assert.match(refusal(), /"reason":"UnknownToken"/);
    const writes = api.writes.length;
    const restarted = new ControllerSim(api);
    await restarted.reconcile('nodes', 'forged');
    await restarted.settle();
    assert.deepEqual(
      api.writes.slice(writes).filter((w) => !w.startsWith('class-status')),
      [],
      'a restart rewrites nothing',
    );
  });

  it('a crash after the Node write, before the record: the next process completes it and rewrites nothing', async () => {
    const api = new FakeApi();
    const t = issueToken(api);
    const first = new ControllerSim(api);
    const csr = await approved(first, t.tokenId, 'n3');
    sign(api, csr);
    registerNode(api, 'n3', t.flavorToken, first.now + 1000);
    first.deliver();
    await first.reconcile('nodes', 'n3'); // only the node reconciler runs before the crash
    assert.equal(api.writes.at(-1), 'node n3');
    assert.equal(api.claims.get('n3')?.status?.join?.nodeUID, undefined);
    const before = api.writes.length;
    const restarted = new ControllerSim(api); // no memory of the first
    await restarted.settle();
    assert.deepEqual(
      api.writes.slice(before).filter((w) => !w.startsWith('class-status')),
      [`delete-secret ${t.tokenId}`, 'record n3'],
    );
    assertFlavored(api, 'n3', t.name);
    await assertQuiescent(restarted);
  });
});

describe('a retry of the same join, and what is not one (join-request.ts)', () => {
  it('the first request pending (a crash before its approval): a new request of the same token is a retry, no second use', async () => {
    const api = new FakeApi();
    const t = issueToken(api);
    const sim = new ControllerSim(api);
    const first = await kubeletCsr(api, t.tokenId, 'n1', T0 + 1000);
    sim.deliver();
    api.before.set('decideCsr', () => {
      throw new Error('crash before the approval');
    });
    await assert.rejects(sim.reconcile('joins', first));
    api.before.clear();
    const second = await kubeletCsr(api, t.tokenId, 'n1', T0 + 2000, 'csr-n1-again');
    sim.deliver();
    await sim.settle();
    assert.equal(decisionOf(api, second), 'Approved NodeflavorBound', 'the retry is approved');
    assert.equal(decisionOf(api, first), 'Denied Superseded', 'the first request goes unapproved');
    assert.equal((api.tokens.get(t.name) as StoredFlavoredToken).status?.uses, 1, 'one use');
    assert.equal(api.claims.get('n1')?.spec.holder?.csrName, second, 'the join moved to the retry');
  });

  it('a Node registered and deleted before the record named it: a second request for the name is never approved', async () => {
    const api = new FakeApi();
    const t = issueToken(api);
    const sim = new ControllerSim(api);
    const first = await approved(sim, t.tokenId, 'n1');
    sign(api, first); // the machine registers a Node with it and deletes it before we see either
    const second = await kubeletCsr(api, t.tokenId, 'n1', T0 + 3000, 'csr-n1-second');
    sim.deliver();
    await sim.settle();
    assert.equal(decisionOf(api, second), 'Denied AlreadyJoined');
  });

  it("the join's request gone (kube-controller-manager's cleaner, an hour after issuance) counts as issued: AlreadyJoined", async () => {
    const api = new FakeApi();
    const t = issueToken(api);
    const sim = new ControllerSim(api);
    const first = await approved(sim, t.tokenId, 'n1');
    sign(api, first);
    sim.deliver();
    api.csrs.delete(first); // cleaned
    sim.deliver();
    const second = await kubeletCsr(api, t.tokenId, 'n1', T0 + 3_700_000, 'csr-n1-later');
    sim.now = T0 + 3_700_000;
    sim.deliver();
    await sim.settle();
    assert.equal(decisionOf(api, second), 'Denied AlreadyJoined', 'never a second machine on one use');
    assert.equal((api.tokens.get(t.name) as StoredFlavoredToken).status?.uses, 1);
  });

  it('approved but not signed yet counts as issued too (the certificate is coming)', async () => {
    const api = new FakeApi();
    const t = issueToken(api);
    const sim = new ControllerSim(api);
    await approved(sim, t.tokenId, 'n1');
    const second = await kubeletCsr(api, t.tokenId, 'n1', T0 + 3000, 'csr-n1-second');
    sim.deliver();
    await sim.settle();
    assert.equal(decisionOf(api, second), 'Denied AlreadyJoined');
  });
});

describe("a name is one machine's: other requesters and pinned tokens", () => {
  it("another requester's issued kubelet certificate for the name blocks the claim (a plain join not yet registered)", async () => {
    const api = new FakeApi();
    const t = issueToken(api);
    const sim = new ControllerSim(api);
    // A plain kubeadm join: its own bootstrap token and group, approved and signed by
    // kube-controller-manager; its Node not registered yet.
    const plain = await kubeletCsr(api, 'plain1', 'n1', T0 + 500, 'csr-plain', 'system:bootstrap:plain1', [
      'system:bootstrappers:kubeadm:default-node-token',
    ]);
    const stored = api.csrs.get(plain) as CsrObject;
    stored.status = { conditions: [{ type: 'Approved', status: 'True', reason: 'AutoApproved' }] };
    sign(api, plain);
    const ours = await kubeletCsr(api, t.tokenId, 'n1', T0 + 1000);
    sim.deliver();
    await sim.settle();
    assert.equal(decisionOf(api, ours), 'Denied NameTaken');
    assert.equal(api.claims.get('n1'), undefined, 'nothing claimed');
    assert.equal((api.tokens.get(t.name) as StoredFlavoredToken).status?.uses ?? 0, 0, 'no use spent');
    assert.match(
      (api.tokens.get(t.name) as StoredFlavoredToken).status?.rejections?.[0]?.message ?? '',
      /csr-plain/,
    );
  });

  it("another requester's pending request does not block the name", async () => {
    const api = new FakeApi();
    const t = issueToken(api);
    const sim = new ControllerSim(api);
    await kubeletCsr(api, 'plain1', 'n1', T0 + 500, 'csr-plain', 'system:bootstrap:plain1', [
      'system:bootstrappers:kubeadm:default-node-token',
    ]);
    const ours = await kubeletCsr(api, t.tokenId, 'n1', T0 + 1000);
    sim.deliver();
    await sim.settle();
    assert.equal(decisionOf(api, ours), 'Approved NodeflavorBound');
  });

  it("a name a live token is pinned to is that token's alone: an any-name token is refused, and says so", async () => {
    for (let round = 0; round < 10; round++) {
      const api = new FakeApi();
      const pinned = issueToken(api, { spec: { nodeName: 'n1' } });
      const any = issueToken(api);
      const sim = new ControllerSim(api);
      const csrAny = await kubeletCsr(api, any.tokenId, 'n1', T0 + 1000, 'csr-any');
      const csrPinned = await kubeletCsr(api, pinned.tokenId, 'n1', T0 + 1000, 'csr-pinned');
      sim.deliver();
      // The same instant, either order first.
      const order = round % 2 === 0 ? [csrAny, csrPinned] : [csrPinned, csrAny];
      for (const csr of order) await sim.reconcile('joins', csr);
      await sim.settle();
      assert.equal(decisionOf(api, csrPinned), 'Approved NodeflavorBound', `round ${round}`);
      assert.equal(decisionOf(api, csrAny), 'Denied NameTaken', `round ${round}`);
      // Asked first, the any-name token is told the name is reserved; after the pinned token's
      // join, that the name is bound (a consumed token reserves nothing: it is done).
      const refusal =
        (api.tokens.get(any.name) as StoredFlavoredToken).status?.rejections?.[0]?.message ?? '';
      if (order[0] === csrAny) assert.match(refusal, new RegExp(`reserved for token ${pinned.tokenId}`));
    }
  });

  it('a pinned token revoked no longer reserves its name', async () => {
    const api = new FakeApi();
    const pinned = issueToken(api, { spec: { nodeName: 'n1' } });
    const any = issueToken(api);
    revoke(api, pinned.name);
    const sim = new ControllerSim(api);
    const csr = await kubeletCsr(api, any.tokenId, 'n1', T0 + 1000);
    sim.deliver();
    await sim.settle();
    assert.equal(decisionOf(api, csr), 'Approved NodeflavorBound');
  });
});

describe('one node name, two tokens at the same instant: a name is claimed exactly once (ADR 0011)', () => {
  // Token B's whole pass runs while token A's pass waits at each of its API calls in turn: every
  // way the two can interleave at the API, with caches that deliver nothing in between.
  const points = ['createClaim', 'readClaim', 'readNode', 'writeTokenStatus', 'readToken', 'decideCsr'];
  const cases = [
    { name: 'A whole, then B whole, no watch event in between', point: undefined, nth: 0 },
    ...points.flatMap((point) =>
      [1, 2].map((nth) => ({ name: `B runs at A's ${nth}. ${point}`, point, nth })),
    ),
  ];
  for (const { name, point, nth } of cases) {
    it(name, async () => {
      const api = new FakeApi();
      const a = issueToken(api);
      const b = issueToken(api);
      const sim = new ControllerSim(api);
      const csrA = await kubeletCsr(api, a.tokenId, 'n1', T0 + 1000, 'csr-a');
      const csrB = await kubeletCsr(api, b.tokenId, 'n1', T0 + 1000, 'csr-b');
      sim.now = T0 + 1000;
      sim.deliver();
      if (point) {
        let seen = 0;
        api.before.set(point, async () => {
          if (++seen !== nth) return;
          api.before.clear();
          await sim.reconcile('joins', csrB);
        });
      }
      await sim.reconcile('joins', csrA);
      api.before.clear();
      if (!point) await sim.reconcile('joins', csrB);
      await sim.settle();
      sim.advance(5_000);
      await sim.settle();
      const decisions = [decisionOf(api, csrA), decisionOf(api, csrB)];
      assert.equal(
        decisions.filter((d) => d?.startsWith('Approved')).length,
        1,
        `exactly one approved: ${JSON.stringify(decisions)}`,
      );
      assert.ok(
        decisions.includes('Denied NameTaken'),
        `the other is denied NameTaken: ${JSON.stringify(decisions)}`,
      );
      const winner = decisions[0]?.startsWith('Approved') ? a : b;
      assert.equal(api.claims.get('n1')?.spec.holder?.tokenName, winner.name, 'the record names the winner');
      const loser = winner === a ? b : a;
      assert.equal(
        (api.tokens.get(loser.name) as StoredFlavoredToken).status?.uses ?? 0,
        0,
        "the loser's use is not spent",
      );
    });
  }
});

/**
 * One token's CSR for n1, whose pass meets `interfere` at the first call named `at` (before it
 * reaches the API): the scenario runs to rest, with time enough for every retry.
 */
async function passMeets(
  at: string,
  interfere: (
    api: FakeApi,
    sim: ControllerSim,
    t: { t: ReturnType<typeof issueToken>; other: ReturnType<typeof issueToken> },
  ) => void,
) {
  const api = new FakeApi();
  const t = issueToken(api);
  const other = issueToken(api);
  const sim = new ControllerSim(api);
  const csr = await kubeletCsr(api, t.tokenId, 'n1', T0 + 1000);
  sim.now = T0 + 1000;
  sim.deliver();
  api.before.set(at, () => {
    api.before.clear();
    interfere(api, sim, { t, other });
  });
  await sim.settle();
  sim.advance(5_000);
  await sim.settle();
  return { api, t, other, csr, decision: decisionOf(api, csr) };
}

describe('a pass carries out only what its writes prove', () => {
  it('a revocation that lands before the use is counted: never approved; denied, name released', async () => {
    const { api, decision } = await passMeets('writeTokenStatus', (api, _s, { t }) => revoke(api, t.name));
    assert.equal(decision, 'Denied Revoked');
    assert.equal(api.claims.get('n1')?.spec.holder, undefined, 'the name is free again');
    assert.ok(api.claims.get('n1')?.spec.releasedAt, 'the record says when it was released');
  });

  it('a token deleted before the use is counted: never approved', async () => {
    const { decision } = await passMeets('writeTokenStatus', (api, sim, { t }) => {
      const token = api.tokens.get(t.name) as StoredFlavoredToken;
      token.metadata.deletionTimestamp = new Date(sim.now).toISOString().replace(/\.\d{3}Z$/, 'Z');
      token.metadata.resourceVersion = api.nextRv();
    });
    assert.equal(decision, 'Denied Revoked');
  });

  it('a revocation that lands after the use is counted: approved, and the node never flavored', async () => {
    const { api, t, csr, decision } = await passMeets('decideCsr', (api, _s, { t }) => revoke(api, t.name));
    assert.equal(decision, 'Approved NodeflavorBound');
    sign(api, csr);
    registerNode(api, 'n1', t.flavorToken, T0 + 7000);
    const sim = new ControllerSim(api);
    sim.now = T0 + 8000;
    await sim.settle();
    const node = api.nodes.get('n1') as TrimmedNode;
    assert.equal(node.metadata.labels?.['nodeflavor.io/flavor'], undefined, 'no flavor from a revoked token');
    assert.deepEqual(node.spec.taints, [QUARANTINE]);
  });

  it('a Node of the name registered by another machine before the Node read: never approved; denied NameTaken', async () => {
    const { api, decision } = await passMeets('readNode', (api, sim, { other }) =>
      registerNode(api, 'n1', other.flavorToken, sim.now),
    );
    assert.equal(decision, 'Denied NameTaken');
    assert.equal(api.claims.get('n1')?.spec.holder, undefined, 'the name is released');
  });

  it('a record an admin deletes mid-join is held by its finalizer: no other token gets the name meanwhile', async () => {
    const { api, other, decision } = await passMeets('readNode', (api, sim, { other }) => {
      api.adminDeleteClaim('n1', sim.now);
      // The other token's request for the name comes at once.
      void kubeletCsr(api, other.tokenId, 'n1', sim.now, 'csr-other');
    });
    assert.equal(decision, 'Approved NodeflavorBound');
    const sim = new ControllerSim(api);
    sim.now = T0 + 10_000;
    await sim.settle();
    assert.notEqual(decisionOf(api, 'csr-other'), 'Approved NodeflavorBound', 'never two approvals');
    assert.ok(api.claims.get('n1')?.metadata.deletionTimestamp, 'deleted once its join ends');
    assert.equal((api.tokens.get(other.name) as StoredFlavoredToken).status?.uses ?? 0, 0);
  });
});

describe('a record ends: released when its join ends, collected after a grace', () => {
  it('its Node deleted: the record is released, and collected once the Node and request are gone and the grace passed', async () => {
    const { api, sim, csr } = await registered('n1');
    await sim.settle();
    api.nodes.delete('n1');
    sim.deliver();
    await sim.settle();
    const record = api.claims.get('n1') as NodeNameClaim;
    assert.equal(record.spec.holder, undefined, 'released');
    assert.deepEqual(record.metadata.finalizers, [], 'its finalizer went with its holder');
    assert.equal(record.status?.history?.at(-1)?.event, 'Released');
    assert.equal(record.status?.history?.at(-1)?.reason, 'NodeGone');
    sim.advance(3_600_000 + 1000);
    await sim.settle();
    assert.ok(api.claims.has('n1'), 'kept while its request is on record');
    api.csrs.delete(csr);
    sim.deliver();
    await sim.settle();
    assert.equal(api.claims.has('n1'), false, 'collected');
    assert.ok(api.writes.includes('collect n1'));
    await assertQuiescent(sim);
  });

  it('not collected before the grace: a Node registered under the name meanwhile is still quarantined', async () => {
    const { api, sim, csr } = await registered('n1');
    await sim.settle();
    api.nodes.delete('n1');
    api.csrs.delete(csr);
    sim.deliver();
    await sim.settle();
    sim.advance(60_000);
    await sim.settle();
    assert.ok(api.claims.has('n1'), 'within the grace it stays');
  });

  it('a token revoked before its node registered: the record is released (the request was approved)', async () => {
    const api = new FakeApi();
    const t = issueToken(api);
    const sim = new ControllerSim(api);
    await approved(sim, t.tokenId, 'n1');
    revoke(api, t.name);
    sim.deliver();
    await sim.settle();
    assert.equal(api.claims.get('n1')?.spec.holder, undefined);
    assert.equal(api.claims.get('n1')?.status?.history?.at(-1)?.reason, 'Revoked');
  });

  it('the name released, another token joins under it: it is judged on its own token and never inherits', async () => {
    const { api, sim, csr } = await registered('n1');
    await sim.settle();
    api.nodes.delete('n1');
    api.csrs.delete(csr);
    sim.deliver();
    await sim.settle();
    const next = issueToken(api);
    sim.now += 10_000;
    const second = await approved(sim, next.tokenId, 'n1');
    sign(api, second);
    registerNode(api, 'n1', next.flavorToken, sim.now + 1000);
    sim.deliver();
    await sim.settle();
    assertFlavored(api, 'n1', next.name);
    assert.deepEqual(
      api.claims.get('n1')?.status?.history?.map((e) => e.event),
      ['Claimed', 'Registered', 'Verified', 'Released', 'Claimed', 'Registered', 'Verified'],
    );
  });
});

describe('one single-use token, two machines at the same instant', () => {
  const points = ['createClaim', 'readNode', 'writeTokenStatus', 'readToken', 'decideCsr'];
  const cases = [undefined, ...points].flatMap((point) => [
    { point, deliver: false },
    { point, deliver: true },
  ]);
  for (const { point, deliver } of cases) {
    it(`B runs at A's ${point ?? 'end'}${deliver ? ', the watches delivering first' : ''}: exactly one approved, the other NoUsesLeft`, async () => {
      const api = new FakeApi();
      const t = issueToken(api);
      const sim = new ControllerSim(api);
      const a = await kubeletCsr(api, t.tokenId, 'race-a', T0 + 1000);
      const b = await kubeletCsr(api, t.tokenId, 'race-b', T0 + 1000);
      sim.now = T0 + 1000;
      sim.deliver();
      const runB = async () => {
        if (deliver) sim.deliver();
        await sim.reconcile('joins', b);
        if (deliver) sim.deliver();
      };
      if (point)
        api.before.set(point, async () => {
          api.before.clear();
          await runB();
        });
      await sim.reconcile('joins', a);
      api.before.clear();
      if (!point) await runB();
      await sim.settle();
      const decisions = [decisionOf(api, a), decisionOf(api, b)];
      assert.equal(decisions.filter((d) => d?.startsWith('Approved')).length, 1, JSON.stringify(decisions));
      assert.ok(decisions.includes('Denied NoUsesLeft'), JSON.stringify(decisions));
      assert.equal((api.tokens.get(t.name) as StoredFlavoredToken).status?.uses, 1);
    });
  }
});

describe('a name freed by its Node going is free, whatever certificates its machine still holds', () => {
  it("the first join's issued request still on record: another token joins under the name", async () => {
    const { api, sim, csr } = await registered('n1');
    await sim.settle();
    api.nodes.delete('n1');
    sim.deliver();
    await sim.settle();
    assert.ok(api.csrs.has(csr), "the first join's request is still on record (issued)");
    const next = issueToken(api);
    sim.now += 10_000;
    const second = await kubeletCsr(api, next.tokenId, 'n1', sim.now);
    sim.deliver();
    await sim.settle();
    assert.equal(decisionOf(api, second), 'Approved NodeflavorBound');
  });

  it("the node's own renewal before it was deleted does not block; a plain join's issued certificate after does", async () => {
    const { api, sim } = await registered('n1');
    await sim.settle();
    const renewal = await kubeletCsr(api, 'unused', 'n1', sim.now, 'csr-renewal', 'system:node:n1', [
      'system:nodes',
    ]);
    sign(api, renewal);
    sim.now += 5_000;
    api.nodes.delete('n1');
    sim.deliver();
    await sim.settle();
    const next = issueToken(api);
    sim.now += 10_000;
    const second = await kubeletCsr(api, next.tokenId, 'n1', sim.now, 'csr-second');
    sim.deliver();
    await sim.settle();
    assert.equal(decisionOf(api, second), 'Approved NodeflavorBound', 'the old renewal does not block');
    // That join ends too; then a plain join is issued a certificate for the name: it blocks.
    api.nodes.delete('n1');
    sim.deliver();
    await sim.settle();
    const plain = await kubeletCsr(
      api,
      'plain1',
      'n1',
      sim.now + 1000,
      'csr-plain',
      'system:bootstrap:plain1',
      ['system:bootstrappers:kubeadm:default-node-token'],
    );
    sign(api, plain);
    const third = issueToken(api);
    sim.now += 10_000;
    const late = await kubeletCsr(api, third.tokenId, 'n1', sim.now, 'csr-third');
    sim.deliver();
    await sim.settle();
    assert.equal(decisionOf(api, late), 'Denied NameTaken');
  });
});

describe('attested tokens: one join per proof (issue 32)', () => {
  const EK =
    '-----BEGIN PUBLIC KEY-----\nMIIBIjANBgkqhkiG9w0BAQEFAAOCAQ8AMIIBCgKCAQEA\n-----END PUBLIC KEY-----\n';

  /** A rejoin token bound to a TPM, as the issuer leaves it: no bootstrap Secret until a proof. */
  function rejoinToken(api: FakeApi, nodeName: string) {
    const t = issueToken(api, { spec: { nodeName, attestation: { ekPublicKey: EK, allowRejoin: true } } });
    api.secrets.delete(t.tokenId);
    return t;
  }

  /** The issuer records its machine's proof number `count` (at `at`) and mints a new Secret. */
  function prove(api: FakeApi, t: { name: string; tokenId: string }, count: number, at: string): void {
    const token = api.tokens.get(t.name) as StoredFlavoredToken;
    token.metadata.annotations = {
      ...token.metadata.annotations,
      [ATTESTED_ANNOTATION]: JSON.stringify({ ticket: Date.parse(at) - 1000, count, at }),
    };
    token.metadata.resourceVersion = api.nextRv();
    api.secrets.add(t.tokenId);
  }

  /** Its machine attests (proof 1) and joins: claimed, approved, registered, verified. */
  async function joinedOnce() {
    const api = new FakeApi();
    const t = rejoinToken(api, 'n1');
    prove(api, t, 1, new Date(T0 + 500).toISOString());
    const sim = new ControllerSim(api);
    const csr = await approved(sim, t.tokenId, 'n1');
    sign(api, csr);
    registerNode(api, 'n1', t.flavorToken, sim.now + 1000);
    sim.now += 1000;
    sim.deliver();
    await sim.settle();
    assertFlavored(api, 'n1', t.name);
    return { api, sim, t };
  }

  it('its Node deleted, a copied bootstrap token of the first proof (still cached by the API server) earns no second join', async () => {
    const { api, sim, t } = await joinedOnce();
    api.nodes.delete('n1');
    sim.deliver();
    await sim.settle();
    assert.equal(api.claims.get('n1')?.spec.holder, undefined, 'the join is released');
    // Someone who copied the first proof's bootstrap token asks for the name within the cache window.
    const copied = await kubeletCsr(api, t.tokenId, 'n1', sim.now + 1000, 'csr-n1-copied');
    sim.now += 1000;
    sim.deliver();
    await sim.settle();
    assert.equal(decisionOf(api, copied), 'Denied NoUsesLeft', 'no second join on one proof');
    // Its machine, re-installed, proves itself again: that proof earns the join.
    prove(api, t, 2, new Date(sim.now + 500).toISOString());
    const rejoined = await kubeletCsr(api, t.tokenId, 'n1', sim.now + 2000, 'csr-n1-rejoined');
    sim.now += 2000;
    sim.deliver();
    await sim.settle();
    assert.equal(decisionOf(api, rejoined), 'Approved NodeflavorBound');
    const status = (api.tokens.get(t.name) as StoredFlavoredToken).status;
    assert.equal(
      status?.bindings?.find((b) => b.nodeName === 'n1')?.attestation,
      2,
      'the use names its proof',
    );
    assert.equal(status?.attestation?.bound, 2);
  });

  it("a proof recorded in the same second as the last Secret deletion: that proof's Secret is deleted after its join all the same", async () => {
    const { api, sim, t } = await joinedOnce();
    assert.ok(!api.secrets.has(t.tokenId));
    const deletedAt = api.claims.get('n1')?.status?.history?.find((e) => e.event === 'Verified')
      ?.at as string;
    api.nodes.delete('n1');
    sim.deliver();
    await sim.settle();
    // Proof 2 lands in the second the deletion was recorded in (its time in whole seconds).
    prove(api, t, 2, deletedAt);
    const csr = await kubeletCsr(api, t.tokenId, 'n1', sim.now + 2000, 'csr-n1-second');
    sim.now += 2000;
    sim.deliver();
    await sim.settle();
    assert.equal(decisionOf(api, csr), 'Approved NodeflavorBound');
    sign(api, csr);
    registerNode(api, 'n1', t.flavorToken, sim.now + 1000);
    sim.now += 1000;
    sim.deliver();
    await sim.settle();
    assert.ok(!api.secrets.has(t.tokenId), "proof 2's Secret is deleted once its join registered");
    assert.equal(api.claims.get('n1')?.status?.join?.secretDeleted, true, 'and its record says so');
  });

  it('a flavor that requires a measured boot state is not given on an EK certificate issuer written by hand (no seal)', async () => {
    const api = new FakeApi();
    api.classes.set('measured', {
      metadata: { name: 'measured', resourceVersion: '2', generation: 1 },
      spec: {
        labels: { 'nodeflavor.io/flavor': 'measured' },
        measuredBoot: { pcrs: [{ index: 7, sha256: 'ab'.repeat(32) }] },
      },
    });
    // Written directly: a record for the class, bound to a "TPM" by a certificate issuer typed in,
    // with a bootstrap Secret and the flavor token of someone who holds the key ring.
    const t = issueToken(api, {
      spec: {
        flavorClassName: 'measured',
        attestation: { ekPublicKey: EK, ekCertificateIssuer: 'CN=Example TPM EK CA', allowRejoin: false },
      },
    });
    prove(api, t, 1, new Date(T0 + 500).toISOString());
    const flavorToken = deriveFlavorToken(RING.active, t.tokenId, 'measured').reveal();
    const sim = new ControllerSim(api);
    await approved(sim, t.tokenId, 'n1');
    registerNode(api, 'n1', flavorToken, sim.now + 1000);
    sim.now += 1000;
    sim.deliver();
    await sim.settle();
    const node = api.nodes.get('n1') as TrimmedNode;
    assert.equal(node.metadata.labels?.['nodeflavor.io/flavor'], undefined, 'no measured-boot flavor');
    assert.ok(sim.events.includes('Warning AttestationRequired Node/n1'), sim.events.join('\n'));
  });
});
