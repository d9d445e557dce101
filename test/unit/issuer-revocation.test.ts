// Revocation is final on every issuance path: an issuance racing a revocation (revokeToken) or a
// deletion (kubectl delete, then the controller) is run in every order their API calls can take
// (support/interleavings.ts), and after both have finished no bootstrap Secret exists for a
// revoked or deleted token, no record was marked issued while revoked or being deleted, and no
// material was answered unless the issuance's last check of the record (the plain path's read-back
// after its Secret, a keyed issuance's mark) came first. Plus the replays: a revoked or deleting
// record is never completed nor answered again, from the records or from a replica's memory.
import assert from 'node:assert/strict';
import { before, describe, it } from 'node:test';
import type { FlavoredToken } from '../../src/flavor/resources.ts';
import type { TokenKube } from '../../src/kube/tokens.ts';
import { KubeError } from '../../src/runtime/kube-error.ts';
import { IssuanceSettingsSchema, parseIssuerConfig } from '../../src/tokenissuer/config.ts';
import { IssuerError } from '../../src/tokenissuer/errors.ts';
import { issueIdempotently } from '../../src/tokenissuer/issuance/idempotent-issue.ts';
import {
  type IssuanceDeps,
  issueToken,
  type PlainIssuedToken,
  revokeToken,
} from '../../src/tokenissuer/issuance/issue.ts';
import { buildIssuerApp } from '../../src/tokenissuer/server.ts';
import { everyInterleaving, gated, type Interleaving, type Turn } from './support/interleavings.ts';
import { clusterInfoKubeconfig, FakeReviews, FakeTokenKube, fakeKeyRing } from './support/issuer-fakes.ts';
import { seededRandomBytes } from './support/random.ts';

const TTL_MS = 3_600_000;
const input = { flavorClassName: 'sweet', ttl: '1h', owner: 'sha256:portal', requestedBy: 'portal' };
let clusterInfo = '';
before(async () => {
  clusterInfo = await clusterInfoKubeconfig();
});

/** A FakeTokenKube that tells when the first record exists (a revocation needs one to revoke). */
class Store extends FakeTokenKube {
  #created!: (name: string) => void;
  readonly created = new Promise<string>((resolve) => {
    this.#created = resolve;
  });
  override async createFlavoredToken(token: Parameters<FakeTokenKube['createFlavoredToken']>[0]) {
    const record = await super.createFlavoredToken(token);
    this.#created(record.metadata.name ?? '');
    return record;
  }
}

/** Every call that reads or writes what issuance and revocation race on. */
const GATED = new Set([
  'createFlavoredToken',
  'getFlavoredToken',
  'createBootstrapSecret',
  'markFlavoredTokenIssued',
  'markFlavoredTokenRevoked',
  'deleteBootstrapSecret',
  'deleteFlavoredToken',
  'beginDeletion',
  'finishDeletion',
  'writeStatus',
]);

function depsOf(kube: TokenKube): IssuanceDeps {
  const ring = fakeKeyRing();
  return {
    kube,
    keyRing: () => ring.get(),
    settings: IssuanceSettingsSchema.parse({}),
    now: () => new Date('2030-01-01T00:00:30Z'),
    randomBytes: seededRandomBytes('revocation'),
  };
}

function newStore(): Store {
  const kube = new Store(clusterInfo);
  kube.addFlavor('sweet');
  return kube;
}

type Issue = (deps: IssuanceDeps) => Promise<PlainIssuedToken>;
const plain: Issue = (deps) => issueToken(deps, input);
const idempotent: Issue = async (deps) => (await issueIdempotently(deps, input, 'order-1', TTL_MS)).issued;

/** The other party: a revocation through the issuer, or a deletion the controller completes. */
type Withdraw = (kube: Store, turn: Turn) => Promise<unknown>;
const revocation: Withdraw = async (kube, turn) => {
  const name = await kube.created;
  return revokeToken(depsOf(gated(kube, 'revoker', turn, GATED)), name);
};
const deletion: Withdraw = async (kube, turn) => {
  const name = await kube.created;
  const api = gated(kube, 'deleter', turn, GATED);
  await api.beginDeletion(name);
  // The controller: the Secret first (once, recorded), then the finalizer goes, and the record.
  const tokenId = name.slice(3);
  await api.deleteBootstrapSecret(tokenId);
  await api.finishDeletion(name);
};

