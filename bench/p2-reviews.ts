// What P2 guards and what the webhook is asked: the FlavorClass whose keys are protected, and
// AdmissionReview bodies as the API server sends them for writes that pass the webhook's
// matchConditions (only those touching protected keys reach it): ~15 KB Nodes (fixture-nodes.ts)
// as object and oldObject.
import { randomUUID } from 'node:crypto';
import { QUARANTINE_TAINT_KEY, TOKEN_LABEL_KEY } from '../src/flavor/admission.ts';
import { realisticNode } from './fixture-nodes.ts';

export const P2_FLAVOR = 'p2-bench';
export const P2_TIER_LABEL = 'bench.example.com/tier';
/** The admin group's namespace: its ServiceAccounts are in group system:serviceaccounts:<it>. */
export const P2_ADMIN_NAMESPACE = 'p2-admins';
export const P2_ADMIN_GROUP = `system:serviceaccounts:${P2_ADMIN_NAMESPACE}`;
/** The FlavorClass spec: one key under the nodeflavor.io/ prefix and explicit keys outside it. */
export const P2_FLAVOR_KEYS = {
  labels: { 'nodeflavor.io/flavor': 'p2', [P2_TIER_LABEL]: 'gold' },
  annotations: { 'bench.example.com/trust-note': 'vetted' },
  taints: [{ key: 'bench.example.com/dedicated', value: 'p2', effect: 'NoSchedule' }],
};

export interface ReviewBody {
  variant: 'kubelet-update-denied' | 'kubelet-create-allowed' | 'admin-update-allowed';
  allowed: boolean;
  body: Buffer;
}

type NodeObject = ReturnType<typeof realisticNode> & {
  metadata: { labels: Record<string, string>; annotations: Record<string, string> };
  spec: Record<string, unknown>;
};

function review(
  operation: 'CREATE' | 'UPDATE',
  name: string,
  userInfo: { username: string; groups: string[] },
  object: unknown,
  oldObject: unknown,
): Buffer {
  const gvk = { group: '', version: 'v1', kind: 'Node' };
  const gvr = { group: '', version: 'v1', resource: 'nodes' };
  return Buffer.from(
    JSON.stringify({
      apiVersion: 'admission.k8s.io/v1',
      kind: 'AdmissionReview',
      request: {
        uid: randomUUID(),
        kind: gvk,
        resource: gvr,
        requestKind: gvk,
        requestResource: gvr,
        name,
        operation,
        userInfo: { ...userInfo, extra: {} },
        object,
        oldObject,
        dryRun: false,
        options: {
          apiVersion: 'meta.k8s.io/v1',
          kind: operation === 'CREATE' ? 'CreateOptions' : 'UpdateOptions',
        },
      },
    }),
  );
}

/**
 * `perVariant` bodies of each kind, each with its own uid and Node: a kubelet changing a protected
 * label of its own Node (denied, logged at info), a kubelet registering with the token label and
 * the quarantine taint (allowed), an admin-group member changing a protected label (allowed).
 */
export function reviewBodies(perVariant: number): ReviewBody[] {
  const bodies: ReviewBody[] = [];
  const verifiedAt = new Date().toISOString().replace(/\.\d{3}Z$/, 'Z');
  for (let i = 0; i < perVariant; i++) {
    const name = `p2-load-${i}`;
    const kubelet = { username: `system:node:${name}`, groups: ['system:nodes', 'system:authenticated'] };
    const old = realisticNode(name, `t${String(i).padStart(5, '0')}`, verifiedAt) as NodeObject;
    old.metadata.labels[P2_TIER_LABEL] = 'gold';

    const relabelled = structuredClone(old);
    relabelled.metadata.labels[P2_TIER_LABEL] = 'platinum';
    bodies.push({
      variant: 'kubelet-update-denied',
      allowed: false,
      body: review('UPDATE', name, kubelet, relabelled, old),
    });

    const registering = structuredClone(old);
    delete registering.metadata.labels['nodeflavor.io/flavor'];
    delete registering.metadata.labels[P2_TIER_LABEL];
    delete registering.metadata.annotations['nodeflavor.io/verified'];
    registering.metadata.labels[TOKEN_LABEL_KEY] = 'a'.repeat(52);
    registering.spec.taints = [{ key: QUARANTINE_TAINT_KEY, effect: 'NoSchedule' }];
    bodies.push({
      variant: 'kubelet-create-allowed',
      allowed: true,
      body: review('CREATE', name, kubelet, registering, null),
    });

    const adminChange = structuredClone(old);
    adminChange.metadata.labels[P2_TIER_LABEL] = 'silver';
    bodies.push({
      variant: 'admin-update-allowed',
      allowed: true,
      body: review(
        'UPDATE',
        name,
        {
          username: `system:serviceaccount:${P2_ADMIN_NAMESPACE}:admin`,
          groups: [P2_ADMIN_GROUP, 'system:serviceaccounts', 'system:authenticated'],
        },
        adminChange,
        old,
      ),
    });
  }
  return bodies;
}
