import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { parse } from 'yaml';
import { TOKEN_ID_LABEL } from '../../src/flavor/resources.ts';
import { KubeError } from '../../src/runtime/kube-error.ts';
import { IssuanceSettingsSchema } from '../../src/tokenissuer/config.ts';
import type { IssuerError } from '../../src/tokenissuer/errors.ts';
import {
  discoveryInfo,
  type IssuanceDeps,
  issueToken,
  listTokens,
  revokeToken,
} from '../../src/tokenissuer/issuance/issue.ts';
import { clusterInfoKubeconfig, FakeTokenKube, fakeKeyRing } from './support/issuer-fakes.ts';
import { seededRandomBytes } from './support/random.ts';

async function setup(seed = 'issue', settings: Record<string, unknown> = {}) {
  const kube = new FakeTokenKube(await clusterInfoKubeconfig());
  kube.addFlavor('sweet');
  kube.addFlavor('sour');
  const ring = fakeKeyRing();
  const deps: IssuanceDeps = {
    kube,
    keyRing: () => ring.get(),
    settings: IssuanceSettingsSchema.parse(settings),
    now: () => new Date('2030-01-01T00:00:00Z'),
    randomBytes: seededRandomBytes(seed),
  };
  return { kube, deps };
}

describe('issueToken', () => {
  it('writes the FlavoredToken (no secret) and then its bootstrap Secret, owned by it', async () => {
    const { kube, deps } = await setup();
    const issued = await issueToken(deps, { flavorClassName: 'sweet', ttl: '1h', requestedBy: 'alice' });
    const record = kube.tokens.get(issued.name);
    assert.ok(record);
    assert.equal(issued.name, `ft-${issued.tokenId}`);
    assert.equal(record.metadata.labels?.[TOKEN_ID_LABEL], issued.tokenId);
    assert.equal(record.metadata.annotations?.['nodeflavor.io/requested-by'], 'alice');
    assert.deepEqual(record.spec, {
      flavorClassName: 'sweet',
      expiresAt: '2030-01-01T01:00:00Z',
      maxUses: 1,
      revocationPolicy: 'Keep',
      revoked: false,
    });
    assert.equal(record.status, undefined, 'the status is the controller’s to write');
    assert.equal(record.metadata.annotations?.['nodeflavor.io/issued'], undefined, 'two writes: no mark');
    assert.equal(issued.expiresAt, '2030-01-01T01:00:00Z');
    const serialised = JSON.stringify(record);
    assert.ok(!serialised.includes(issued.bootstrapToken.secret.reveal()), 'no token secret in the record');
    assert.ok(!serialised.includes(issued.flavorToken.reveal()), 'no flavor token in the record');

    const secret = kube.secrets.get(issued.tokenId);
    assert.deepEqual(secret, {
      tokenId: issued.tokenId,
      secret: issued.bootstrapToken.secret.reveal(),
      expiration: '2030-01-01T01:00:00Z',
      authExtraGroups: 'system:bootstrappers:nodeflavor',
      description: 'nodeflavor join token',
      owner: { name: issued.name, uid: record.metadata.uid },
      signing: false,
    });
    assert.equal(issued.expiresAt, '2030-01-01T01:00:00Z');
    assert.ok(
      issued.material.joinConfiguration.includes(`nodeflavor.io/token=${issued.flavorToken.reveal()}`),
    );
  });

  it('applies the default ttl (24h) when the request sets no expiry', async () => {
    const { kube, deps } = await setup();
    const issued = await issueToken(deps, { flavorClassName: 'sour' });
    assert.equal(kube.tokens.get(issued.name)?.spec.ttl, undefined, 'the record holds the absolute expiry');
    assert.equal(kube.tokens.get(issued.name)?.spec.expiresAt, '2030-01-02T00:00:00Z');
    assert.equal(issued.expiresAt, '2030-01-02T00:00:00Z');
  });

  it('gives the same Secret and the same material shape for every flavor', async () => {
    const { kube, deps } = await setup();
    const sweet = await issueToken(deps, { flavorClassName: 'sweet' });
    const sour = await issueToken(deps, { flavorClassName: 'sour' });
    const { tokenId: _a, secret: _b, owner: _c, ...sweetSecret } = kube.secrets.get(sweet.tokenId)!;
    const { tokenId: _d, secret: _e, owner: _f, ...sourSecret } = kube.secrets.get(sour.tokenId)!;
    assert.deepEqual(sweetSecret, sourSecret);
    assert.equal(sweet.material.joinConfiguration.length, sour.material.joinConfiguration.length);
    assert.equal(sweet.material.cloudInit.length, sour.material.cloudInit.length);
    assert.ok(!sweet.name.includes('sweet') && !sour.name.includes('sour'));
  });

  it('refuses an unknown flavor with a hint, writing nothing', async () => {
    const { kube, deps } = await setup();
    await assert.rejects(issueToken(deps, { flavorClassName: 'bitter' }), (error: IssuerError) => {
      assert.equal(error.status, 404);
      assert.equal(
        error.message,
        "FlavorClass 'bitter' not found: create it or check --flavor (flavorClassName)",
      );
      return true;
    });
    assert.equal(kube.tokens.size + kube.secrets.size, 0);
  });

  it('refuses an invalid request with 400 before any read or write', async () => {
    const { kube, deps } = await setup();
    await assert.rejects(
      issueToken(deps, { flavorClassName: 'sweet', ttl: '999h' }),
      (error: IssuerError) => {
        assert.equal(error.status, 400);
        assert.deepEqual(
          error.fields?.map((f) => f.field),
          ['ttl'],
        );
        return true;
      },
    );
    assert.equal(kube.tokens.size + kube.secrets.size, 0);
  });

  it('rolls the FlavoredToken back when the Secret cannot be created', async () => {
    const { kube, deps } = await setup();
    kube.failNext.createBootstrapSecret = new KubeError(403, 'Forbidden', 'create Secret: forbidden');
    await assert.rejects(issueToken(deps, { flavorClassName: 'sweet' }), /forbidden/);
    assert.equal(kube.tokens.size + kube.secrets.size, 0);
  });

  it('rolls back both objects when the record cannot be read back after its Secret', async () => {
    const { kube, deps } = await setup();
    kube.failNext.getFlavoredToken = new KubeError(0, 'Unreachable', 'down');
    await assert.rejects(issueToken(deps, { flavorClassName: 'sweet' }), /down/);
    assert.equal(kube.tokens.size + kube.secrets.size, 0);
  });

  it('writes no status (the controller owns it), yet the views show the expiry at once', async () => {
    const { kube, deps } = await setup();
    const issued = await issueToken(deps, { flavorClassName: 'sweet', ttl: '2h' });
    const record = kube.tokens.get(issued.name);
    assert.equal(record?.status, undefined);
    const [view] = await listTokens(deps);
    assert.equal(view?.expiresAt, issued.expiresAt);
    assert.equal(view?.tokenID, issued.tokenId);
  });

  it('surfaces the original error when the rollback fails too (the record stays, unused, until it expires)', async () => {
    const { kube, deps } = await setup();
    kube.failNext.createBootstrapSecret = new KubeError(500, 'InternalError', 'etcd timeout');
    kube.failNext.deleteFlavoredToken = new KubeError(0, 'Unreachable', 'down');
    await assert.rejects(issueToken(deps, { flavorClassName: 'sweet' }), /etcd timeout/);
    assert.equal(kube.tokens.size, 1);
    assert.equal(kube.secrets.size, 0, 'never a Secret without a record');
  });

  it('draws a new token ID when the first one is taken', async () => {
    const { kube, deps } = await setup('clash');
    const first = await issueToken(
      { ...deps, randomBytes: seededRandomBytes('clash') },
      { flavorClassName: 'sweet' },
    );
    const second = await issueToken(
      { ...deps, randomBytes: seededRandomBytes('clash') },
      { flavorClassName: 'sweet' },
    );
    assert.notEqual(first.tokenId, second.tokenId);
    assert.equal(kube.tokens.size, 2);
  });

  it('reads the key ring and cluster-info before writing, so their failures leave nothing', async () => {
    const { kube, deps } = await setup();
    kube.failNext.readClusterInfo = new KubeError(403, 'Forbidden', 'cluster-info forbidden');
    await assert.rejects(issueToken(deps, { flavorClassName: 'sweet' }), /cluster-info forbidden/);
    await assert.rejects(
      issueToken(
        { ...deps, keyRing: async () => Promise.reject(new Error('no ring')) },
        { flavorClassName: 'sweet' },
      ),
      /no ring/,
    );
    assert.equal(kube.tokens.size + kube.secrets.size, 0);
  });
});