/** The invariant, after both have finished. */
function checkFinal(kube: Store, run: Interleaving, withdraw: 'revoker' | 'deleter'): void {
  const where = `\n${run.trace.join('\n')}`;
  assert.deepEqual(kube.markedWithdrawn, [], `a record was marked issued while withdrawn:${where}`);
  for (const record of [...kube.tokens.values()]) {
    const tokenId = record.metadata.name?.slice(3) ?? '';
    if (record.spec.revoked || record.metadata.deletionTimestamp)
      assert.equal(kube.secrets.has(tokenId), false, `a revoked/deleting token kept its Secret:${where}`);
  }
  const issued = run.results.issuer;
  const name = [...kube.tokens.keys()][0];
  for (const secret of kube.secrets.values()) {
    assert.ok(kube.tokens.has(`ft-${secret.tokenId}`), `a Secret outlived its record:${where}`);
  }
  if (issued?.ok) {
    // Answered: its last check of the record (the plain path's read-back after the Secret, a
    // keyed issuance's mark) came before the revocation's (or the deletion's) first write.
    const answer = issued.value as PlainIssuedToken;
    const marked = Math.max(
      run.trace.lastIndexOf('issuer:markFlavoredTokenIssued'),
      run.trace.lastIndexOf('issuer:getFlavoredToken'),
    );
    const withdrawn = run.trace.indexOf(
      withdraw === 'revoker' ? 'revoker:markFlavoredTokenRevoked' : 'deleter:beginDeletion',
    );
    assert.ok(withdrawn === -1 || marked < withdrawn, `material answered after the withdrawal:${where}`);
    const secret = kube.secrets.get(answer.tokenId);
    if (secret) assert.equal(secret.secret, answer.bootstrapToken.secret.reveal());
  } else {
    const error = issued?.error;
    assert.ok(error instanceof IssuerError, `not an IssuerError: ${String(error)}${where}`);
    assert.ok(['Conflict', 'Unavailable'].includes(error.code), `${error.code}: ${error.message}`);
    assert.match(error.message, /revoked|deleted|being deleted/);
    assert.equal(
      name === undefined || !kube.secrets.has(name.slice(3)),
      true,
      `failed, Secret left:${where}`,
    );
  }
  const other = run.results[withdraw];
  if (other && !other.ok)
    assert.ok(
      other.error instanceof IssuerError && other.error.code === 'NotFound',
      `the ${withdraw} failed: ${String(other.error)}`,
    );
}

/** Every interleaving of an issuance with one other actor's calls; `check` once both finished. */
function raceIssuance(
  issue: Issue,
  actor: string,
  other: (kube: Store, turn: Turn) => Promise<unknown>,
  check: (kube: Store, run: Interleaving) => void,
): Promise<number> {
  return everyInterleaving({
    setup: async (turn) => {
      const kube = newStore();
      return {
        state: kube,
        actors: {
          issuer: () => issue(depsOf(gated(kube, 'issuer', turn, GATED))),
          [actor]: () => other(kube, turn),
        },
      };
    },
    check,
  });
}

describe('revocation is final: every interleaving of an issuance with a revocation or deletion', () => {
  const table: [string, Issue, Withdraw, 'revoker' | 'deleter'][] = [
    ['issueToken × revokeToken', plain, revocation, 'revoker'],
    ['issueToken × deletion', plain, deletion, 'deleter'],
    ['issueIdempotently × revokeToken', idempotent, revocation, 'revoker'],
    ['issueIdempotently × deletion', idempotent, deletion, 'deleter'],
  ];
  for (const [what, issue, withdraw, actor] of table) {
    it(what, async () => {
      const runs = await raceIssuance(issue, actor, withdraw, (kube, run) => checkFinal(kube, run, actor));
      assert.ok(runs >= 10, `only ${runs} interleavings`);
    });
  }

  it('a replay completing an unfinished record × revokeToken', async () => {
    const runs = await everyInterleaving({
      setup: async (turn) => {
        const kube = newStore();
        // The first attempt made its record, then failed before its Secret.
        kube.failNext.createBootstrapSecret = new KubeError(0, 'Timeout', 'did not answer in time');
        await assert.rejects(idempotent(depsOf(kube)), /did not answer/);
        return {
          state: kube,
          actors: {
            issuer: () => idempotent(depsOf(gated(kube, 'issuer', turn, GATED))),
            revoker: () => revocation(kube, turn),
          },
        };
      },
      check: (kube, run) => checkFinal(kube, run, 'revoker'),
    });
    assert.ok(runs >= 10, `only ${runs} interleavings`);
  });

  for (const [path, issue, marked] of [
    ['a plain issuance (no mark)', plain, false],
    ['a keyed issuance (the mark is retried on the fresh version)', idempotent, true],
  ] as const) {
    it(`the controller's status writes during ${path} are harmless`, async () => {
      const statusWrites = async (kube: Store, turn: Turn) => {
        const name = await kube.created;
        const api = gated(kube, 'controller', turn, GATED);
        await api.writeStatus(name);
        await api.writeStatus(name);
      };
      const runs = await raceIssuance(issue, 'controller', statusWrites, (kube, run) => {
        const issued = run.results.issuer;
        assert.ok(issued?.ok, `issuance failed: ${issued?.ok === false ? String(issued.error) : ''}`);
        const answer = issued.value as PlainIssuedToken;
        const mark = kube.tokens.get(answer.name)?.metadata.annotations?.['nodeflavor.io/issued'];
        assert.equal(mark !== undefined, marked);
        assert.equal(kube.secrets.get(answer.tokenId)?.secret, answer.bootstrapToken.secret.reveal());
      });
      assert.ok(runs >= 3, `only ${runs} interleavings`);
    });
  }
});

