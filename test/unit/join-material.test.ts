import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { parse } from 'yaml';
import { generateBootstrapToken, parseBootstrapToken } from '../../src/flavor/bootstrap-token.ts';
import { Secret } from '../../src/flavor/secret.ts';
import type { JoinMaterialInput } from '../../src/tokenissuer/join-material.ts';
import { renderJoinMaterial } from '../../src/tokenissuer/join-material.ts';
import { seededRandomBytes } from './support/random.ts';

const CA_CERT_HASH = `sha256:${'0f'.repeat(32)}`;
const FLAVOR_TOKEN = 'oxmcc5gbgduo3u7umkvuqjcd6le7qqsfspzaixipbvqavipzmhua';

function input(overrides: Partial<JoinMaterialInput> = {}): JoinMaterialInput {
  return {
    apiServerEndpoint: '10.0.0.1:6443',
    caCertHash: CA_CERT_HASH,
    token: parseBootstrapToken('abcdef.0123456789abcdef'),
    flavorToken: new Secret(FLAVOR_TOKEN),
    expiresAt: new Date('2030-01-02T03:04:05.678Z'),
    ...overrides,
  };
}

const expectedDiscovery = {
  bootstrapToken: {
    token: 'abcdef.0123456789abcdef',
    apiServerEndpoint: '10.0.0.1:6443',
    caCertHashes: [CA_CERT_HASH],
  },
  tlsBootstrapToken: 'abcdef.0123456789abcdef',
};

