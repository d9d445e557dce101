import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { parse } from 'yaml';
import { conditionChanged, nextCondition } from '../../src/capi/conditions.ts';
import { filledKubeadmConfig, type IssuedMaterial, issuedRegistration } from '../../src/capi/fill.ts';
import { parseIssuerAccess, trimAccessSecret } from '../../src/capi/issuer-access.ts';
import { Secret } from '../../src/flavor/secret.ts';
import { renderJoinMaterial } from '../../src/tokenissuer/issuance/join-material.ts';

const CA = '-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n';
const BOOTSTRAP = 'abc123.0123456789abcdef';
const FLAVOR_TOKEN = 'a'.repeat(52);

/** What the issuer answers, rendered by the issuer's own renderer (not a hand-made copy). */
function material(): IssuedMaterial {
  const rendered = renderJoinMaterial({
    apiServerEndpoint: '10.0.0.1:6443',
    caCertHash: `sha256:${'0'.repeat(64)}`,
    caCertPem: CA,
    token: { id: 'abc123', secret: new Secret('0123456789abcdef') },
    flavorToken: new Secret(FLAVOR_TOKEN),
    expiresAt: new Date('2030-01-01T00:00:00Z'),
  });
  return {
    tokenID: 'abc123',
    bootstrapToken: new Secret(BOOTSTRAP),
    joinConfiguration: new Secret(rendered.joinConfiguration),
    discoveryKubeconfig: rendered.discoveryKubeconfig,
    discoveryKubeconfigPath: rendered.discoveryKubeconfigPath,
  };
}

/** A KubeadmConfig as CABPK stamps it out of a template, paused. */
function stored(spec: Record<string, unknown> = {}) {
  return {
    apiVersion: 'bootstrap.cluster.x-k8s.io/v1beta2',
    kind: 'KubeadmConfig',
    metadata: {
      name: 'm-1',
      namespace: 'team-a',
      resourceVersion: '42',
      annotations: { 'cluster.x-k8s.io/paused': '', 'nodeflavor.io/flavor-class': 'sweet', keep: 'me' },
      finalizers: ['nodeflavor.io/capi-revoke-token'],
    },
    spec: {
      joinConfiguration: {
        discovery: { bootstrapToken: { apiServerEndpoint: '10.0.0.1:6443' } },
        nodeRegistration: {
          kubeletExtraArgs: [
            { name: 'v', value: '2' },
            { name: 'node-labels', value: 'example.com/pool=a,nodeflavor.io/token=forged' },
          ],
          taints: [{ key: 'example.com/gpu', effect: 'NoSchedule' }],
        },
      },
      files: [
        { path: '/etc/motd', content: 'hi' },
        { path: '/etc/kubernetes/nodeflavor-discovery.conf', content: 'stale' },
      ],
      ...spec,
    },
    status: { conditions: [] },
  };
}

type Filled = ReturnType<typeof stored> & {
  spec: {
    joinConfiguration: {
      discovery: Record<string, unknown>;
      nodeRegistration: {
        name?: string;
        kubeletExtraArgs: { name: string; value: string }[];
        taints: { key: string; effect: string }[];
      };
    };
    files: { path: string; content: string; permissions?: string }[];
  };
};

