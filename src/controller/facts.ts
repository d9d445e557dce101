// What the reconcilers read of a cached Node and CSR, as the pure core takes it (a token's facts
// are src/flavor/token-facts.ts). No I/O, no memory of its own.
import type { NodeFacts } from '../flavor/verdict.ts';
import type { CsrObject } from '../kube/csrs.ts';
import type { TrimmedNode } from '../kube/node-writes.ts';

export function nodeFacts(node: TrimmedNode): NodeFacts {
  return {
    name: node.metadata.name,
    uid: node.metadata.uid,
    createdAt: new Date(node.metadata.creationTimestamp),
    labels: node.metadata.labels ?? {},
    annotations: node.metadata.annotations ?? {},
    taints: node.spec.taints ?? [],
  };
}

const BOOTSTRAP_USER = /^system:bootstrap:([a-z0-9]{6})$/;

export function csrTokenId(csr: CsrObject): string | undefined {
  return BOOTSTRAP_USER.exec(csr.spec.username ?? '')?.[1];
}

/** The signer issued the CSR's certificate (as read, or as our trimmed copy keeps it). */
export function csrIssued(csr: CsrObject | undefined): boolean {
  return Boolean(csr?.status?.issued || csr?.status?.certificate);
}

export function hasCondition(csr: CsrObject, ...types: string[]): boolean {
  return csr.status?.conditions?.some((c) => types.includes(c.type)) ?? false;
}

/** Not approved, denied or failed yet. */
export function csrPending(csr: CsrObject): boolean {
  return !hasCondition(csr, 'Approved', 'Denied', 'Failed');
}

/** Keeps what the joins need of a CSR (the request itself is small: one key and a name). */
export function trimCsr(raw: unknown): CsrObject {
  const csr = raw as CsrObject;
  return {
    metadata: {
      name: csr.metadata.name,
      uid: csr.metadata.uid,
      resourceVersion: csr.metadata.resourceVersion,
      creationTimestamp: csr.metadata.creationTimestamp,
    },
    spec: {
      username: csr.spec?.username,
      signerName: csr.spec?.signerName,
      request: csr.spec?.request,
      groups: csr.spec?.groups,
      usages: csr.spec?.usages,
      expirationSeconds: csr.spec?.expirationSeconds,
    },
    status: {
      ...(csr.status?.conditions ? { conditions: csr.status.conditions } : {}),
      ...(csrIssued(csr) ? { issued: true } : {}),
    },
  };
}
