// issueIdempotently as two replicas see it: two issuance contexts (no shared memory) over one
// store. A retry with the same Idempotency-Key on either gets the same token, exactly once.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { IDEMPOTENCY_ANNOTATION } from '../../src/flavor/idempotent-issuance.ts';
import { activateKey, addKey, type KeyRing, newKeyRing } from '../../src/flavor/keyring.ts';
import { KubeError } from '../../src/runtime/kube-error.ts';
import { IssuanceSettingsSchema } from '../../src/tokenissuer/config.ts';
import { issueIdempotently } from '../../src/tokenissuer/issuance/idempotent-issue.ts';
import type { IssuanceDeps, PlainIssuedToken } from '../../src/tokenissuer/issuance/issue.ts';
import { clusterInfoKubeconfig, FakeTokenKube } from './support/issuer-fakes.ts';
import { seededRandomBytes } from './support/random.ts';

const TTL_MS = 3_600_000;
const NOW = new Date('2030-01-01T00:00:30Z');

async function setup() {
  const kube = new FakeTokenKube(await clusterInfoKubeconfig());
  kube.addFlavor('sweet');
  let ring: KeyRing = newKeyRing(seededRandomBytes('ring'));
  const replica = (name: string): IssuanceDeps => ({
    kube,
    keyRing: async () => ring,
    settings: IssuanceSettingsSchema.parse({}),
    now: () => NOW,
    randomBytes: seededRandomBytes(name),
  });
  return {
    kube,
    a: replica('a'),
    b: replica('b'),
    rotate: () => {
      const added = addKey(ring, seededRandomBytes('rotation'));
      ring = activateKey(added.ring, added.id);
    },
  };
}

const input = { flavorClassName: 'sweet', ttl: '1h', owner: 'sha256:portal', requestedBy: 'portal' };
const same = (x: PlainIssuedToken, y: PlainIssuedToken) => {
  assert.equal(x.name, y.name);
  assert.equal(x.bootstrapToken.secret.reveal(), y.bootstrapToken.secret.reveal());
  assert.equal(x.flavorToken.reveal(), y.flavorToken.reveal());
  assert.equal(x.material.joinConfiguration, y.material.joinConfiguration);
};