describe('filledKubeadmConfig: one write that puts the token in place', () => {
  const filled = () => filledKubeadmConfig(stored(), material(), undefined) as unknown as Filled;

  test('file discovery and the TLS bootstrap token, no bootstrapToken discovery left for CABPK to refresh', () => {
    assert.deepEqual(filled().spec.joinConfiguration.discovery, {
      file: { kubeConfigPath: '/etc/kubernetes/nodeflavor-discovery.conf' },
      tlsBootstrapToken: BOOTSTRAP,
    });
  });

  test("the issuer's node labels merged into the one node-labels argument; a forged token label replaced", () => {
    const args = filled().spec.joinConfiguration.nodeRegistration.kubeletExtraArgs;
    assert.deepEqual(
      args.map((a) => a.name),
      ['v', 'node-labels'],
      'one node-labels argument (CABPK requires unique names)',
    );
    assert.equal(
      args[1]?.value,
      `example.com/pool=a,nodeflavor.io/token=${FLAVOR_TOKEN},nodeflavor.io/joined=true`,
    );
  });

  test('the quarantine taint beside the template’s own', () => {
    assert.deepEqual(filled().spec.joinConfiguration.nodeRegistration.taints, [
      { key: 'example.com/gpu', effect: 'NoSchedule' },
      { key: 'nodeflavor.io/unverified', effect: 'NoSchedule' },
    ]);
  });

  test('the discovery kubeconfig as a file at its path (replacing one there), other files kept', () => {
    const files = filled().spec.files;
    assert.deepEqual(
      files.map((f) => f.path),
      ['/etc/motd', '/etc/kubernetes/nodeflavor-discovery.conf'],
    );
    const discovery = files[1];
    assert.equal(discovery?.permissions, '0644');
    assert.equal(discovery?.content, material().discoveryKubeconfig);
    assert.doesNotMatch(
      discovery?.content ?? '',
      /abc123|0123456789abcdef/,
      'no secret in the discovery file',
    );
  });

  test('the pause lifted and the token ID recorded; everything else, resourceVersion included, kept', () => {
    const out = filled();
    assert.deepEqual(out.metadata.annotations, {
      'nodeflavor.io/flavor-class': 'sweet',
      keep: 'me',
      'nodeflavor.io/token-id': 'abc123',
    });
    assert.equal(out.metadata.resourceVersion, '42', 'the precondition of the write');
    assert.deepEqual(out.metadata.finalizers, ['nodeflavor.io/capi-revoke-token']);
    assert.deepEqual(out.status, { conditions: [] });
  });

  test('a pinned Machine name becomes the node name; none keeps the host name', () => {
    const pinned = filledKubeadmConfig(stored(), material(), 'm-1') as unknown as Filled;
    assert.equal(pinned.spec.joinConfiguration.nodeRegistration.name, 'm-1');
    assert.equal(filled().spec.joinConfiguration.nodeRegistration.name, undefined);
  });

  test('the input object is not changed', () => {
    const input = stored();
    const before = JSON.stringify(input);
    filledKubeadmConfig(input, material(), 'm-1');
    assert.equal(JSON.stringify(input), before);
  });

  test('an empty template gets all it needs', () => {
    const bare = {
      metadata: { name: 'm', namespace: 'n', annotations: { 'cluster.x-k8s.io/paused': '' } },
      spec: {},
    };
    const out = filledKubeadmConfig(bare, material(), undefined) as unknown as Filled;
    assert.equal(out.spec.joinConfiguration.nodeRegistration.kubeletExtraArgs.length, 1);
    assert.equal(out.spec.files.length, 1);
  });

  test('a JoinConfiguration without labels is refused without quoting it', () => {
    assert.throws(
      () =>
        issuedRegistration(
          new Secret('kind: JoinConfiguration\ndiscovery: {tlsBootstrapToken: abc123.0123456789abcdef}\n'),
        ),
      (error: Error) => /without node labels/.test(error.message) && !error.message.includes('abc123'),
    );
    assert.throws(() => issuedRegistration(new Secret(': : [')), /not YAML/);
  });

  test('the filled join configuration is what kubeadm would read: labels and taint as the issuer rendered them', () => {
    const issued = parse(material().joinConfiguration.reveal()) as {
      nodeRegistration: { taints: unknown[] };
    };
    assert.deepEqual(
      filled().spec.joinConfiguration.nodeRegistration.taints.at(-1),
      issued.nodeRegistration.taints[0],
    );
  });
});

