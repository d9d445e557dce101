// The reads behind `kubectl flavor explain` and the REASON column of `kubectl flavor nodes`: the
// Node, its name's join record, the FlavoredTokens (with their joins), the kubelet client CSRs
// that asked for its name, and nodeflavor's Events. Read with the caller's own kubeconfig (their RBAC); every failure becomes a
// KubeError. The conclusions are drawn purely in src/cli/explain.ts.
import { parseKubeletCsr } from '../flavor/csr.ts';
import { tokenWithJoins } from '../flavor/node-name-claim.ts';
import { type FlavoredToken, type NodeNameClaim, TOKEN_ID_LABEL } from '../flavor/resources.ts';
import { KUBELET_CLIENT_SIGNER, type NodeFacts } from '../flavor/verdict.ts';
import { kubeCall } from '../runtime/fetch.ts';
import { isNotFound } from '../runtime/kube-error.ts';
import type { KubeConfig } from '../runtime/kubeconfig.ts';
import { readClaim } from './node-name-claims.ts';
import { KubeTokenStore } from './tokens.ts';

/** The fields of a core/v1 Event this file reads. */
interface CoreV1Event {
  involvedObject: { kind?: string; name?: string };
  type?: string;
  reason?: string;
  message?: string;
  count?: number;
  firstTimestamp?: string;
  lastTimestamp?: string;
  eventTime?: string;
  source?: { component?: string };
  reportingComponent?: string;
}

/** The fields of a CertificateSigningRequest this file reads. */
interface Csr {
  metadata?: { name?: string; creationTimestamp?: string };
  spec: { signerName: string; request: string; username?: string };
  status?: { conditions?: { type: string; reason?: string; message?: string }[] };
}

/** Where Events about cluster-scoped objects are (the controller records them there). */
const EVENT_NAMESPACE = 'default';

export interface CsrSummary {
  name: string;
  /** spec.username: system:bootstrap:<token ID> for a bootstrap-token join. */
  username: string;
  nodeName: string | undefined;
  createdAt: string;
  /** Approved, Denied, Failed or Pending; with the approver's reason and message. */
  state: 'Approved' | 'Denied' | 'Failed' | 'Pending';
  reason: string | undefined;
  message: string | undefined;
}

export interface EventSummary {
  kind: string;
  name: string;
  type: string;
  reason: string;
  message: string;
  count: number;
  firstAt: string | undefined;
  lastAt: string | undefined;
  component: string | undefined;
}

export function nodeFactsOf(node: {
  metadata?: {
    name?: string;
    uid?: string;
    creationTimestamp?: Date | string;
    labels?: Record<string, string>;
    annotations?: Record<string, string>;
  };
  spec?: { taints?: { key: string; value?: string; effect: string }[] };
}): NodeFacts {
  return {
    name: node.metadata?.name ?? '',
    uid: node.metadata?.uid ?? '',
    createdAt: new Date(node.metadata?.creationTimestamp ?? 0),
    labels: node.metadata?.labels ?? {},
    annotations: node.metadata?.annotations ?? {},
    taints: (node.spec?.taints ?? []).map((t) => ({
      key: t.key,
      effect: t.effect,
      ...(t.value !== undefined ? { value: t.value } : {}),
    })),
  };
}

function eventSummary(event: CoreV1Event): EventSummary {
  const time = (t: Date | string | undefined) => (t === undefined ? undefined : new Date(t).toISOString());
  return {
    kind: event.involvedObject.kind ?? '',
    name: event.involvedObject.name ?? '',
    type: event.type ?? '',
    reason: event.reason ?? '',
    message: event.message ?? '',
    count: event.count ?? 1,
    firstAt: time(event.firstTimestamp ?? event.eventTime),
    lastAt: time(event.lastTimestamp ?? event.eventTime ?? event.firstTimestamp),
    component: event.source?.component ?? event.reportingComponent,
  };
}

export class ExplainReader {
  readonly #kubeConfig: KubeConfig;
  readonly #tokens: KubeTokenStore;

  constructor(kubeConfig: KubeConfig) {
    this.#kubeConfig = kubeConfig;
    this.#tokens = new KubeTokenStore(kubeConfig);
  }

  async node(name: string): Promise<NodeFacts | undefined> {
    try {
      return nodeFactsOf(
        await kubeCall<Parameters<typeof nodeFactsOf>[0]>(
          this.#kubeConfig,
          'GET',
          `/api/v1/nodes/${encodeURIComponent(name)}`,
          { action: `read Node ${name}` },
        ),
      );
    } catch (error) {
      if (isNotFound(error)) return undefined;
      throw error;
    }
  }

  /** Every token, each with what its joins' records say (ADR 0016). */
  async tokens(): Promise<FlavoredToken[]> {
    const [tokens, records] = await Promise.all([
      this.#tokens.listFlavoredTokens(),
      this.#tokens.listJoinRecords(),
    ]);
    return tokens.map((token) => tokenWithJoins(token, records));
  }

  /** A token by name or token ID, with what its joins' records say. */
  async findToken(ref: string): Promise<FlavoredToken | undefined> {
    const token = /^[a-z0-9]{6}$/.test(ref)
      ? await this.#tokens.findFlavoredTokenByTokenId(ref)
      : await this.#tokens.getFlavoredToken(ref);
    const tokenId = token?.metadata.labels?.[TOKEN_ID_LABEL];
    if (!token || !tokenId) return token;
    return tokenWithJoins(token, await this.#tokens.listJoinRecords(tokenId));
  }

  /** The join record of a node name (its NodeNameClaim: the joins under it), if any. */
  joinRecord(nodeName: string): Promise<NodeNameClaim | undefined> {
    return readClaim(this.#kubeConfig, nodeName);
  }

  /** Kubelet client CSRs, with the node name each asks for (parsed from its request). */
  async kubeletCsrs(): Promise<CsrSummary[]> {
    const { items = [] } = await kubeCall<{ items?: Csr[] }>(
      this.#kubeConfig,
      'GET',
      '/apis/certificates.k8s.io/v1/certificatesigningrequests',
      { action: 'list CertificateSigningRequests' },
    );
    const kubelet = items.filter((csr) => csr.spec.signerName === KUBELET_CLIENT_SIGNER);
    return Promise.all(
      kubelet.map(async (csr) => {
        const subject = await parseKubeletCsr(csr.spec.request);
        const condition =
          csr.status?.conditions?.find((c) => c.type === 'Denied' || c.type === 'Failed') ??
          csr.status?.conditions?.find((c) => c.type === 'Approved');
        return {
          name: csr.metadata?.name ?? '',
          username: csr.spec.username ?? '',
          nodeName: subject.ok ? subject.nodeName : undefined,
          createdAt: new Date(csr.metadata?.creationTimestamp ?? 0).toISOString(),
          state: (condition?.type as CsrSummary['state'] | undefined) ?? 'Pending',
          reason: condition?.reason,
          message: condition?.message,
        };
      }),
    );
  }

  /** nodeflavor's Events about objects of `kind` (and of `name`, if given). */
  async events(kind: 'Node' | 'FlavoredToken', name?: string): Promise<EventSummary[]> {
    const selector = [`involvedObject.kind=${kind}`, ...(name ? [`involvedObject.name=${name}`] : [])];
    const { items = [] } = await kubeCall<{ items?: CoreV1Event[] }>(
      this.#kubeConfig,
      'GET',
      `/api/v1/namespaces/${EVENT_NAMESPACE}/events`,
      { query: { fieldSelector: selector.join(',') }, action: `list Events about ${kind}s` },
    );
    return items.map(eventSummary);
  }
}
