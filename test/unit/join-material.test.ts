import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { parse } from 'yaml';
import { generateBootstrapToken, parseBootstrapToken } from '../../src/flavor/bootstrap-token.ts';
import { Secret } from '../../src/flavor/secret.ts';
import type { JoinMaterialInput } from '../../src/tokenissuer/issuance/join-material.ts';
import {
  type DocumentShape,
  renderDocumentsDirectly,
  renderJoinMaterial,
} from '../../src/tokenissuer/issuance/join-material.ts';
import { seededRandomBytes } from './support/random.ts';

const CA_CERT_HASH = `sha256:${'0f'.repeat(32)}`;
const CA_PEM = '-----BEGIN CERTIFICATE-----\nMIIBtestCA\n-----END CERTIFICATE-----\n';
const FLAVOR_TOKEN = 'oxmcc5gbgduo3u7umkvuqjcd6le7qqsfspzaixipbvqavipzmhua';

function input(overrides: Partial<JoinMaterialInput> = {}): JoinMaterialInput {
  return {
    apiServerEndpoint: '10.0.0.1:6443',
    caCertHash: CA_CERT_HASH,
    caCertPem: CA_PEM,
    token: parseBootstrapToken('abcdef.0123456789abcdef'),
    flavorToken: new Secret(FLAVOR_TOKEN),
    expiresAt: new Date('2030-01-02T03:04:05.678Z'),
    ...overrides,
  };
}

const fileDiscovery = {
  file: { kubeConfigPath: '/etc/kubernetes/nodeflavor-discovery.conf' },
  tlsBootstrapToken: 'abcdef.0123456789abcdef',
};

const tokenDiscovery = {
  bootstrapToken: {
    token: 'abcdef.0123456789abcdef',
    apiServerEndpoint: '10.0.0.1:6443',
    caCertHashes: [CA_CERT_HASH],
  },
  tlsBootstrapToken: 'abcdef.0123456789abcdef',
};

const expectedDiscoveryKubeconfig = {
  apiVersion: 'v1',
  kind: 'Config',
  clusters: [
    {
      name: '',
      cluster: {
        'certificate-authority-data': Buffer.from(CA_PEM).toString('base64'),
        server: 'https://10.0.0.1:6443',
      },
    },
  ],
};

