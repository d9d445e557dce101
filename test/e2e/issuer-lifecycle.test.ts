// The node administrator's side on the real control plane, with the controller running: a token's
// life through the API (issued → bound → verified, or failed with the Event's reason), a watch
// that sees "Verified" without polling, the caller's token list (own tokens only, paged, by
// phase), Events aggregated one per reason with a count, and `kubectl flavor explain` / `nodes`
// telling what was concluded and why. No answer holds a secret.
import assert from 'node:assert/strict';
import { request as httpsRequest } from 'node:https';
import { after, before, describe, it } from 'node:test';
import type { CertificateAuthority } from '../../src/pki/certs.ts';
import type { PlainIssueResponse } from '../../src/tokenissuer/response.ts';
import type { RunningIssuer } from '../../src/tokenissuer/server.ts';
import { applyObjects } from './cluster/apply.ts';
import { JoinError, type SimulatedKubelet } from './kubelet-sim/kubelet.ts';
import { controllerHarness } from './support/controller-harness.ts';
import {
  clusterRoleBindingObject,
  serviceAccountObject,
  serviceAccountToken,
  startTestIssuer,
  useFlavorClassesRole,
} from './support/issuer.ts';
import { kubectlFlavor } from './support/kubectl-flavor-cli.ts';
import {
  applyFlavorClass,
  customObjects,
  deleteFlavorClass,
  ensureNamespace,
  joinWith,
} from './support/nodeflavor.ts';
import { uniqueName, waitFor } from './support/wait.ts';

const NAMESPACE = 'nodeflavor-e2e-lifecycle';

interface View {
  id: string;
  phase: string;
  reason: string | null;
  nodes: {
    nodeName: string;
    csrName: string;
    boundAt: string | null;
    verifiedAt: string | null;
    reason: string | null;
  }[];
}