describe('issueIdempotently: exactly once across replicas', () => {
  it('a retry on the other replica gets the same token; one record, one Secret', async () => {
    const { kube, a, b } = await setup();
    const first = await issueIdempotently(a, input, 'order-1', TTL_MS);
    const retry = await issueIdempotently(b, input, 'order-1', TTL_MS);
    assert.equal(first.replayed, false);
    assert.equal(retry.replayed, true);
    same(first.issued, retry.issued);
    assert.equal(kube.tokens.size, 1);
    assert.equal(kube.secrets.size, 1);
    assert.equal(kube.secrets.get(first.issued.tokenId)?.secret, first.issued.bootstrapToken.secret.reveal());
    const record = kube.tokens.get(first.issued.name);
    assert.ok(record?.metadata.annotations?.[IDEMPOTENCY_ANNOTATION]);
    assert.ok(record?.metadata.annotations?.['nodeflavor.io/issued']);
    const stored = JSON.stringify(record);
    assert.ok(!stored.includes(first.issued.bootstrapToken.secret.reveal()), 'no secret on the record');
    assert.ok(!stored.includes('order-1'), 'not even the Idempotency-Key');
  });

  it('two replicas racing with the same request answer the same token', async () => {
    const { kube, a, b } = await setup();
    const [x, y] = await Promise.all([
      issueIdempotently(a, input, 'order-2', TTL_MS),
      issueIdempotently(b, input, 'order-2', TTL_MS),
    ]);
    same(x.issued, y.issued);
    assert.equal(kube.tokens.size, 1);
    assert.equal(kube.secrets.size, 1);
  });

  it('an attempt that failed before its Secret is resumed by the retry on the other replica', async () => {
    const { kube, a, b } = await setup();
    kube.failNext.createBootstrapSecret = new KubeError(0, 'Timeout', 'did not answer in time');
    await assert.rejects(issueIdempotently(a, input, 'order-3', TTL_MS), /did not answer/);
    const [record] = [...kube.tokens.values()];
    assert.equal(
      record?.metadata.annotations?.['nodeflavor.io/issued'],
      undefined,
      'not marked: never answered',
    );
    const retry = await issueIdempotently(b, input, 'order-3', TTL_MS);
    assert.equal(kube.tokens.size, 1);
    assert.equal(kube.secrets.get(retry.issued.tokenId)?.secret, retry.issued.bootstrapToken.secret.reveal());
    assert.ok(kube.tokens.get(retry.issued.name)?.metadata.annotations?.['nodeflavor.io/issued']);
  });

  it('an attempt that made its Secret but not the mark is completed with that same Secret', async () => {
    const { kube, a, b } = await setup();
    kube.failNext.markFlavoredTokenIssued = new KubeError(0, 'Unreachable', 'down');
    await assert.rejects(issueIdempotently(a, input, 'order-4', TTL_MS), /down/);
    assert.equal(kube.secrets.size, 1);
    const retry = await issueIdempotently(b, input, 'order-4', TTL_MS);
    assert.equal(kube.secrets.size, 1);
    assert.equal(kube.secrets.get(retry.issued.tokenId)?.secret, retry.issued.bootstrapToken.secret.reveal());
  });

  it('the same key with another body is refused (409), on any replica; nothing more is written', async () => {
    const { kube, a, b } = await setup();
    await issueIdempotently(a, input, 'order-5', TTL_MS);
    await assert.rejects(
      issueIdempotently(b, { ...input, ttl: '2h' }, 'order-5', TTL_MS),
      (error: Error & { code?: string }) =>
        error.code === 'Conflict' && /different request body/.test(error.message),
    );
    assert.equal(kube.tokens.size, 1);
  });

  it('another caller with the same key gets a token of its own', async () => {
    const { kube, a, b } = await setup();
    const mine = await issueIdempotently(a, input, 'order-6', TTL_MS);
    const theirs = await issueIdempotently(b, { ...input, owner: 'sha256:other' }, 'order-6', TTL_MS);
    assert.notEqual(mine.issued.tokenId, theirs.issued.tokenId);
    assert.equal(kube.tokens.size, 2);
  });

  it('a retry after a key rotation finds the token the old key issued', async () => {
    const { kube, a, b, rotate } = await setup();
    const first = await issueIdempotently(a, input, 'order-7', TTL_MS);
    rotate();
    const retry = await issueIdempotently(b, input, 'order-7', TTL_MS);
    same(first.issued, retry.issued);
    assert.equal(kube.tokens.size, 1);
  });

  it('a key older than the TTL is refused, not replayed', async () => {
    const { kube, a, b } = await setup();
    kube.creationTimestamp = '2029-12-31T22:00:00Z';
    await issueIdempotently(a, input, 'order-8', TTL_MS).catch(() => undefined);
    kube.creationTimestamp = '2030-01-01T00:00:00Z';
    await assert.rejects(
      issueIdempotently(b, input, 'order-8', TTL_MS),
      (error: Error & { code?: string }) =>
        error.code === 'Conflict' && /first used more than 3600 s ago/.test(error.message),
    );
  });

  it('after its record was deleted, a retry makes a new token with a new secret: a revoked one never returns', async () => {
    const { kube, a, b } = await setup();
    const first = await issueIdempotently(a, input, 'order-9', TTL_MS);
    kube.tokens.delete(first.issued.name);
    kube.secrets.delete(first.issued.tokenId);
    const again = await issueIdempotently(b, input, 'order-9', TTL_MS);
    assert.equal(again.issued.tokenId, first.issued.tokenId, 'the same derived ID');
    assert.notEqual(again.issued.bootstrapToken.secret.reveal(), first.issued.bootstrapToken.secret.reveal());
  });
});