describe('renderJoinMaterial', () => {
  it('renders a kubeadm v1beta4 JoinConfiguration by default', () => {
    const material = renderJoinMaterial(input());
    assert.deepEqual(parse(material.joinConfiguration), {
      apiVersion: 'kubeadm.k8s.io/v1beta4',
      kind: 'JoinConfiguration',
      discovery: expectedDiscovery,
      nodeRegistration: {
        kubeletExtraArgs: [{ name: 'node-labels', value: `nodeflavor.io/token=${FLAVOR_TOKEN}` }],
        taints: [{ key: 'nodeflavor.io/unverified', effect: 'NoSchedule' }],
      },
    });
  });

  it('leaves the node name to the node', () => {
    const config = parse(renderJoinMaterial(input()).joinConfiguration);
    assert.equal('name' in config.nodeRegistration, false);
  });

  it('honours a custom label key and quarantine taint, or none', () => {
    const custom = renderJoinMaterial(
      input({
        tokenLabelKey: 'example.com/t',
        quarantineTaint: { key: 'example.com/q', effect: 'NoSchedule' },
      }),
    );
    const config = parse(custom.joinConfiguration);
    assert.deepEqual(config.nodeRegistration.kubeletExtraArgs, [
      { name: 'node-labels', value: `example.com/t=${FLAVOR_TOKEN}` },
    ]);
    assert.deepEqual(config.nodeRegistration.taints, [{ key: 'example.com/q', effect: 'NoSchedule' }]);
    const untainted = parse(renderJoinMaterial(input({ quarantineTaint: null })).joinConfiguration);
    assert.deepEqual(untainted.nodeRegistration.taints, []);
  });

  it('renders the join command and a cloud-init that writes the same configuration', () => {
    const material = renderJoinMaterial(input());
    assert.equal(material.joinCommand, 'kubeadm join --config join.yaml');
    assert.ok(material.cloudInit.startsWith('#cloud-config\n'));
    assert.deepEqual(parse(material.cloudInit), {
      write_files: [
        {
          path: '/etc/kubernetes/nodeflavor-join.yaml',
          permissions: '0600',
          owner: 'root:root',
          content: material.joinConfiguration,
        },
      ],
      runcmd: [['kubeadm', 'join', '--config', '/etc/kubernetes/nodeflavor-join.yaml']],
    });
  });

  it('reports the public facts, with the expiry in RFC 3339 UTC whole seconds', () => {
    const material = renderJoinMaterial(input());
    assert.equal(material.apiServerEndpoint, '10.0.0.1:6443');
    assert.equal(material.caCertHash, CA_CERT_HASH);
    assert.equal(material.tokenId, 'abcdef');
    assert.equal(material.expiresAt, '2030-01-02T03:04:05Z');
    const offset = renderJoinMaterial(input({ expiresAt: new Date('2030-01-02T05:04:05.999+02:00') }));
    assert.equal(offset.expiresAt, '2030-01-02T03:04:05Z');
  });

  it('accepts hostnames and bracketed IPv6 endpoints', () => {
    for (const endpoint of ['api.example.com:443', '[fd00::1]:6443', 'localhost:6443']) {
      assert.equal(renderJoinMaterial(input({ apiServerEndpoint: endpoint })).apiServerEndpoint, endpoint);
    }
  });

  it('is deterministic', () => {
    assert.deepEqual(renderJoinMaterial(input()), renderJoinMaterial(input()));
  });

  it('has the same length for a token that looks like a number as for any other', () => {
    // Plain YAML would quote `123456.7890123456789012` (it reads as a float) but not `abcdef.…`.
    const letters = renderJoinMaterial(input());
    for (const token of ['123456.7890123456789012', '123456.78901234567890e1']) {
      const material = renderJoinMaterial(input({ token: parseBootstrapToken(token) }));
      assert.equal(material.joinConfiguration.length, letters.joinConfiguration.length);
      assert.equal(material.cloudInit.length, letters.cloudInit.length);
      const discovery = parse(material.joinConfiguration).discovery;
      assert.equal(discovery.bootstrapToken.token, token);
      assert.equal(discovery.tlsBootstrapToken, token);
    }
  });

  it('has a length independent of the tokens (property)', () => {
    const reference = renderJoinMaterial(input());
    fc.assert(
      fc.property(fc.string(), fc.stringMatching(/^[a-z2-7]{52}$/), (seed, flavorToken) => {
        const material = renderJoinMaterial(
          input({
            token: generateBootstrapToken(seededRandomBytes(seed)),
            flavorToken: new Secret(flavorToken),
          }),
        );
        assert.equal(material.joinConfiguration.length, reference.joinConfiguration.length);
        assert.equal(material.cloudInit.length, reference.cloudInit.length);
        assert.equal(parse(material.joinConfiguration).nodeRegistration.kubeletExtraArgs[0].value.length, 72);
      }),
      { numRuns: 200 },
    );
  });

  const invalid: Record<string, { overrides: Partial<JoinMaterialInput>; error: RegExp }> = {
    'an endpoint without a port': {
      overrides: { apiServerEndpoint: '10.0.0.1' },
      error: /apiServerEndpoint/,
    },
    'an endpoint with a URL scheme': {
      overrides: { apiServerEndpoint: 'https://10.0.0.1:6443' },
      error: /apiServerEndpoint/,
    },
    'an endpoint with port 0': { overrides: { apiServerEndpoint: 'a:0' }, error: /apiServerEndpoint/ },
    'an endpoint with port 65536': {
      overrides: { apiServerEndpoint: 'a:65536' },
      error: /apiServerEndpoint/,
    },
    'unbracketed IPv6': { overrides: { apiServerEndpoint: 'fd00::1:6443' }, error: /apiServerEndpoint/ },
    'a CA hash without sha256:': { overrides: { caCertHash: '0f'.repeat(32) }, error: /caCertHash/ },
    'a short CA hash': { overrides: { caCertHash: 'sha256:abcd' }, error: /caCertHash/ },
    'an invalid date': { overrides: { expiresAt: new Date('nope') }, error: /expiresAt/ },
    'a bad label key': { overrides: { tokenLabelKey: 'bad key' }, error: /tokenLabelKey/ },
    'a bad taint key': {
      overrides: { quarantineTaint: { key: '-bad', effect: 'NoSchedule' } },
      error: /taint key/,
    },
  };
  for (const [name, { overrides, error }] of Object.entries(invalid)) {
    it(`rejects ${name}`, () => assert.throws(() => renderJoinMaterial(input(overrides)), error));
  }

  it('rejects malformed tokens without echoing them', () => {
    const cases: Partial<JoinMaterialInput>[] = [
      { token: { id: 'abcdef', secret: new Secret('SECRETSECRETSECR') } },
      { token: { id: 'ABCDEF', secret: new Secret('0123456789abcdef') } },
      { flavorToken: new Secret('not-a-flavor-token-but-a-secret-anyway') },
      { flavorToken: new Secret(FLAVOR_TOKEN.toUpperCase()) },
    ];
    for (const overrides of cases) {
      assert.throws(
        () => renderJoinMaterial(input(overrides)),
        (error: unknown) => {
          assert.ok(error instanceof Error);
          assert.match(error.message, /malformed/);
          for (const leaked of ['SECRET', 'ABCDEF', 'secret-anyway', FLAVOR_TOKEN.toUpperCase()]) {
            assert.ok(!error.message.includes(leaked), error.message);
          }
          return true;
        },
      );
    }
  });
});