describe('the node administrator’s side: token lifecycle, watch, list, explain', () => {
  const h = controllerHarness({});
  /** A flavor this file deletes and makes again (the harness's own classes stay). */
  const transient = uniqueName('transient');
  let issuer: RunningIssuer;
  let ca: CertificateAuthority;
  let adminToken: string;
  let bystanderToken: string;
  const kubelets: SimulatedKubelet[] = [];
  /** Every secret handed out, and every answer seen: no answer may hold a secret. */
  const secrets: string[] = [];
  const answers: string[] = [];

  function call(
    method: string,
    path: string,
    token: string,
    body?: unknown,
    extra: Record<string, string> = {},
  ) {
    const payload = body === undefined ? undefined : JSON.stringify(body);
    return new Promise<{ status: number; text: string }>((resolve, reject) => {
      const req = httpsRequest(
        new URL(path, issuer.url),
        {
          method,
          ca: ca.certPem,
          headers: {
            ...extra,
            authorization: `Bearer ${token}`,
            ...(payload
              ? { 'content-type': 'application/json', 'content-length': String(Buffer.byteLength(payload)) }
              : {}),
          },
        },
        (res) => {
          const chunks: Buffer[] = [];
          res.on('data', (c: Buffer) => chunks.push(c));
          res.on('end', () =>
            resolve({ status: res.statusCode ?? 0, text: Buffer.concat(chunks).toString('utf8') }),
          );
        },
      );
      req.on('error', reject);
      req.end(payload);
    });
  }

  async function issue(
    token: string,
    body: Record<string, unknown>,
    headers: Record<string, string> = {},
  ): Promise<PlainIssueResponse> {
    const answer = await call(
      'POST',
      '/v1/tokens',
      token,
      { flavorClassName: h.sweet, ttl: '1h', ...body },
      headers,
    );
    assert.equal(answer.status, 201, answer.text);
    const issued = JSON.parse(answer.text) as PlainIssueResponse;
    secrets.push(issued.bootstrapToken, issued.bootstrapToken.split('.')[1] ?? '', issued.flavorToken);
    return issued;
  }

  async function view(id: string, token = adminToken): Promise<View> {
    const answer = await call('GET', `/v1/tokens/${id}`, token);
    answers.push(answer.text);
    assert.equal(answer.status, 200, answer.text);
    return JSON.parse(answer.text) as View;
  }

  /** Follows the token's event stream until `done` holds for a status; every status seen, in order. */
  function watchUntil(
    id: string,
    done: (v: View) => boolean,
    timeoutMs = 60_000,
  ): { seen: Promise<View[]>; opened: Promise<void> } {
    let opened!: () => void;
    const openedPromise = new Promise<void>((resolve) => {
      opened = resolve;
    });
    const seen = new Promise<View[]>((resolve, reject) => {
      const views: View[] = [];
      const req = httpsRequest(
        new URL(`/v1/tokens/${id}?watch=true&timeoutSeconds=120`, issuer.url),
        { method: 'GET', ca: ca.certPem, headers: { authorization: `Bearer ${adminToken}` } },
        (res) => {
          if (res.statusCode !== 200) return reject(new Error(`watch answered ${res.statusCode}`));
          assert.match(String(res.headers['content-type']), /^text\/event-stream/);
          let buffer = '';
          res.on('data', (chunk: Buffer) => {
            buffer += chunk.toString('utf8');
            answers.push(chunk.toString('utf8'));
            for (let end = buffer.indexOf('\n\n'); end >= 0; end = buffer.indexOf('\n\n')) {
              const block = buffer.slice(0, end);
              buffer = buffer.slice(end + 2);
              if (!block.startsWith('event: token')) continue;
              const v = JSON.parse(block.split('\n')[1]?.slice(6) ?? '{}') as View;
              views.push(v);
              if (views.length === 1) opened();
              if (done(v)) {
                req.destroy();
                resolve(views);
              }
            }
          });
          res.on('end', () =>
            reject(new Error(`the stream ended first; seen ${views.map((v) => v.phase).join(', ')}`)),
          );
        },
      );
      req.setTimeout(timeoutMs, () => req.destroy(new Error('no Verified within the deadline')));
      req.on('error', (error) => reject(error));
      req.end();
    });
    return { seen, opened: openedPromise };
  }

  before(async () => {
    await ensureNamespace(h.env, NAMESPACE);
    await applyObjects(
      h.env.kubeconfigPath,
      [
        serviceAccountObject('node-admin', NAMESPACE),
        serviceAccountObject('bystander', NAMESPACE),
        useFlavorClassesRole('nodeflavor-e2e-lifecycle-use', [h.sweet, transient]),
        clusterRoleBindingObject(
          'nodeflavor-e2e-lifecycle-admin',
          'nodeflavor-e2e-lifecycle-use',
          'node-admin',
          NAMESPACE,
        ),
        clusterRoleBindingObject(
          'nodeflavor-e2e-lifecycle-bystander',
          'nodeflavor-e2e-lifecycle-use',
          'bystander',
          NAMESPACE,
        ),
      ],
      'nodeflavor-e2e-lifecycle',
    );
    adminToken = await serviceAccountToken(h.env, NAMESPACE, 'node-admin');
    bystanderToken = await serviceAccountToken(h.env, NAMESPACE, 'bystander');
    ({ issuer, ca } = await startTestIssuer(h.env, {
      rateLimit: { perCaller: { capacity: 1000, refillPerSecond: 100 } },
      logLevel: 'silent',
    }));
    await waitFor(async () => (await call('GET', '/v1/flavors', adminToken)).status === 200, {
      what: 'the issuer to serve',
    });
  });

  after(async () => {
    for (const kubelet of kubelets) kubelet.stop();
    await issuer?.close();
  });

  it('a watch sees Issued, then Verified once a node joins with the material as issued', async () => {
    const issued = await issue(adminToken, {});
    const name = uniqueName('verified');
    // The watch is open (its first event in) before the node joins: it is told, not polling.
    const watch = watchUntil(issued.id, (v) => v.phase === 'Verified');
    await watch.opened;
    kubelets.push(await joinWith(issued, name));
    const views = await watch.seen;
    const phases = views.map((v) => v.phase);
    assert.equal(phases[0], 'Issued');
    assert.equal(phases.at(-1), 'Verified');
    assert.deepEqual(
      phases.filter((p, i) => p !== phases[i - 1]),
      phases.includes('Bound') ? ['Issued', 'Bound', 'Verified'] : ['Issued', 'Verified'],
    );
    const last = views.at(-1) as View;
    assert.equal(last.nodes[0]?.nodeName, name);
    assert.ok(last.nodes[0]?.verifiedAt, 'when it was verified');
    await h.waitForFlavor(name, h.sweet);
  });

  it("lists the caller's own tokens only, by phase and a page at a time", async () => {
    const mine = [await issue(adminToken, {}), await issue(adminToken, {})];
    const theirs = await issue(bystanderToken, {});
    const list = async (query: string, token = adminToken) => {
      const answer = await call('GET', `/v1/tokens${query}`, token);
      answers.push(answer.text);
      assert.equal(answer.status, 200, answer.text);
      return JSON.parse(answer.text) as { items: View[]; continue: string | null };
    };
    // The list is served from the issuer's watch: a token issued a moment ago appears within moments.
    const all = await waitFor(
      async () => {
        const page = await list('?limit=500');
        return mine.every((m) => page.items.some((i) => i.id === m.id)) ? page : undefined;
      },
      { what: 'the new tokens in the list' },
    );
    assert.ok(!all.items.some((i) => i.id === theirs.id), "another caller's token is not listed");
    assert.ok((await list('?phase=Verified')).items.length >= 1, 'the verified token of the test before');
    assert.ok((await list('?phase=Verified')).items.every((i) => i.phase === 'Verified'));
    const first = await list('?limit=1&phase=Issued');
    assert.equal(first.items.length, 1);
    assert.ok(first.continue);
    const second = await list(`?limit=1&phase=Issued&continue=${first.continue}`);
    assert.notEqual(second.items[0]?.id, first.items[0]?.id);
    assert.ok((await list('', bystanderToken)).items.some((i) => i.id === theirs.id));
    const bad = await call('GET', '/v1/tokens?phase=Done', adminToken);
    assert.equal(bad.status, 400);
  });

  it('a refused CSR: Failed with the reason, one aggregated Warning Event, and explain says what to do', async () => {
    const issued = await issue(adminToken, { nodeName: uniqueName('expected'), maxUses: 1 });
    for (const attempt of [uniqueName('wrong'), uniqueName('wrong')]) {
      await assert.rejects(joinWith(issued, attempt, { timeoutMs: 30_000 }), JoinError);
    }
    const failed = await waitFor(
      async () => {
        const v = await view(issued.id);
        return v.phase === 'Failed' && v.nodes.length === 2 ? v : undefined;
      },
      { what: 'the token to show both refusals' },
    );
    assert.equal(failed.reason, 'NodeNameMismatch');
    assert.ok(failed.nodes.every((n) => n.reason === 'NodeNameMismatch' && n.boundAt === null));
    // One Event for the reason on the token, counted twice (two CSRs, two messages).
    const event = await waitFor(
      async () => {
        const events = await h.env.core.listNamespacedEvent({
          namespace: 'default',
          fieldSelector: `involvedObject.name=${issued.id}`,
        });
        const matching = events.items.filter((e) => e.reason === 'NodeNameMismatch');
        return matching.length === 1 && matching[0]?.count === 2 ? matching : undefined;
      },
      { what: 'one NodeNameMismatch Event with count 2 on the token' },
    );
    assert.equal(event[0]?.type, 'Warning');
    const explained = await kubectlFlavor(h.env.kubeconfigPath, ['explain', 'token', issued.tokenID]);
    assert.equal(explained.code, 0, explained.stderr);
    assert.match(explained.stdout, /^Phase: +Failed/m);
    assert.match(
      explained.stdout,
      /^Check failed: +the node name is one the token allows \(NodeNameMismatch\)/m,
    );
    assert.match(explained.stdout, /^What to do: +fix the hostname, or issue a token for the right name/m);
    assert.match(explained.stdout, /Warning +NodeNameMismatch +x2 over/);
  });

  it('a node with a wrong flavor token: explain NODE and the nodes REASON say InvalidToken', async () => {
    const issued = await issue(adminToken, {});
    const other = await issue(adminToken, {});
    const name = uniqueName('forged');
    // Registers with another issuance's (well-formed) flavor token: the HMAC check fails.
    kubelets.push(
      await joinWith(issued, name, {
        extraLabels: { 'nodeflavor.io/token': other.flavorToken },
      }),
    );
    await h.nodeWarning(name, 'InvalidToken');
    const failed = await waitFor(
      async () => {
        const v = await view(issued.id);
        return v.phase === 'Failed' ? v : undefined;
      },
      { what: 'the token to show the failed check' },
    );
    assert.equal(failed.reason, 'InvalidToken');
    assert.equal(failed.nodes[0]?.nodeName, name);
    const explained = await kubectlFlavor(h.env.kubeconfigPath, ['explain', name]);
    assert.equal(explained.code, 0, explained.stderr);
    assert.match(explained.stdout, /^Conclusion: +quarantined: not verified \(InvalidToken\)$/m);
    assert.match(
      explained.stdout,
      new RegExp(
        `^Token: +${issued.id} \\(token ID ${issued.tokenID}, flavor ${h.sweet}, Failed InvalidToken\\)$`,
        'm',
      ),
    );
    assert.match(
      explained.stdout,
      /^CSR: +csr-\S+, made \S+ ago as system:bootstrap:[a-z0-9]{6}: Approved \(NodeflavorBound\)$/m,
    );
    assert.match(
      explained.stdout,
      /^Check failed: +the flavor token matches the bootstrap token \(InvalidToken\)$/m,
    );
    assert.match(explained.stdout, /^What to do: +treat it as a possible attack/m);
    for (const secret of secrets) assert.ok(!explained.stdout.includes(secret), 'explain prints no secret');
    const nodes = await kubectlFlavor(h.env.kubeconfigPath, ['nodes']);
    assert.equal(nodes.code, 0, nodes.stderr);
    const row = nodes.stdout.split('\n').find((l) => l.startsWith(`${name} `));
    assert.deepEqual(row?.split(/\s+/).slice(2), ['unverified', '<none>', '<none>', 'InvalidToken']);
    // One Warning Event per reason on the Node, however often the node is judged.
    const events = await h.env.core.listNamespacedEvent({
      namespace: 'default',
      fieldSelector: `involvedObject.name=${name}`,
    });
    assert.equal(events.items.filter((e) => e.reason === 'InvalidToken').length, 1);
  });

  it('a token whose node lost its flavor (its class deleted) no longer reads Verified; with the class back, it does', async () => {
    await applyFlavorClass(h.env, transient, { labels: { 'nodeflavor.io/flavor': transient } });
    const issued = await issue(adminToken, { flavorClassName: transient });
    const name = uniqueName('losing');
    kubelets.push(await joinWith(issued, name));
    await h.waitForFlavor(name, transient);
    await waitFor(async () => (await view(issued.id)).phase === 'Verified', { what: 'Verified' });
    // The watch (open before) is told when the flavor goes.
    const watch = watchUntil(issued.id, (v) => v.phase === 'Failed');
    await watch.opened;
    await deleteFlavorClass(h.env, transient);
    const lost = (await watch.seen).at(-1) as View;
    assert.equal(lost.reason, 'FlavorClassNotFound');
    assert.equal(lost.nodes[0]?.nodeName, name);
    assert.equal(lost.nodes[0]?.verifiedAt, null, 'the node is not shown verified');
    assert.equal(lost.nodes[0]?.reason, 'FlavorClassNotFound');
    const explained = await kubectlFlavor(h.env.kubeconfigPath, ['explain', 'token', issued.tokenID]);
    assert.equal(explained.code, 0, explained.stderr);
    assert.match(explained.stdout, /^Phase: +Failed/m);
    assert.doesNotMatch(explained.stdout, new RegExp(`${name} +verified`));
    // The class back: the node is flavored again, and the token reads Verified again.
    await applyFlavorClass(h.env, transient, { labels: { 'nodeflavor.io/flavor': transient } });
    await waitFor(async () => (await view(issued.id)).phase === 'Verified', {
      what: 'Verified again once the class is back',
    });
    await deleteFlavorClass(h.env, transient);
  });

  it('a keyed token deleted (revoked): a replay of its Idempotency-Key is refused and no Secret comes back', async () => {
    const key = uniqueName('key');
    const issued = await issue(adminToken, {}, { 'idempotency-key': key });
    const objects = customObjects(h.env.kubeConfig);
    const record = { group: 'nodeflavor.io', version: 'v1alpha1', plural: 'flavoredtokens', name: issued.id };
    await objects.deleteClusterCustomObject(record);
    // Revoked: the bootstrap Secret goes; the record stays, being deleted, while the key may be replayed.
    const secret = { name: `bootstrap-token-${issued.tokenID}`, namespace: 'kube-system' };
    await waitFor(
      async () => (await h.env.core.readNamespacedSecret(secret).catch(() => undefined)) === undefined,
      {
        what: 'the revoked token’s Secret to go',
      },
    );
    try {
      const replay = await call(
        'POST',
        '/v1/tokens',
        adminToken,
        { flavorClassName: h.sweet, ttl: '1h' },
        {
          'idempotency-key': key,
        },
      );
      answers.push(replay.text);
      assert.equal(replay.status, 409, replay.text);
      assert.match(replay.text, /being deleted|revoked/);
      assert.equal(
        await h.env.core.readNamespacedSecret(secret).catch(() => undefined),
        undefined,
        'no Secret back',
      );
      const still = (await objects.getClusterCustomObject(record)) as {
        metadata: { deletionTimestamp?: string };
      };
      assert.ok(still.metadata.deletionTimestamp, 'the record stays, being deleted');
    } finally {
      // Let it go now (it would stay for the issuer's idempotency TTL).
      await objects
        .patchClusterCustomObject({ ...record, body: [{ op: 'remove', path: '/metadata/finalizers' }] })
        .catch(() => undefined);
    }
  });

  it('no answer held a secret', () => {
    assert.ok(answers.length > 5 && secrets.length >= 15);
    for (const text of answers)
      for (const secret of secrets) assert.ok(!text.includes(secret), 'a secret leaked');
  });
});