describe('a replay of a revoked or deleting record: 409, nothing written, nothing answered', () => {
  const cases: [string, (kube: FakeTokenKube, record: FlavoredToken) => Promise<void>, RegExp][] = [
    [
      'revoked',
      async (kube, record) => {
        await revokeToken(depsOf(kube), record);
      },
      /^the token for this Idempotency-Key was revoked: a revoked token is never issued or answered again; use a new Idempotency-Key for a new request$/,
    ],
    [
      'being deleted',
      async (kube, record) => {
        await kube.beginDeletion(record.metadata.name ?? '');
        await kube.deleteBootstrapSecret(record.metadata.name?.slice(3) ?? '');
      },
      /^the token issued for this Idempotency-Key is being deleted: use a new Idempotency-Key for a new request$/,
    ],
  ];
  for (const [what, withdraw, message] of cases) {
    for (const finished of [true, false]) {
      it(`${what}, ${finished ? 'marked issued' : 'never marked issued (its Secret never made)'}`, async () => {
        const kube = newStore();
        if (!finished) kube.failNext.createBootstrapSecret = new KubeError(0, 'Timeout', 'no answer');
        await idempotent(depsOf(kube)).catch(() => undefined);
        const [record] = [...kube.tokens.values()];
        assert.ok(record);
        await withdraw(kube, record);
        assert.equal(kube.secrets.size, 0);
        await assert.rejects(idempotent(depsOf(kube)), (error: IssuerError) => {
          assert.equal(error.code, 'Conflict');
          assert.match(error.message, message);
          return true;
        });
        assert.equal(kube.secrets.size, 0, 'the Secret of a withdrawn token was made again');
        assert.equal(kube.tokens.size, 1);
      });
    }
  }
});

describe("a replica's remembered answer is not replayed once its token is withdrawn", () => {
  async function issuerApp() {
    const kube = newStore();
    const reviews = new FakeReviews();
    reviews.addUser('portal-token', 'portal', ['sweet'], { user: { uid: 'p-uid' } });
    const { app } = buildIssuerApp(
      parseIssuerConfig({ tls: { certPem: 'x', keyPem: 'y' }, logLevel: 'silent' }),
      { kube, reviews, keyRing: fakeKeyRing() },
    );
    const post = () =>
      app.inject({
        method: 'POST',
        url: '/v1/tokens',
        headers: {
          authorization: 'Bearer portal-token',
          'content-type': 'application/json',
          'idempotency-key': 'order-1',
        },
        payload: JSON.stringify({ flavorClassName: 'sweet' }),
      });
    return { kube, post, app };
  }

  it('revoked: the retry on the same replica gets 409, not the material', async () => {
    const { kube, post, app } = await issuerApp();
    const first = await post();
    assert.equal(first.statusCode, 201);
    const { id, bootstrapToken } = first.json() as { id: string; bootstrapToken: string };
    const revoked = await app.inject({
      method: 'DELETE',
      url: `/v1/tokens/${id}`,
      headers: { authorization: 'Bearer portal-token' },
    });
    assert.equal(revoked.statusCode, 200);
    const retry = await post();
    assert.equal(retry.statusCode, 409);
    assert.ok(!retry.body.includes(bootstrapToken.split('.')[1] ?? ''), 'the secret was replayed');
    assert.match(retry.body, /revoked: a revoked token is never issued or answered again/);
    assert.equal(kube.secrets.size, 0);
  });

  it('deleted: the retry gets a new token with a new secret, not the dead one', async () => {
    const { kube, post } = await issuerApp();
    const first = (await post()).json() as { id: string; tokenID: string; bootstrapToken: string };
    kube.tokens.delete(first.id);
    kube.secrets.delete(first.tokenID);
    const retry = await post();
    assert.equal(retry.statusCode, 201);
    const again = retry.json() as { tokenID: string; bootstrapToken: string };
    assert.equal(again.tokenID, first.tokenID, 'the same derived ID');
    assert.notEqual(again.bootstrapToken, first.bootstrapToken);
    assert.equal(kube.secrets.get(again.tokenID)?.secret, again.bootstrapToken.split('.')[1]);
  });
});
