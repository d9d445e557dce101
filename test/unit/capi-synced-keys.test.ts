import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { clusterApiSyncedKeys, syncRules } from '../../src/flavor/capi-synced-keys.ts';
import { desiredClassStatus } from '../../src/flavor/class-status.ts';

// Which FlavorClass keys Cluster API (v1.14) also writes to the Nodes of its Machines: what
// core/reconcilers/machine/machine_controller_noderef.go, util/labels and util/annotations sync.
describe('clusterApiSyncedKeys', () => {
  const rules = syncRules(['^team\\.example\\.com/'], ['^ops\\.example\\.com/(owner|pager)$']);
  const cases: Record<
    string,
    {
      spec: {
        labels?: Record<string, string>;
        annotations?: Record<string, string>;
        taints?: { key: string }[];
      };
      want: string[];
    }
  > = {
    'keys of your own domain: none': {
      spec: {
        labels: { 'nodeflavor.io/flavor': 'sweet', 'example.com/tier': 'a' },
        annotations: { 'example.com/x': '' },
      },
      want: [],
    },
    'node.cluster.x-k8s.io and its subdomains, labels and annotations': {
      spec: {
        labels: { 'node.cluster.x-k8s.io/tier': 'a', 'gpu.node.cluster.x-k8s.io/model': 'b' },
        annotations: { 'node.cluster.x-k8s.io/owner': 'c' },
      },
      want: [
        'label node.cluster.x-k8s.io/tier',
        'label gpu.node.cluster.x-k8s.io/model',
        'annotation node.cluster.x-k8s.io/owner',
      ],
    },
    'a look-alike domain is not a subdomain': {
      spec: { labels: { 'xnode.cluster.x-k8s.io/tier': 'a', 'cluster.x-k8s.io/tier': 'b' } },
      want: [],
    },
    'node-role.kubernetes.io exactly, node-restriction.kubernetes.io with subdomains': {
      spec: {
        labels: {
          'node-role.kubernetes.io/worker': '',
          'sub.node-role.kubernetes.io/x': '',
          'node-restriction.kubernetes.io/zone': 'a',
          'a.node-restriction.kubernetes.io/zone': 'b',
        },
      },
      want: [
        'label node-role.kubernetes.io/worker',
        'label node-restriction.kubernetes.io/zone',
        'label a.node-restriction.kubernetes.io/zone',
      ],
    },
    "Cluster API's bookkeeping annotations": {
      spec: { annotations: { 'cluster.x-k8s.io/machine': '', 'cluster.x-k8s.io/other': '' } },
      want: ['annotation cluster.x-k8s.io/machine'],
    },
    'the configured patterns, labels and annotations apart': {
      spec: {
        labels: { 'team.example.com/payments': 'y', 'ops.example.com/owner': 'z' },
        annotations: {
          'ops.example.com/owner': 'z',
          'ops.example.com/ownership': 'z',
          'team.example.com/a': '',
        },
      },
      want: ['label team.example.com/payments', 'annotation ops.example.com/owner'],
    },
    "taints in Cluster API's own taint domain": {
      spec: { taints: [{ key: 'node.cluster.x-k8s.io/uninitialized' }, { key: 'example.com/dedicated' }] },
      want: ['taint node.cluster.x-k8s.io/uninitialized'],
    },
  };
  for (const [name, { spec, want }] of Object.entries(cases))
    test(name, () =>
      assert.deepEqual(
        clusterApiSyncedKeys(spec, rules).map((k) => `${k.kind} ${k.key}`),
        want,
      ),
    );

  test('without configured patterns only the fixed domains count', () => {
    assert.deepEqual(clusterApiSyncedKeys({ labels: { 'team.example.com/payments': 'y' } }), []);
  });

  test('a pattern that is no regular expression is refused when compiled', () => {
    assert.throws(() => syncRules(['('], []));
  });
});

describe('desiredClassStatus with keys Cluster API syncs', () => {
  const now = new Date('2030-01-01T00:00:00Z');
  test('adds ClusterAPISyncConflict (True) naming each key and why, and keeps its time while it stays', () => {
    const syncedKeys = clusterApiSyncedKeys({ labels: { 'node.cluster.x-k8s.io/tier': 'a' } });
    const first = desiredClassStatus({
      generation: 1,
      spec: {},
      nodes: 0,
      current: undefined,
      now,
      syncedKeys,
    });
    const conflict = first.conditions?.find((c) => c.type === 'ClusterAPISyncConflict');
    assert.equal(conflict?.status, 'True');
    assert.equal(conflict?.reason, 'KeysInSyncedDomains');
    assert.match(
      conflict?.message ?? '',
      /label node\.cluster\.x-k8s\.io\/tier \(the node\.cluster\.x-k8s\.io domain\)/,
    );
    const later = desiredClassStatus({
      generation: 1,
      spec: {},
      nodes: 0,
      current: first,
      now: new Date('2030-01-02T00:00:00Z'),
      syncedKeys,
    });
    assert.equal(later.conditions?.[1]?.lastTransitionTime, conflict?.lastTransitionTime);
  });

  test('no such keys: only Ready, as before', () => {
    const status = desiredClassStatus({
      generation: 1,
      spec: {},
      nodes: 0,
      current: undefined,
      now,
      syncedKeys: [],
    });
    assert.deepEqual(
      status.conditions?.map((c) => c.type),
      ['Ready'],
    );
  });
});
