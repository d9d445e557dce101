// The HMAC key ring on the real control plane, with `nodeflavor run` (controller + issuer in one
// process, sharing one watched ring) as the chart's ServiceAccount:
//   - first install (no FlavoredToken): the operator creates the ring;
//   - the Secret deleted while tokens exist: no new ring, not ready with the reason, a 503 from
//     the issuer, a Warning Event, nodeflavor_keyring_available 0; nodes are left as they are
//     and a node joining meanwhile is judged only once the Secret is restored, without a restart;
//   - a rotation with `kubectl flavor keys add/activate` makes the issuer sign with the new key at
//     once, tokens of the old key still verify, and `retire` refuses the active key and takes a
//     retired key out of the controller's ring at once;
//   - an edit from a stale read writes nothing; a Secret edited into an unreadable ring fails
//     closed like a missing one until it is fixed.
// This file owns the cluster while it runs (the suite runs files one at a time): the first-install
// test deletes the FlavoredTokens earlier files left behind, and the Secret is restored at the end.
import assert from 'node:assert/strict';
import { request as httpsRequest } from 'node:https';
import { after, before, describe, it } from 'node:test';
import type { V1Secret } from '@kubernetes/client-node';
import { verifyFlavorToken } from '../../src/flavor/flavor-token.ts';
import { addKey, keyRingFromSecretData, keyRingKeys } from '../../src/flavor/keyring.ts';
import { VERIFIED_ANNOTATION } from '../../src/flavor/verification-record.ts';
import { readStoredKeyRing, replaceKeyRing } from '../../src/kube/keyring-store.ts';
import { kubeJson } from '../../src/runtime/fetch.ts';
import type { PlainIssueResponse } from '../../src/tokenissuer/response.ts';
import { applyObjects } from './cluster/apply.ts';
import { freePort } from './cluster/ports.ts';
import type { ManagedProcess } from './cluster/process.ts';
import type { E2EEnvironment } from './support/environment.ts';
import {
  bootstrapSecretNames,
  clusterRoleBindingObject,
  clusterRoleObject,
  flavoredTokenNames,
  serviceAccountObject,
  serviceAccountToken,
} from './support/issuer.ts';
import { kubectlFlavor } from './support/kubectl-flavor-cli.ts';
import {
  ensureNamespace,
  type JoinFiles,
  joinWith,
  metricValue,
  OPERATOR_NAMESPACE,
  opsGet,
} from './support/nodeflavor.ts';
import { FLAVOR_LABEL, labelOnly, operatorFixture } from './support/operator-fixture.ts';
import { uniqueName, waitFor } from './support/wait.ts';

const KEY_SECRET = 'nodeflavor-hmac-keys';
const PORTAL_NAMESPACE = 'nodeflavor-e2e-keyring';
const TOKEN_LABEL = 'nodeflavor.io/token';

interface Answer {
  status: number;
  text: string;
}