describe('parseIssuerAccess: the issuer access Secret', () => {
  const b64 = (s: string) => Buffer.from(s).toString('base64');
  const where = { namespace: 'nodeflavor-capi', name: 'team-a.work' };
  const secret = (data: Record<string, string>) => ({
    metadata: { name: 'team-a.work' },
    data: Object.fromEntries(Object.entries(data).map(([k, v]) => [k, b64(v)])),
  });

  test('url, ca.crt and token: the access (bearer kept secret)', () => {
    const parsed = parseIssuerAccess(
      secret({ url: 'https://issuer.example.com:8443/', 'ca.crt': CA, token: 'bearer\n' }),
      where,
    );
    assert.equal(parsed.ok, true);
    if (!parsed.ok) return;
    assert.equal(parsed.access.url, 'https://issuer.example.com:8443');
    assert.equal(parsed.access.caPem, CA.trim());
    assert.equal(parsed.access.token.reveal(), 'bearer');
    assert.equal(
      JSON.stringify(parsed),
      JSON.stringify(parsed).replace('bearer', ''),
      'the bearer never serialises',
    );
  });

  test('a path prefix (behind an Ingress) is kept', () => {
    const parsed = parseIssuerAccess(
      secret({ url: 'https://gw.example.com/nodeflavor/', token: 't' }),
      where,
    );
    assert.equal(parsed.ok && parsed.access.url, 'https://gw.example.com/nodeflavor');
  });

  const refused: Record<string, { secret: ReturnType<typeof secret> | undefined; message: RegExp }> = {
    'no Secret': { secret: undefined, message: /no Secret nodeflavor-capi\/team-a\.work says how/ },
    'no url': { secret: secret({ token: 't' }), message: /has no url/ },
    'plain http': { secret: secret({ url: 'http://issuer', token: 't' }), message: /must be https/ },
    'credentials in the url': {
      secret: secret({ url: 'https://u:p@issuer', token: 't' }),
      message: /without credentials/,
    },
    'no token': { secret: secret({ url: 'https://issuer' }), message: /has no token/ },
    'a CA that is not PEM': {
      secret: secret({ url: 'https://issuer', token: 't', 'ca.crt': 'x' }),
      message: /not PEM/,
    },
  };
  for (const [name, { secret: s, message }] of Object.entries(refused))
    test(`refused: ${name}`, () => {
      const parsed = parseIssuerAccess(s, where);
      assert.equal(parsed.ok, false);
      if (!parsed.ok) assert.match(parsed.message, message);
    });

  test('the cache keeps only the three keys of a Secret', () => {
    const trimmed = trimAccessSecret({
      metadata: { name: 'x', namespace: 'nodeflavor-capi', resourceVersion: '1', managedFields: [{}] },
      data: { url: 'dQ==', token: 'dA==', other: 'c2VjcmV0' },
    });
    assert.deepEqual(trimmed, {
      metadata: { name: 'x', namespace: 'nodeflavor-capi', resourceVersion: '1' },
      data: { url: 'dQ==', token: 'dA==' },
    });
  });
});

describe('nextCondition / conditionChanged', () => {
  const t0 = new Date('2030-01-01T00:00:00Z');
  const t1 = new Date('2030-01-01T01:00:00Z');
  const desired = {
    type: 'NodeFlavorVerified',
    status: 'False' as const,
    reason: 'WaitingForNode',
    message: 'm',
  };

  test('keeps lastTransitionTime while the status stays, moves it when the status changes', () => {
    const first = nextCondition(undefined, desired, t0, 1);
    assert.equal(first.lastTransitionTime, '2030-01-01T00:00:00Z');
    const same = nextCondition(first, { ...desired, reason: 'Verifying' }, t1, 1);
    assert.equal(same.lastTransitionTime, first.lastTransitionTime);
    const flipped = nextCondition(first, { ...desired, status: 'True', reason: 'Verified' }, t1, 1);
    assert.equal(flipped.lastTransitionTime, '2030-01-01T01:00:00Z');
  });

  test('written only when something but the time changed', () => {
    const first = nextCondition(undefined, desired, t0, 1);
    assert.equal(conditionChanged(first, nextCondition(first, desired, t1, 1)), false);
    assert.equal(conditionChanged(first, nextCondition(first, { ...desired, message: 'n' }, t1, 1)), true);
    assert.equal(conditionChanged(first, nextCondition(first, desired, t1, 2)), true);
    assert.equal(conditionChanged(undefined, first), true);
  });
});
