import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import {
  type ConfigDecision,
  type ConfigFacts,
  decideConfig,
  idempotencyKey,
  MAX_ISSUANCE_ATTEMPTS,
  tokenDescription,
} from '../../src/capi/decide.ts';
import type { CachedCluster, CachedKubeadmConfig, CachedMachine } from '../../src/capi/resources.ts';

const MACHINE_UID = 'machine-uid';

function config(over: {
  annotations?: Record<string, string | undefined>;
  labels?: Record<string, string>;
  finalizers?: string[];
  owner?: { kind: string; uid?: string } | null;
  deleting?: boolean;
  rendered?: boolean;
}): CachedKubeadmConfig {
  const annotations: Record<string, string> = {};
  for (const [k, v] of Object.entries({
    'nodeflavor.io/flavor-class': 'sweet',
    'cluster.x-k8s.io/paused': '',
    ...over.annotations,
  }))
    if (v !== undefined) annotations[k] = v;
  const owner = over.owner === undefined ? { kind: 'Machine' } : over.owner;
  return {
    metadata: {
      name: 'md-abc-x1',
      namespace: 'team-a',
      uid: 'config-uid',
      labels: { 'cluster.x-k8s.io/cluster-name': 'work', ...over.labels },
      annotations,
      finalizers: over.finalizers ?? ['nodeflavor.io/capi-revoke-token'],
      ...(owner
        ? {
            ownerReferences: [
              {
                apiVersion: 'cluster.x-k8s.io/v1beta2',
                kind: owner.kind,
                name: 'md-abc-x1',
                uid: owner.uid ?? MACHINE_UID,
                controller: true,
              },
            ],
          }
        : {}),
      ...(over.deleting ? { deletionTimestamp: '2030-01-01T00:00:00Z' } : {}),
    },
    ...(over.rendered
      ? { status: { dataSecretName: 'md-abc-x1', initialization: { dataSecretCreated: true } } }
      : {}),
  };
}

const machine: CachedMachine = {
  metadata: { name: 'md-abc-x1', namespace: 'team-a', uid: MACHINE_UID },
  spec: { clusterName: 'work' },
};
const cluster = (over: { initialized?: boolean; deleting?: boolean } = {}): CachedCluster => ({
  metadata: {
    name: 'work',
    namespace: 'team-a',
    uid: 'cluster-uid',
    ...(over.deleting ? { deletionTimestamp: '2030-01-01T00:00:00Z' } : {}),
  },
  status: { initialization: { controlPlaneInitialized: over.initialized ?? true } },
});

const facts = (over: Partial<ConfigFacts> = {}): ConfigFacts => ({
  config: config({}),
  machine,
  cluster: cluster(),
  issuerAccess: { ok: true },
  ...over,
});

const decide = (over: Partial<ConfigFacts> = {}) => decideConfig(facts(over), { tokenTtl: '24h' });

/** The decision in a word: its kind, and the reason for a wait. */
const summary = (d: ConfigDecision) =>
  d.kind === 'wait' ? `wait ${d.reason}` : d.kind === 'release' ? `release revoke=${d.revoke}` : d.kind;

