// What one Node and one FlavoredToken cost in the controller's caches, without a cluster: builds
// objects shaped as the API server returns them for the P4/P5 fleet (bench/fixture-nodes.ts, with
// managedFields and a settled token status), passes them through the controller's transforms
// (JSON text → parse → trim, as a list page arrives) and reports the retained heap per object.
//   node --expose-gc bench/cache-cost.ts [--count 5000]
import { randomBytes, randomUUID } from 'node:crypto';
import { parseArgs } from 'node:util';
import { internStrings } from '../src/kube/intern.ts';
import { trimNode } from '../src/kube/node-writes.ts';
import { withoutManagedFields } from '../src/runtime/listwatch.ts';
import { realisticNode } from './fixture-nodes.ts';

const { values } = parseArgs({ options: { count: { type: 'string', default: '5000' } } });
const count = Number(values.count);
const gc = (globalThis as { gc?: () => void }).gc;
if (!gc) throw new Error('run with node --expose-gc');

const at = '2026-12-01T03:00:00Z';
const managed = (manager: string, subresource?: string) => ({
  manager,
  operation: 'Update',
  apiVersion: 'v1',
  time: at,
  fieldsType: 'FieldsV1',
  fieldsV1: { 'f:metadata': { 'f:labels': { '.': {}, 'f:kubernetes.io/hostname': {} } }, 'f:status': {} },
  ...(subresource ? { subresource } : {}),
});

function nodeText(i: number): string {
  const name = `fleet-${String(i).padStart(5, '0')}`;
  const node = realisticNode(name, `f${i.toString(36).padStart(5, '0')}`.slice(-6), at) as {
    metadata: Record<string, unknown>;
  };
  Object.assign(node.metadata, {
    uid: randomUUID(),
    resourceVersion: String(100000 + i),
    creationTimestamp: at,
    managedFields: [managed('bench'), managed('bench', 'status'), managed('nodeflavor')],
  });
  return JSON.stringify(node);
}

function tokenText(i: number): string {
  const tokenId = `f${i.toString(36).padStart(5, '0')}`.slice(-6);
  const condition = (type: string, status: string, reason: string) => ({
    type,
    status,
    reason,
    message: `${type} ${status}: ${reason}`,
    lastTransitionTime: at,
    observedGeneration: 1,
  });
  return JSON.stringify({
    apiVersion: 'nodeflavor.io/v1alpha1',
    kind: 'FlavoredToken',
    metadata: {
      name: `ft-${tokenId}`,
      uid: randomUUID(),
      resourceVersion: String(200000 + i),
      generation: 1,
      creationTimestamp: at,
      finalizers: ['nodeflavor.io/revocation'],
      labels: { 'nodeflavor.io/token-id': tokenId },
      managedFields: [managed('bench'), managed('nodeflavor', 'status')],
    },
    spec: { flavorClassName: 'bench-fleet', ttl: '24h', maxUses: 1 },
    status: {
      tokenID: tokenId,
      uses: 1,
      expiresAt: at,
      bindings: [
        {
          nodeName: `fleet-${String(i).padStart(5, '0')}`,
          csrName: `csr-${tokenId}`,
          boundAt: at,
          nodeUID: randomUUID(),
          verifiedAt: at,
        },
      ],
      conditions: [
        condition('Ready', 'False', 'Consumed'),
        condition('Consumed', 'True', 'MaxUsesReached'),
        condition('Expired', 'False', 'NotExpired'),
        condition('Revoked', 'False', 'NotRevoked'),
      ],
      observedGeneration: 1,
    },
    extra: randomBytes(0).toString('hex'),
  });
}

function retained(label: string, make: (i: number) => string, keep: (raw: unknown) => unknown): void {
  const texts = Array.from({ length: count }, (_, i) => make(i));
  const bytes = texts.reduce((sum, text) => sum + text.length, 0);
  gc?.();
  const before = process.memoryUsage().heapUsed;
  const cache = new Map<number, unknown>();
  for (let i = 0; i < count; i++) cache.set(i, keep(JSON.parse(texts[i] as string)));
  gc?.();
  const after = process.memoryUsage().heapUsed;
  console.log(
    `${label}: ${((after - before) / count).toFixed(0)} bytes retained per object (JSON ${(bytes / count).toFixed(0)} bytes); ${cache.size} kept, ${texts.length} texts`,
  );
}

retained('Node, trimmed (trimNode)', nodeText, trimNode);
retained('Node, trimmed and interned', nodeText, (raw) => internStrings(trimNode(raw)));
retained('FlavoredToken without managedFields', tokenText, withoutManagedFields);
retained('FlavoredToken without managedFields, interned', tokenText, (raw) =>
  internStrings(withoutManagedFields(raw)),
);
