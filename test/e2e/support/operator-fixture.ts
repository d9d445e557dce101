// The setup the operator e2e files share, once: the CRDs, the operator's namespace, the file's
// FlavorClasses and the chart's ServiceAccount identity in before(); `nodeflavor run` processes
// started with their logs in a temp dir; and in after(), simulated kubelets and operators
// stopped, the file's Nodes deleted (the shared control plane stays light) and, for a file that
// brings its own control plane (faults that restart or stall it), that plane stopped.
// Call it at the top of a describe(); its hooks run before the file's own (node:test runs a
// suite's hooks in the order they were registered). Called at the top of a file, its before()
// starts together with the file's own (top-level before() hooks run at once, not in turn): a
// file's top-level before() awaits fx.ready() first.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before } from 'node:test';
import { QUARANTINE_TAINT_KEY, TOKEN_LABEL_KEY } from '../../../src/flavor/resources.ts';
import { ControlPlane, type ControlPlaneOptions } from '../cluster/controlplane.ts';
import type { ManagedProcess } from '../cluster/process.ts';
import type { SimulatedKubelet } from '../kubelet-sim/kubelet.ts';
import { prepareOperatorIdentity } from './chart.ts';
import { type E2EEnvironment, e2eEnvironment } from './environment.ts';
import {
  applyFlavorClass,
  ensureNamespace,
  type FlavorClassSpecInput,
  installCrds,
  OPERATOR_NAMESPACE,
  startOperator,
} from './nodeflavor.ts';
import { tempDirForThisProcess } from './temp-dir.ts';
import { waitFor } from './wait.ts';

export const FLAVOR_LABEL = 'nodeflavor.io/flavor';

/**
 * Waits until every named Node is flavored as verified: the flavor label, no token label left and
 * no quarantine taint. Its error names the nodes still missing.
 */
export async function waitAllFlavored(
  env: E2EEnvironment,
  flavor: string,
  names: string[],
  timeoutMs = 90_000,
): Promise<void> {
  await waitFor(
    async () => {
      const nodes = await env.core.listNode({ labelSelector: `${FLAVOR_LABEL}=${flavor}` });
      const done = new Set(
        nodes.items
          .filter((n) => n.metadata?.labels?.[TOKEN_LABEL_KEY] === undefined)
          .filter((n) => !n.spec?.taints?.some((taint) => taint.key === QUARANTINE_TAINT_KEY))
          .map((n) => n.metadata?.name),
      );
      const missing = names.filter((n) => !done.has(n));
      if (missing.length === 0) return true;
      throw new Error(`${missing.length} not flavored yet, e.g. ${missing.slice(0, 5).join(', ')}`);
    },
    { what: `all ${names.length} nodes to be flavored`, timeoutMs, intervalMs: 500 },
  );
}

export interface OperatorFixture {
  /** Set in before(). */
  env: E2EEnvironment;
  /** The setup of before(): started by the first call (before() or the file's), once. */
  ready: () => Promise<void>;
  /** This file's own control plane, when it asked for one. */
  plane?: ControlPlane;
  /** Operator logs (and anything else the file writes); removed when the process exits. */
  logs: string;
  /** Every operator started; stopped after the file. */
  operators: ManagedProcess[];
  /** Every simulated kubelet the file registers here; stopped (and its Node deleted) after the file. */
  kubelets: SimulatedKubelet[];
  /** `nodeflavor run` as the chart's ServiceAccount, its log at logs/operator-<n>.log. */
  start: (args?: string[], options?: Parameters<typeof startOperator>[2]) => ManagedProcess;
  logPath: (op: ManagedProcess) => string;
  /** An operator's log so far ('' before it wrote one). */
  logText: (op: ManagedProcess) => string;
}

/** A FlavorClass that only labels its nodes with nodeflavor.io/flavor=<its name>. */
export function labelOnly(name: string): Record<string, FlavorClassSpecInput> {
  return { [name]: { labels: { [FLAVOR_LABEL]: name } } };
}

export function operatorFixture(options: {
  /** The temp dir's prefix (nodeflavor-<what>-). */
  logPrefix: string;
  /** The file's FlavorClasses (none when absent). */
  flavorClasses?: Record<string, FlavorClassSpecInput>;
  /** A control plane of this file's own (the suite's shared one when absent). */
  controlPlane?: ControlPlaneOptions;
  /** Delete the Nodes of the file's kubelets after it (default true). */
  deleteNodes?: boolean;
  /**
   * Prepare the operator namespace and the chart's ServiceAccount identity that `start` runs as
   * (default true). A file that runs the operator's parts in-process, with an identity of its
   * own, needs neither.
   */
  operatorIdentity?: boolean;
  /**
   * Runs in after() before anything is stopped: e.g. a stalling proxy set to forward again before
   * the operators behind it are stopped.
   */
  beforeStop?: () => void | Promise<void>;
}): OperatorFixture {
  const logOf = new Map<ManagedProcess, string>();
  const fixture = {
    logs: tempDirForThisProcess(options.logPrefix),
    operators: [],
    kubelets: [],
  } as unknown as OperatorFixture;

  let setUp: Promise<void> | undefined;
  fixture.ready = () => {
    setUp ??= setUpFixture();
    return setUp;
  };
  before(() => fixture.ready());

  async function setUpFixture(): Promise<void> {
    if (options.controlPlane) {
      fixture.plane = await ControlPlane.start({
        log: (line) => process.stderr.write(`[own control-plane] ${line}\n`),
        ...options.controlPlane,
      });
      // Every helper (environment, chart identity, operator) talks to this plane from now on.
      process.env.E2E_KUBECONFIG = fixture.plane.kubeconfigPath;
    }
    fixture.env = await e2eEnvironment();
    await installCrds(fixture.env);
    if (options.operatorIdentity !== false) await ensureNamespace(fixture.env, OPERATOR_NAMESPACE);
    for (const [name, spec] of Object.entries(options.flavorClasses ?? {}))
      await applyFlavorClass(fixture.env, name, spec);
    if (options.operatorIdentity !== false) await prepareOperatorIdentity(fixture.env);
  }

  after(async () => {
    await options.beforeStop?.();
    for (const kubelet of fixture.kubelets) kubelet.stop();
    await Promise.all(fixture.operators.map((op) => op.stop()));
    if (options.deleteNodes !== false && fixture.env && !fixture.plane)
      await Promise.all(
        fixture.kubelets.map((k) => fixture.env.core.deleteNode({ name: k.nodeName }).catch(() => undefined)),
      );
    await fixture.plane?.stop();
  });

  fixture.start = (args = [], startOptions = {}) => {
    const path = join(fixture.logs, `operator-${logOf.size}.log`);
    const op = startOperator(path, args, startOptions);
    fixture.operators.push(op);
    logOf.set(op, path);
    return op;
  };
  fixture.logPath = (op) => logOf.get(op) ?? '';
  fixture.logText = (op) => {
    try {
      return readFileSync(fixture.logPath(op), 'utf8');
    } catch {
      return '';
    }
  };
  return fixture;
}