describe('HMAC key ring: first install, loss, restore and rotation', () => {
  const flavor = uniqueName('keyring');
  const fx = operatorFixture({ logPrefix: 'nodeflavor-keyring-', flavorClasses: labelOnly(flavor) });
  const { operators, kubelets } = fx;
  let env: E2EEnvironment;
  let metricsPort = 0;
  let issuerPort = 0;
  let issuerCa = '';
  let portalToken = '';
  /** The ring as it was before a test deleted it, to put back whatever happens. */
  let backup: V1Secret | undefined;

  const readSecret = () =>
    env.core.readNamespacedSecret({ name: KEY_SECRET, namespace: OPERATOR_NAMESPACE }).catch(() => undefined);
  const ringNow = async () => keyRingFromSecretData((await readSecret())?.data ?? {});

  async function restoreSecret(): Promise<void> {
    if (!backup || (await readSecret())) return;
    const { metadata, ...rest } = backup;
    await env.core.createNamespacedSecret({
      namespace: OPERATOR_NAMESPACE,
      body: { ...rest, metadata: { name: metadata?.name ?? KEY_SECRET, labels: metadata?.labels ?? {} } },
    });
  }

  async function deleteSecret(): Promise<void> {
    backup = (await readSecret()) ?? backup;
    await env.core
      .deleteNamespacedSecret({ name: KEY_SECRET, namespace: OPERATOR_NAMESPACE })
      .catch(() => undefined);
    await waitFor(async () => (await readSecret()) === undefined, { what: 'the key Secret to be gone' });
  }

  function operator(): ManagedProcess {
    return fx.start(
      [
        '--no-leader-elect',
        '--issuer',
        '--issuer-address',
        `127.0.0.1:${issuerPort}`,
        '--join-api-server-endpoint',
        env.apiServerEndpoint,
      ],
      { metricsPort },
    );
  }

  async function stopOperators(): Promise<void> {
    await Promise.all(operators.splice(0).map((op) => op.stop()));
  }

  async function readyz(): Promise<[number, string]> {
    return opsGet(metricsPort, '/readyz');
  }

  async function waitReady(): Promise<void> {
    await waitFor(async () => (await readyz())[0] === 200, {
      what: 'the operator to be ready',
      timeoutMs: 60_000,
    });
    // The issuer's CA, once the operator has made its serving certificate.
    const tls = await env.core.readNamespacedSecret({
      name: 'nodeflavor-issuer-tls',
      namespace: OPERATOR_NAMESPACE,
    });
    issuerCa = Buffer.from(tls.data?.['ca.crt'] ?? '', 'base64').toString('utf8');
  }

  function call(method: string, path: string, body?: unknown): Promise<Answer> {
    const payload = body === undefined ? undefined : JSON.stringify(body);
    const headers: Record<string, string> = { authorization: `Bearer ${portalToken}` };
    if (payload !== undefined) {
      headers['content-type'] = 'application/json';
      headers['content-length'] = String(Buffer.byteLength(payload));
    }
    return new Promise((resolve, reject) => {
      const req = httpsRequest(
        `https://127.0.0.1:${issuerPort}${path}`,
        { method, headers, ca: issuerCa },
        (res) => {
          const chunks: Buffer[] = [];
          res.on('data', (chunk: Buffer) => chunks.push(chunk));
          res.on('end', () =>
            resolve({ status: res.statusCode ?? 0, text: Buffer.concat(chunks).toString('utf8') }),
          );
        },
      );
      req.on('error', reject);
      req.end(payload);
    });
  }

  async function issue(): Promise<PlainIssueResponse> {
    const answer = await call('POST', '/v1/tokens', { flavorClassName: flavor, ttl: '1h' });
    assert.equal(answer.status, 201, answer.text);
    return JSON.parse(answer.text) as PlainIssueResponse;
  }

  /** The id of the key that derived an issued flavor token, per the ring now in the Secret. */
  async function signedWith(issued: PlainIssueResponse): Promise<string | undefined> {
    const tokenId = issued.bootstrapToken.split('.')[0] ?? '';
    return verifyFlavorToken(await ringNow(), tokenId, flavor, issued.flavorToken).keyId;
  }

  const cli = (args: string[]) => kubectlFlavor(env.kubeconfigPath, args);

  async function joinNode(material: JoinFiles, name: string): Promise<void> {
    kubelets.push(await joinWith(material, name));
  }

  const labelsOf = async (name: string) => (await env.core.readNode({ name })).metadata?.labels ?? {};
  const waitForFlavor = (name: string) =>
    waitFor(async () => (await labelsOf(name))[FLAVOR_LABEL] === flavor, {
      what: `${name} to get flavor ${flavor}`,
      timeoutMs: 30_000,
    });

  async function events(reason: string): Promise<{ type?: string; message?: string }[]> {
    const list = await env.core.listNamespacedEvent({
      namespace: OPERATOR_NAMESPACE,
      fieldSelector: `involvedObject.name=${KEY_SECRET},reason=${reason}`,
    });
    return list.items;
  }

  before(async () => {
    env = fx.env;
    await ensureNamespace(env, PORTAL_NAMESPACE);
    await applyObjects(env.kubeconfigPath, [
      serviceAccountObject('portal', PORTAL_NAMESPACE),
      clusterRoleObject('nodeflavor-e2e-keyring-use', [
        { apiGroups: ['nodeflavor.io'], resources: ['flavorclasses'], verbs: ['use'] },
      ]),
      clusterRoleBindingObject(
        'nodeflavor-e2e-keyring-use',
        'nodeflavor-e2e-keyring-use',
        'portal',
        PORTAL_NAMESPACE,
      ),
    ]);
    portalToken = await serviceAccountToken(env, PORTAL_NAMESPACE, 'portal');
    [metricsPort, issuerPort] = [await freePort(), await freePort()];
    backup = await readSecret();
  });

  // After the fixture has stopped the kubelets and operators.
  after(async () => {
    await restoreSecret();
  });

  it('first install (no FlavoredToken): the operator creates the ring and is ready', async () => {
    // Leftovers of earlier files: without the controller their finalizers would hold them.
    // Right after the CRDs are installed the API server may still answer 429 (storage initialising).
    const leftovers = await waitFor(() => flavoredTokenNames(env), {
      what: 'the FlavoredTokens to be listable',
    });
    for (const name of leftovers) {
      const path = `/apis/nodeflavor.io/v1alpha1/flavoredtokens/${name}`;
      await kubeJson(env.kubeConfig, 'PATCH', path, {
        body: { metadata: { finalizers: null } },
        contentType: 'application/merge-patch+json',
      }).catch(() => undefined);
      await kubeJson(env.kubeConfig, 'DELETE', path).catch(() => undefined);
    }
    await waitFor(async () => (await flavoredTokenNames(env)).size === 0, { what: 'no FlavoredToken left' });

    // No token left, but a Node still carries a verification record (its token was deleted with
    // revocationPolicy Keep): the record is signed under the ring, so this is no first install.
    const recordNode = uniqueName('kept-record');
    await env.core.createNode({
      body: { metadata: { name: recordNode, annotations: { [VERIFIED_ANNOTATION]: '{}' } } },
    });
    await deleteSecret();
    operator();
    await waitFor(
      async () => {
        const [status, body] = await readyz();
        return status === 503 && body.includes('verified nodes exist');
      },
      { what: '/readyz to refuse a new ring while a verified node exists', timeoutMs: 30_000 },
    );
    assert.equal(await readSecret(), undefined, 'no new ring while a node depends on the old one');
    await stopOperators();
    await env.core.deleteNode({ name: recordNode });
    // Leftovers of earlier files carry records too: strip them, as on a cluster never flavored.
    for (const node of (await env.core.listNode()).items) {
      if (node.metadata?.annotations?.[VERIFIED_ANNOTATION] === undefined) continue;
      await kubeJson(env.kubeConfig, 'PATCH', `/api/v1/nodes/${node.metadata.name}`, {
        body: { metadata: { annotations: { [VERIFIED_ANNOTATION]: null } } },
        contentType: 'application/merge-patch+json',
      });
    }

    operator();
    await waitReady();
    const ring = await ringNow();
    assert.equal(ring.verifyOnly.length, 0, 'a fresh ring of one key');
    assert.equal(await metricValue(metricsPort, 'nodeflavor_keyring_available'), 1);
    assert.ok((await events('KeyRingCreated')).length >= 1, 'a Normal Event says the ring was created');
    backup = await readSecret();
  });

  it('the Secret deleted while tokens exist: fail closed and loud, no new ring, recover on restore', async () => {
    if (operators.length === 0) operator();
    await waitReady();
    const verified = await issue();
    const verifiedNode = uniqueName('kept');
    await joinNode(verified, verifiedNode);
    await waitForFlavor(verifiedNode);
    const waiting = await issue();

    await deleteSecret();
    const [status, body] = await waitFor(
      async () => {
        const answer = await readyz();
        return answer[0] === 503 && answer[1].includes('hmac-key-ring') ? answer : undefined;
      },
      { what: '/readyz to report the missing key ring', timeoutMs: 10_000 },
    );
    assert.equal(status, 503);
    assert.match(body, /is missing while FlavoredTokens or verified nodes exist/);
    assert.match(body, /restore the Secret from your backup/);
    assert.equal(await metricValue(metricsPort, 'nodeflavor_keyring_available'), 0);
    assert.equal(await metricValue(metricsPort, 'nodeflavor_keyring_unavailable_total{reason="missing"}'), 1);
    const warnings = await waitFor(
      async () => ((await events('KeyRingMissing')).length > 0 ? events('KeyRingMissing') : undefined),
      {
        what: 'a KeyRingMissing Event',
      },
    );
    assert.equal(warnings[0]?.type, 'Warning');
    assert.match(warnings[0]?.message ?? '', /restore the Secret/);
    const log = fx.logText(operators[operators.length - 1] as ManagedProcess);
    assert.match(
      log,
      /"level":50.*kubectl -n nodeflavor create -f <backup>\.json/,
      'an error log line says how to restore',
    );

    // The issuer refuses with a clear 503 and writes nothing.
    const [secretsBefore, tokensBefore] = [await bootstrapSecretNames(env), await flavoredTokenNames(env)];
    const refused = await call('POST', '/v1/tokens', { flavorClassName: flavor, ttl: '1h' });
    assert.equal(refused.status, 503, refused.text);
    const error = (JSON.parse(refused.text) as { error: { code: string; message: string } }).error;
    assert.equal(error.code, 'Unavailable');
    assert.match(error.message, /HMAC key ring .* is missing/);
    assert.deepEqual(await bootstrapSecretNames(env), secretsBefore, 'no bootstrap Secret written');
    assert.deepEqual(await flavoredTokenNames(env), tokensBefore, 'no FlavoredToken written');

    // The plugin says the same and makes nothing.
    const listed = await cli(['keys', 'list']);
    assert.equal(listed.code, 1);
    assert.match(
      listed.stderr,
      /^kubectl-flavor: the HMAC key Secret nodeflavor\/nodeflavor-hmac-keys does not exist: restore it/,
    );

    // A node joins meanwhile: it is not judged (no InvalidToken, token label kept), and the
    // verified node keeps its flavor.
    const joinedMeanwhile = uniqueName('meanwhile');
    await joinNode(waiting, joinedMeanwhile);
    const rejectedBefore = await metricValue(
      metricsPort,
      'nodeflavor_verifications_total{result="rejected",reason="InvalidToken"}',
    );
    assert.equal((await labelsOf(joinedMeanwhile))[TOKEN_LABEL], waiting.flavorToken);
    assert.equal((await labelsOf(verifiedNode))[FLAVOR_LABEL], flavor);
    assert.equal(await readSecret(), undefined, 'no new ring was created');

    // Restore from the backup: ready again, and the waiting node is verified with the old key.
    await restoreSecret();
    await waitFor(async () => (await readyz())[0] === 200, {
      what: 'ready again after the restore',
      timeoutMs: 10_000,
    });
    assert.equal(await metricValue(metricsPort, 'nodeflavor_keyring_available'), 1);
    await waitForFlavor(joinedMeanwhile);
    assert.equal((await labelsOf(verifiedNode))[FLAVOR_LABEL], flavor);
    assert.equal(
      await metricValue(
        metricsPort,
        'nodeflavor_verifications_total{result="rejected",reason="InvalidToken"}',
      ),
      rejectedBefore,
      'no token was judged invalid',
    );
    assert.equal((await issue()).flavorToken.length, 52, 'the issuer issues again');
  });

  it('kubectl flavor keys: add + activate is effective at once; old tokens verify; retire refuses the active key', async () => {
    await restoreSecret(); // whatever an earlier test left
    if (operators.length === 0) operator();
    await waitReady();
    const oldKey = (await ringNow()).active.id;
    const beforeRotation = await issue();

    const added = await cli(['keys', 'add']);
    assert.equal(added.code, 0, added.stderr);
    const newKey = /^key ([0-9a-f]{8}) added as verify-only/.exec(added.stdout)?.[1] ?? '';
    assert.match(newKey, /^[0-9a-f]{8}$/, added.stdout);
    const issuedAfterAdd = await issue();
    assert.equal(await signedWith(issuedAfterAdd), oldKey, 'an added key signs nothing yet');

    const activated = await cli(['keys', 'activate', newKey]);
    assert.equal(activated.code, 0, activated.stderr);
    assert.equal(
      activated.stdout,
      `key ${newKey} is now active; key ${oldKey} is verify-only (tokens it derived still verify)\n`,
    );
    // At once: far inside the 30-60 s the replicas used to cache the ring for.
    const afterRotation = await waitFor(
      async () => {
        const issued = await issue();
        return (await signedWith(issued)) === newKey ? issued : undefined;
      },
      { what: `the issuer to sign with ${newKey}`, timeoutMs: 3000, intervalMs: 200 },
    );

    const list = await cli(['keys', 'list']);
    assert.equal(list.code, 0, list.stderr);
    assert.match(
      list.stdout,
      new RegExp(`^KEY-ID\\s+STATE\\n${newKey}\\s+active\\n${oldKey}\\s+verify-only\\n$`),
    );
    const ring = await ringNow();
    for (const key of keyRingKeys(ring)) {
      for (const form of [key.key.toString('base64'), key.key.toString('hex')]) {
        assert.ok(!list.stdout.includes(form) && !added.stdout.includes(form), 'no key material printed');
      }
    }

    // A token of the old key still verifies; one of the new key too.
    const oldNode = uniqueName('old-key');
    await joinNode(beforeRotation, oldNode);
    await waitForFlavor(oldNode);
    const newNode = uniqueName('new-key');
    await joinNode(afterRotation, newNode);
    await waitForFlavor(newNode);

    // Retire: never the active (or last) key; a retired key leaves the controller's ring at once.
    const refused = await cli(['keys', 'retire', newKey]);
    assert.equal(refused.code, 1);
    assert.equal(
      refused.stderr,
      `kubectl-flavor: key '${newKey}' is the active key: activate another key first\n`,
    );
    assert.equal((await ringNow()).active.id, newKey, 'nothing written');
    const unknown = await cli(['keys', 'retire', 'deadbeef']);
    assert.equal(unknown.code, 1);
    assert.match(unknown.stderr, /^kubectl-flavor: no key 'deadbeef' in the ring/);

    const retired = await cli(['keys', 'retire', oldKey]);
    assert.equal(retired.code, 0, retired.stderr);
    assert.equal(retired.stdout, `key ${oldKey} retired: tokens derived with it no longer verify\n`);
    assert.deepEqual(
      keyRingKeys(await ringNow()).map((k) => k.id),
      [newKey],
    );
    // A token the old key derived, joined right after: the controller no longer accepts it.
    const rejected = 'nodeflavor_verifications_total{result="rejected",reason="InvalidToken"}';
    const rejectedBefore = await metricValue(metricsPort, rejected);
    const lateNode = uniqueName('late');
    await joinNode(issuedAfterAdd, lateNode);
    await waitFor(async () => (await metricValue(metricsPort, rejected)) > rejectedBefore, {
      what: `${lateNode} to be rejected (InvalidToken)`,
      timeoutMs: 30_000,
    });
    assert.equal((await labelsOf(lateNode))[FLAVOR_LABEL], undefined, 'no flavor from a retired key');

    const init = await cli(['keys', 'init']);
    assert.equal(init.code, 1);
    assert.match(init.stderr, /already exists: use 'kubectl flavor keys add' to rotate/);
    backup = await readSecret();
  });

  it('an edit based on a stale read writes nothing (409, resourceVersion)', async () => {
    await restoreSecret();
    const location = { namespace: OPERATOR_NAMESPACE, name: KEY_SECRET };
    const stale = await readStoredKeyRing(env.kubeConfig, location);
    // Someone else rotates in between.
    const other = await cli(['keys', 'add']);
    assert.equal(other.code, 0, other.stderr);
    const current = keyRingKeys(await ringNow()).map((k) => k.id);
    await assert.rejects(
      replaceKeyRing(env.kubeConfig, location, stale, addKey(stale.ring).ring),
      (error: Error) => {
        assert.match(
          error.message,
          /changed while it was being edited: nothing was written, run the command again/,
        );
        return true;
      },
    );
    assert.deepEqual(
      keyRingKeys(await ringNow()).map((k) => k.id),
      current,
      'the other edit stands',
    );
  });

  it('a Secret edited into an unreadable ring fails closed (KeyRingInvalid) until it is fixed', async () => {
    await restoreSecret();
    if (operators.length === 0) operator();
    await waitReady();
    const good = await readSecret();
    const patch = (data: Record<string, string | null>) =>
      kubeJson(env.kubeConfig, 'PATCH', `/api/v1/namespaces/${OPERATOR_NAMESPACE}/secrets/${KEY_SECRET}`, {
        body: { data },
        contentType: 'application/merge-patch+json',
      });
    // A key entry that is neither active nor listed: a half-done hand edit.
    await patch({ 'key.0badc0de': Buffer.alloc(32, 1).toString('base64') });
    const [, body] = await waitFor(
      async () => {
        const answer = await readyz();
        return answer[0] === 503 ? answer : undefined;
      },
      { what: '/readyz to report the unreadable key ring', timeoutMs: 10_000 },
    );
    assert.match(
      body,
      /hmac-key-ring \(Secret nodeflavor\/nodeflavor-hmac-keys is not a valid key ring: .*'key\.0badc0de'/,
    );
    assert.equal(await metricValue(metricsPort, 'nodeflavor_keyring_available'), 0);
    const refused = await call('POST', '/v1/tokens', { flavorClassName: flavor, ttl: '1h' });
    assert.equal(refused.status, 503, refused.text);
    await waitFor(async () => (await events('KeyRingInvalid')).length > 0, {
      what: 'a KeyRingInvalid Event',
    });

    await patch({ 'key.0badc0de': null });
    await waitFor(async () => (await readyz())[0] === 200, {
      what: 'ready once the Secret is fixed',
      timeoutMs: 10_000,
    });
    assert.deepEqual((await readSecret())?.data, good?.data);
    assert.equal((await issue()).flavorToken.length, 52);
  });
});
