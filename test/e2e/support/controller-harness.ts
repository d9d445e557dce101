// A controller running in the test process (as the chart's ServiceAccount, so the chart's RBAC is
// what the tests exercise), two FlavorClasses, and the helpers the trust-chain tests share: join,
// wait for a flavor, read a token's status, find a Warning Event, read a metric.

import { after, before } from 'node:test';
import pino from 'pino';
import { Registry } from 'prom-client';
import { parseConfig } from '../../../src/config.ts';
import { type ControllerHandle, startController } from '../../../src/controller/manager.ts';
import type { NodeNameClaim } from '../../../src/flavor/resources.ts';
import type { IssuedToken } from '../../../src/tokenissuer/issuance/issue.ts';
import type { SimulatedKubelet } from '../kubelet-sim/kubelet.ts';
import { prepareOperatorIdentity } from './chart.ts';
import { type E2EEnvironment, e2eEnvironment } from './environment.ts';
import {
  applyFlavorClass,
  customObjects,
  ensureNamespace,
  installCrds,
  joinWith,
  OPERATOR_NAMESPACE,
} from './nodeflavor.ts';
import { uniqueName, waitFor } from './wait.ts';

export const FLAVOR_LABEL = 'nodeflavor.io/flavor';

export interface Harness {
  env: E2EEnvironment;
  registry: Registry;
  sweet: string;
  sour: string;
  join: (token: IssuedToken, name: string) => Promise<SimulatedKubelet>;
  waitForFlavor: (name: string, flavor: string) => Promise<void>;
  tokenWarning: (token: IssuedToken, reason: string) => Promise<{ message?: string }>;
  tokenStatus: (token: IssuedToken) => Promise<{ uses?: number; bindings?: { nodeName: string }[] }>;
  /** The join record of a node name (its NodeNameClaim, ADR 0016), if any. */
  joinRecord: (nodeName: string) => Promise<NodeNameClaim | undefined>;
  nodeEvents: (name: string) => Promise<string[]>;
  nodeWarning: (name: string, reason: string) => Promise<{ message?: string }>;
  /** Until the controller has seen this Node (its watch) and reconciled everything enqueued. */
  settled: (nodeName: string) => Promise<void>;
}

/** A controller (in this process, as the chart's ServiceAccount) and the helpers every case uses. */
export function controllerHarness(settings: Record<string, unknown>): Harness {
  const registry = new Registry();
  const kubelets: SimulatedKubelet[] = [];
  let controller: ControllerHandle | undefined;
  const h = {
    registry,
    sweet: uniqueName('sweet'),
    sour: uniqueName('sour'),
  } as Harness;

  before(async () => {
    h.env = await e2eEnvironment();
    await installCrds(h.env);
    await ensureNamespace(h.env, OPERATOR_NAMESPACE);
    await applyFlavorClass(h.env, h.sweet, { labels: { [FLAVOR_LABEL]: h.sweet } });
    await applyFlavorClass(h.env, h.sour, { labels: { [FLAVOR_LABEL]: h.sour } });
    const { kubeConfig } = await prepareOperatorIdentity(h.env);
    controller = startController({
      kubeConfig,
      config: parseConfig({
        namespace: OPERATOR_NAMESPACE,
        leaderElect: false,
        bindingGrace: '3s',
        webhook: false,
        issuer: false,
        ...settings,
      }),
      registry,
      log: pino({ level: 'warn' }),
    });
    await controller.synced;
  });
  after(async () => {
    for (const kubelet of kubelets) kubelet.stop();
    await controller?.stop();
  });

  h.join = async (token, name) => {
    const kubelet = await joinWith(token.material, name);
    kubelets.push(kubelet);
    return kubelet;
  };
  h.waitForFlavor = async (name, flavor) => {
    await waitFor(
      async () => (await h.env.core.readNode({ name })).metadata?.labels?.[FLAVOR_LABEL] === flavor,
      { what: `node ${name} to get flavor ${flavor}` },
    );
  };
  const warning = (kind: string, name: string, reason: string) =>
    waitFor(
      async () => {
        const events = await h.env.core.listNamespacedEvent({
          namespace: 'default',
          fieldSelector: `involvedObject.name=${name}`,
        });
        return events.items.find((e) => e.type === 'Warning' && e.reason === reason);
      },
      { what: `a Warning ${reason} Event on ${kind} ${name}` },
    );
  h.tokenWarning = (token, reason) => warning('FlavoredToken', token.name, reason);
  h.nodeWarning = (name, reason) => warning('Node', name, reason);
  h.settled = async (nodeName) => {
    const uid = (await h.env.core.readNode({ name: nodeName })).metadata?.uid;
    await waitFor(() => controller?.caches.nodes.get(nodeName)?.metadata.uid === uid, {
      what: `the controller to see node ${nodeName}`,
    });
    await controller?.idle();
  };
  h.tokenStatus = async (token) =>
    (
      (await customObjects(h.env.kubeConfig).getClusterCustomObject({
        group: 'nodeflavor.io',
        version: 'v1alpha1',
        plural: 'flavoredtokens',
        name: token.name,
      })) as { status?: { uses?: number; bindings?: { nodeName: string }[] } }
    ).status ?? {};
  h.joinRecord = async (name) =>
    (await customObjects(h.env.kubeConfig)
      .getClusterCustomObject({ group: 'nodeflavor.io', version: 'v1alpha1', plural: 'nodenameclaims', name })
      .catch(() => undefined)) as NodeNameClaim | undefined;
  h.nodeEvents = async (name) =>
    (
      await h.env.core.listNamespacedEvent({
        namespace: 'default',
        fieldSelector: `involvedObject.name=${name}`,
      })
    ).items.map((e) => e.reason ?? '');
  return h;
}

/** A gauge or counter without labels, once the controller has set it. */
export async function metricOnceSet(registry: Registry, name: string): Promise<number> {
  return waitFor(
    async () => {
      const line = (await registry.metrics()).split('\n').find((l) => l.startsWith(`${name} `));
      return line === undefined ? undefined : Number(line.split(' ').pop());
    },
    { what: `metric ${name}` },
  );
}

export async function rejectedMetric(registry: Registry, reason: string): Promise<number> {
  const text = await registry.metrics();
  const line = text
    .split('\n')
    .find((l) => l.startsWith(`nodeflavor_csr_bindings_total{result="rejected",reason="${reason}"}`));
  return Number(line?.split(' ').pop() ?? 0);
}