describe('renderJoinMaterial', () => {
  it('renders a kubeadm v1beta4 JoinConfiguration with file discovery by default', () => {
    const material = renderJoinMaterial(input());
    assert.equal(material.discovery, 'file');
    assert.deepEqual(parse(material.joinConfiguration), {
      apiVersion: 'kubeadm.k8s.io/v1beta4',
      kind: 'JoinConfiguration',
      discovery: fileDiscovery,
      nodeRegistration: {
        kubeletExtraArgs: [
          { name: 'node-labels', value: `nodeflavor.io/token=${FLAVOR_TOKEN},nodeflavor.io/joined=true` },
        ],
        taints: [{ key: 'nodeflavor.io/unverified', effect: 'NoSchedule' }],
      },
    });
  });

  it('renders the discovery kubeconfig: the cluster CA and the API server, no credential', () => {
    const material = renderJoinMaterial(input());
    assert.equal(material.discoveryKubeconfigPath, '/etc/kubernetes/nodeflavor-discovery.conf');
    assert.deepEqual(parse(material.discoveryKubeconfig), expectedDiscoveryKubeconfig);
    assert.ok(!material.discoveryKubeconfig.includes('0123456789abcdef'), 'no token in the discovery file');
    assert.ok(!material.discoveryKubeconfig.includes(FLAVOR_TOKEN), 'no flavor token in the discovery file');
    const ipv6 = renderJoinMaterial(input({ apiServerEndpoint: '[fd00::1]:6443' }));
    assert.equal(parse(ipv6.discoveryKubeconfig).clusters[0].cluster.server, 'https://[fd00::1]:6443');
  });

  it('the discovery kubeconfig is the same for every token (installable once per machine)', () => {
    const a = renderJoinMaterial(input());
    const b = renderJoinMaterial(
      input({
        token: parseBootstrapToken('zyxwvu.9876543210zyxwvu'),
        flavorToken: new Secret('a'.repeat(52)),
      }),
    );
    assert.equal(a.discoveryKubeconfig, b.discoveryKubeconfig);
  });

  it('follows a new CA or endpoint (the last discovery kubeconfig is reused only for the same ones)', () => {
    const rotated = '-----BEGIN CERTIFICATE-----\nMIIBrotatedCA\n-----END CERTIFICATE-----\n';
    const caOf = (material: { discoveryKubeconfig: string }) =>
      Buffer.from(
        parse(material.discoveryKubeconfig).clusters[0].cluster['certificate-authority-data'],
        'base64',
      ).toString();
    assert.equal(caOf(renderJoinMaterial(input())), CA_PEM);
    assert.equal(caOf(renderJoinMaterial(input({ caCertPem: rotated }))), rotated);
    assert.equal(caOf(renderJoinMaterial(input())), CA_PEM);
    const moved = renderJoinMaterial(input({ apiServerEndpoint: 'api.example:443' }));
    assert.equal(parse(moved.discoveryKubeconfig).clusters[0].cluster.server, 'https://api.example:443');
    assert.throws(() => renderJoinMaterial(input({ caCertPem: 'not a cert' })), /PEM/);
    assert.equal(caOf(renderJoinMaterial(input())), CA_PEM);
  });

  it('renders token discovery (CA hash pin) when asked', () => {
    const material = renderJoinMaterial(input({ discovery: 'token' }));
    assert.equal(material.discovery, 'token');
    assert.deepEqual(parse(material.joinConfiguration).discovery, tokenDiscovery);
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

  it('points at a custom discovery kubeconfig path', () => {
    const material = renderJoinMaterial(input({ discoveryKubeconfigPath: '/opt/join/discovery.conf' }));
    assert.equal(parse(material.joinConfiguration).discovery.file.kubeConfigPath, '/opt/join/discovery.conf');
    assert.equal(parse(material.cloudInit).write_files[0].path, '/opt/join/discovery.conf');
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
      { name: 'node-labels', value: `example.com/t=${FLAVOR_TOKEN},nodeflavor.io/joined=true` },
    ]);
    assert.deepEqual(config.nodeRegistration.taints, [{ key: 'example.com/q', effect: 'NoSchedule' }]);
    const untainted = parse(renderJoinMaterial(input({ quarantineTaint: null })).joinConfiguration);
    assert.deepEqual(untainted.nodeRegistration.taints, []);
  });

  it('renders the join command and a cloud-init that writes both files, then joins', () => {
    const material = renderJoinMaterial(input());
    assert.equal(material.joinCommand, 'kubeadm join --config join.yaml');
    assert.ok(material.cloudInit.startsWith('#cloud-config\n'));
    assert.deepEqual(parse(material.cloudInit), {
      write_files: [
        {
          path: '/etc/kubernetes/nodeflavor-discovery.conf',
          permissions: '0644',
          owner: 'root:root',
          content: material.discoveryKubeconfig,
        },
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
    const lettersByToken = renderJoinMaterial(input({ discovery: 'token' }));
    for (const token of ['123456.7890123456789012', '123456.78901234567890e1']) {
      const material = renderJoinMaterial(input({ token: parseBootstrapToken(token) }));
      assert.equal(material.joinConfiguration.length, letters.joinConfiguration.length);
      assert.equal(material.cloudInit.length, letters.cloudInit.length);
      assert.equal(parse(material.joinConfiguration).discovery.tlsBootstrapToken, token);
      const byToken = renderJoinMaterial(input({ token: parseBootstrapToken(token), discovery: 'token' }));
      assert.equal(byToken.joinConfiguration.length, lettersByToken.joinConfiguration.length);
      assert.equal(byToken.cloudInit.length, lettersByToken.cloudInit.length);
      assert.equal(parse(byToken.joinConfiguration).discovery.bootstrapToken.token, token);
    }
  });

  const shapeOf = (material: ReturnType<typeof renderJoinMaterial>, over: Partial<JoinMaterialInput>) =>
    ({
      apiServerEndpoint: material.apiServerEndpoint,
      caCertHash: material.caCertHash,
      discovery: material.discovery,
      discoveryKubeconfigPath: material.discoveryKubeconfigPath,
      discoveryKubeconfig: material.discoveryKubeconfig,
      tokenLabelKey: 'nodeflavor.io/token',
      quarantineTaint:
        over.quarantineTaint === undefined
          ? { key: 'nodeflavor.io/unverified', effect: 'NoSchedule' }
          : over.quarantineTaint,
    }) satisfies DocumentShape;

  for (const over of [
    {},
    { discovery: 'token' as const },
    { quarantineTaint: null },
    { discoveryKubeconfigPath: '/opt/join/discovery.conf' },
  ] satisfies Partial<JoinMaterialInput>[]) {
    it(`fills the cached templates exactly as the YAML library renders each token, ${JSON.stringify(over)} (property)`, () => {
      fc.assert(
        fc.property(fc.string(), fc.stringMatching(/^[a-z2-7]{52}$/), (seed, flavorToken) => {
          const token = generateBootstrapToken(seededRandomBytes(seed));
          const material = renderJoinMaterial(
            input({ ...over, token, flavorToken: new Secret(flavorToken) }),
          );
          const direct = renderDocumentsDirectly(
            shapeOf(material, over),
            `${token.id}.${token.secret.reveal()}`,
            flavorToken,
          );
          assert.equal(material.joinConfiguration, direct.joinConfiguration);
          assert.equal(material.cloudInit, direct.cloudInit);
        }),
        { numRuns: 50 },
      );
    });
  }

  it('renders directly when the cluster data holds a placeholder (the template would cut it wrongly)', () => {
    const over = { apiServerEndpoint: 'qqqqqq.qqqqqqqqqqqqqqqq:6443', discovery: 'token' as const };
    for (const secret of ['0123456789abcdef', 'fedcba9876543210']) {
      const token = parseBootstrapToken(`abcdef.${secret}`);
      const material = renderJoinMaterial(input({ ...over, token }));
      const direct = renderDocumentsDirectly(shapeOf(material, over), `abcdef.${secret}`, FLAVOR_TOKEN);
      assert.equal(material.joinConfiguration, direct.joinConfiguration);
      assert.equal(material.cloudInit, direct.cloudInit);
      assert.equal(
        parse(material.joinConfiguration).discovery.bootstrapToken.apiServerEndpoint,
        over.apiServerEndpoint,
      );
    }
  });

  for (const discovery of ['file', 'token'] as const) {
    it(`has a length independent of the tokens, ${discovery} discovery (property)`, () => {
      const reference = renderJoinMaterial(input({ discovery }));
      fc.assert(
        fc.property(fc.string(), fc.stringMatching(/^[a-z2-7]{52}$/), (seed, flavorToken) => {
          const material = renderJoinMaterial(
            input({
              discovery,
              token: generateBootstrapToken(seededRandomBytes(seed)),
              flavorToken: new Secret(flavorToken),
            }),
          );
          assert.equal(material.joinConfiguration.length, reference.joinConfiguration.length);
          assert.equal(material.cloudInit.length, reference.cloudInit.length);
          assert.equal(material.discoveryKubeconfig, reference.discoveryKubeconfig);
          assert.equal(
            parse(material.joinConfiguration).nodeRegistration.kubeletExtraArgs[0].value.length,
            72 + ',nodeflavor.io/joined=true'.length,
          );
        }),
        { numRuns: 200 },
      );
    });
  }

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
    'a CA that is not a PEM certificate': { overrides: { caCertPem: 'not a cert' }, error: /PEM/ },
    'a relative discovery path': {
      overrides: { discoveryKubeconfigPath: 'discovery.conf' },
      error: /discoveryKubeconfigPath/,
    },
    'an https discovery URL (kubeadm would drop the CA pinning)': {
      overrides: { discoveryKubeconfigPath: 'https://example.com/discovery.conf' },
      error: /discoveryKubeconfigPath/,
    },
    'a discovery path with ..': {
      overrides: { discoveryKubeconfigPath: '/etc/kubernetes/../shadow' },
      error: /discoveryKubeconfigPath/,
    },
    'the JoinConfiguration’s own path as the discovery path': {
      overrides: { discoveryKubeconfigPath: '/etc/kubernetes/nodeflavor-join.yaml' },
      error: /discoveryKubeconfigPath/,
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