describe('decideConfig: what nodeflavor capi does with one KubeadmConfig', () => {
  const cases: Record<string, { facts: Partial<ConfigFacts>; want: string }> = {
    'paused, flavored, its Machine and Cluster ready, access configured: issue': { facts: {}, want: 'issue' },
    'no flavor annotation: not ours': {
      facts: { config: config({ annotations: { 'nodeflavor.io/flavor-class': undefined }, finalizers: [] }) },
      want: 'ignore',
    },
    'a control-plane config, flavored or not, is never touched': {
      facts: { config: config({ labels: { 'cluster.x-k8s.io/control-plane': '' } }) },
      want: 'ignore',
    },
    'owned by a KubeadmControlPlane: never touched': {
      facts: { config: config({ owner: { kind: 'KubeadmControlPlane' } }) },
      want: 'ignore',
    },
    'owned by a MachinePool: refused': {
      facts: { config: config({ owner: { kind: 'MachinePool' } }) },
      want: 'wait MachinePoolUnsupported',
    },
    'a MachinePool label: refused': {
      facts: { config: config({ labels: { 'cluster.x-k8s.io/pool-name': 'p' } }) },
      want: 'wait MachinePoolUnsupported',
    },
    'filled already: issued': {
      facts: {
        config: config({
          annotations: { 'nodeflavor.io/token-id': 'abc123', 'cluster.x-k8s.io/paused': undefined },
        }),
      },
      want: 'issued',
    },
    'rendered by CABPK before any fill: reported, never filled': {
      facts: { config: config({ rendered: true }) },
      want: 'wait RenderedBeforeFill',
    },
    'not paused: CABPK may render it any moment, so it is not filled': {
      facts: { config: config({ annotations: { 'cluster.x-k8s.io/paused': undefined } }) },
      want: 'wait NotPaused',
    },
    'a flavor that is no DNS subdomain': {
      facts: { config: config({ annotations: { 'nodeflavor.io/flavor-class': 'Sweet!' } }) },
      want: 'wait InvalidAnnotation',
    },
    'a node-name annotation other than machine': {
      facts: { config: config({ annotations: { 'nodeflavor.io/node-name': 'hostname' } }) },
      want: 'wait InvalidAnnotation',
    },
    'owned by its MachineSet still (no Machine yet)': {
      facts: { config: config({ owner: { kind: 'MachineSet' } }) },
      want: 'wait WaitingForMachine',
    },
    'its Machine is not in the cache yet': { facts: { machine: undefined }, want: 'wait WaitingForMachine' },
    'a Machine of the same name but another UID is not its owner': {
      facts: { config: config({ owner: { kind: 'Machine', uid: 'an-older-machine' } }) },
      want: 'wait WaitingForMachine',
    },
    'the control plane is not up (the issuer lives there)': {
      facts: { cluster: cluster({ initialized: false }) },
      want: 'wait WaitingForControlPlane',
    },
    'the Cluster is unknown': { facts: { cluster: undefined }, want: 'wait WaitingForControlPlane' },
    'no issuer access Secret': {
      facts: { issuerAccess: { ok: false, message: 'no Secret' } },
      want: 'wait IssuerNotConfigured',
    },
    'too many fresh starts': {
      facts: {
        config: config({
          annotations: { 'nodeflavor.io/issuance-attempt': String(MAX_ISSUANCE_ATTEMPTS + 1) },
        }),
      },
      want: 'wait IssuerRefused',
    },
    'the finalizer goes on before any token is asked for': {
      facts: { config: config({ finalizers: [] }) },
      want: 'addFinalizer',
    },
    'deleted with the finalizer: revoke, then release': {
      facts: { config: config({ deleting: true, annotations: { 'nodeflavor.io/token-id': 'abc123' } }) },
      want: 'release revoke=true',
    },
    'deleted before any fill: still revoke (a token may exist whose answer was lost)': {
      facts: { config: config({ deleting: true }) },
      want: 'release revoke=true',
    },
    'deleted with its whole Cluster: release without waiting for an issuer that is going away': {
      facts: { config: config({ deleting: true }), cluster: cluster({ deleting: true }) },
      want: 'release revoke=false',
    },
    'deleted without our finalizer: not ours': {
      facts: { config: config({ deleting: true, finalizers: [] }) },
      want: 'ignore',
    },
    'deleted MachinePool config with the finalizer is still released': {
      facts: { config: config({ deleting: true, owner: { kind: 'MachinePool' } }) },
      want: 'release revoke=true',
    },
    'annotation removed before a fill: the finalizer goes (with any lost token)': {
      facts: { config: config({ annotations: { 'nodeflavor.io/flavor-class': undefined } }) },
      want: 'release revoke=true',
    },
    'annotation removed after the fill: its token stays, revoked when it is deleted': {
      facts: {
        config: config({
          annotations: { 'nodeflavor.io/flavor-class': undefined, 'nodeflavor.io/token-id': 'abc123' },
        }),
      },
      want: 'issued',
    },
  };
  for (const [name, { facts: over, want }] of Object.entries(cases))
    test(name, () => assert.equal(summary(decide(over)), want));

  test('the request is the same on every retry: flavor, ttl, one use, the description naming the config', () => {
    const decision = decide();
    assert.equal(decision.kind, 'issue');
    if (decision.kind !== 'issue') return;
    assert.deepEqual(decision.body, {
      flavorClassName: 'sweet',
      ttl: '24h',
      maxUses: 1,
      description: 'Cluster API KubeadmConfig team-a/md-abc-x1 (uid config-uid)',
    });
    assert.equal(decision.idempotencyKey, 'capi/config-uid');
    assert.equal(decision.nodeName, undefined);
    assert.deepEqual(decide(), decision, 'deterministic');
  });

  test('node-name machine pins the token and the node to the Machine name', () => {
    const decision = decide({ config: config({ annotations: { 'nodeflavor.io/node-name': 'machine' } }) });
    assert.equal(decision.kind === 'issue' && decision.body.nodeName, 'md-abc-x1');
    assert.equal(decision.kind === 'issue' && decision.nodeName, 'md-abc-x1');
  });

  test('a fresh start uses a new Idempotency-Key per attempt, the first one stays the bare UID', () => {
    assert.equal(idempotencyKey(config({})), 'capi/config-uid');
    assert.equal(
      idempotencyKey(config({ annotations: { 'nodeflavor.io/issuance-attempt': '1' } })),
      'capi/config-uid',
    );
    assert.equal(
      idempotencyKey(config({ annotations: { 'nodeflavor.io/issuance-attempt': '3' } })),
      'capi/config-uid/3',
    );
    assert.equal(
      idempotencyKey(config({ annotations: { 'nodeflavor.io/issuance-attempt': 'x' } })),
      'capi/config-uid',
    );
    assert.match(tokenDescription(config({})), /\(uid config-uid\)$/);
  });

  test('every wait names a reason and says what to do in its message', () => {
    for (const over of [
      { config: config({ owner: { kind: 'MachinePool' } }) },
      { config: config({ annotations: { 'cluster.x-k8s.io/paused': undefined } }) },
      { issuerAccess: { ok: false as const, message: 'create Secret nodeflavor-capi/team-a.work' } },
    ]) {
      const decision = decide(over);
      assert.equal(decision.kind, 'wait');
      if (decision.kind === 'wait') assert.ok(decision.message.length > 20, decision.message);
    }
  });
});