describe('discovery', () => {
  it('file discovery (default): the Secret asks for no cluster-info signature; the material carries the CA', async () => {
    const { kube, deps } = await setup();
    const issued = await issueToken(deps, { flavorClassName: 'sweet' });
    assert.equal(kube.secrets.get(issued.tokenId)?.signing, false);
    assert.equal(issued.material.discovery, 'file');
    const kubeconfig = parse(issued.material.discoveryKubeconfig);
    const clusterInfo = parse(kube.clusterInfo);
    assert.equal(
      kubeconfig.clusters[0].cluster['certificate-authority-data'],
      clusterInfo.clusters[0].cluster['certificate-authority-data'],
    );
    assert.equal(kubeconfig.clusters[0].cluster.server, 'https://10.0.0.1:6443');
    assert.equal(
      parse(issued.material.joinConfiguration).discovery.file.kubeConfigPath,
      issued.material.discoveryKubeconfigPath,
    );
  });

  it('file discovery issues however many signatures cluster-info carries', async () => {
    const { kube, deps } = await setup();
    kube.clusterInfoSignatures = 50_000;
    await issueToken(deps, { flavorClassName: 'sweet' });
    assert.equal(kube.secrets.size, 1);
  });

  it('token discovery: the Secret asks for a signature and the JoinConfiguration pins the CA hash', async () => {
    const { kube, deps } = await setup('issue', { discovery: 'token' });
    const issued = await issueToken(deps, { flavorClassName: 'sweet' });
    assert.equal(kube.secrets.get(issued.tokenId)?.signing, true);
    const discovery = parse(issued.material.joinConfiguration).discovery;
    assert.equal(discovery.bootstrapToken.caCertHashes[0], issued.material.caCertHash);
  });

  it('token discovery refuses (503, nothing written) once cluster-info holds the signature limit', async () => {
    const { kube, deps } = await setup('issue', { discovery: 'token', maxClusterInfoSignatures: 3 });
    kube.clusterInfoSignatures = 2;
    await issueToken(deps, { flavorClassName: 'sweet' });
    kube.clusterInfoSignatures = 3;
    await assert.rejects(issueToken(deps, { flavorClassName: 'sweet' }), (error: IssuerError) => {
      assert.equal(error.status, 503);
      assert.match(error.message, /3 token signatures \(limit 3.*issuance\.discovery: file/);
      return true;
    });
    assert.equal(kube.secrets.size, 1);
    assert.equal(kube.tokens.size, 1);
  });

  it('settings refuse a discovery path kubeadm would fetch without the CA pin, and a signature limit past the cap', () => {
    for (const discoveryKubeconfigPath of [
      'https://example.com/d.conf',
      'd.conf',
      '/etc/../d.conf',
      '/etc/',
    ]) {
      assert.equal(
        IssuanceSettingsSchema.safeParse({ discoveryKubeconfigPath }).success,
        false,
        discoveryKubeconfigPath,
      );
    }
    assert.equal(
      IssuanceSettingsSchema.safeParse({ discoveryKubeconfigPath: '/opt/join/d.conf' }).success,
      true,
    );
    assert.equal(IssuanceSettingsSchema.safeParse({ maxClusterInfoSignatures: 5_001 }).success, false);
    assert.equal(IssuanceSettingsSchema.safeParse({ discovery: 'https' }).success, false);
  });

  it('discoveryInfo: the same discovery kubeconfig an issuance carries, without issuing', async () => {
    const { kube, deps } = await setup();
    const info = await discoveryInfo(deps);
    assert.equal(kube.tokens.size + kube.secrets.size, 0);
    const issued = await issueToken(deps, { flavorClassName: 'sweet' });
    assert.deepEqual(info, {
      discovery: 'file',
      apiServerEndpoint: '10.0.0.1:6443',
      caCertHash: issued.material.caCertHash,
      kubeconfig: issued.material.discoveryKubeconfig,
      kubeconfigPath: '/etc/kubernetes/nodeflavor-discovery.conf',
    });
  });
});

describe('revokeToken and listTokens', () => {
  it('deletes the Secret at once, marks the record revoked, and is safe to repeat', async () => {
    const { kube, deps } = await setup();
    const issued = await issueToken(deps, { flavorClassName: 'sweet' });
    const view = await revokeToken(deps, issued.tokenId);
    assert.equal(kube.secrets.has(issued.tokenId), false);
    assert.equal(view.revoked, true);
    assert.equal(view.state, 'Revoked');
    assert.equal((await revokeToken(deps, issued.name)).revoked, true);
  });

  it('answers 404 for an unknown token and 400 for a malformed reference', async () => {
    const { deps } = await setup();
    await assert.rejects(revokeToken(deps, 'zzzzzz'), (error: IssuerError) => error.status === 404);
    await assert.rejects(revokeToken(deps, 'Not A Name'), (error: IssuerError) => error.status === 400);
  });

  it('lists status views without secrets', async () => {
    const { deps } = await setup();
    const issued = await issueToken(deps, { flavorClassName: 'sour', maxUses: 3 });
    const [view] = await listTokens(deps);
    assert.deepEqual(view, {
      id: issued.name,
      tokenID: issued.tokenId,
      flavor: 'sour',
      expiresAt: '2030-01-02T00:00:00Z',
      maxUses: 3,
      uses: 0,
      revoked: false,
      state: 'Active',
      nodeName: null,
      nodeNamePattern: null,
      description: null,
      createdAt: '2030-01-01T00:00:00Z',
      phase: 'Issued',
      reason: null,
      message: null,
      phaseSince: '2030-01-01T00:00:00Z',
      nodes: [],
      conditions: [],
      attestation: null,
    });
  });
});
