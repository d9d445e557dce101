// `make demo-capi`: Cluster API Machines that join flavored, on a local control plane that serves as
// the management and the workload cluster, no cloud needed (docs/cluster-api.md).
//  1. nodeflavor (controller, admission guard, issuer) in the workload cluster; FlavorClass sweet;
//  2. Cluster API's core manager and CABPK (v1.14, built from the Go module proxy), a stand-in
//     infrastructure provider that boots each Machine from its bootstrap data (real nodes where the
//     host allows, else simulated kubelets, and the demo says which), and `nodeflavor capi`;
//  3. a MachineDeployment annotated nodeflavor.io/flavor-class: sweet, scaled from 0 to 2: each
//     Machine's KubeadmConfig gets its own single-use token from the issuer, its node joins with it
//     and is verified, and the Machine reports NodeFlavorVerified; then everything is shut down.
import { kubeJson } from '../src/runtime/fetch.ts';
import {
  kubeadmConfigTemplate,
  localMachineTemplate,
  machineDeployment,
} from '../test/e2e/capi/cluster-objects.ts';
import { CapiFixture } from '../test/e2e/capi/fixture.ts';
import { applyObjects } from '../test/e2e/cluster/apply.ts';
import { realNodesUnsupported } from '../test/e2e/realnode/real-node.ts';
import { waitFor } from '../test/e2e/support/wait.ts';

const NS = 'default';
const CLUSTER = 'demo';
const say = (line: string) => console.log(`==> ${line}`);

interface Condition {
  type: string;
  status: string;
  reason?: string;
  message?: string;
}
interface Machine {
  metadata: { name: string };
  spec: { bootstrap: { configRef?: { name: string } } };
  status?: { phase?: string; nodeRef?: { name: string }; conditions?: Condition[] };
}

const condition = (object: { status?: { conditions?: Condition[] } }, type: string) =>
  object.status?.conditions?.find((c) => c.type === type);

async function main(): Promise<void> {
  const noRealNodes = realNodesUnsupported();
  if (noRealNodes) say(`the Machines will boot as SIMULATED kubelets: ${noRealNodes}`);
  const fx = await CapiFixture.start({
    flavorClasses: {
      sweet: {
        description: 'nodes we run ourselves',
        labels: { 'nodeflavor.io/flavor': 'sweet' },
        taints: [{ key: 'nodeflavor.io/dedicated', value: 'sweet', effect: 'NoSchedule' }],
      },
    },
    cluster: { namespace: NS, name: CLUSTER },
    capiArgs: ['--status-poll-interval=1s', '--log-level=warn'],
    log: (line) => console.log(line.startsWith('  ') ? `    ${line.trim()}` : `==> ${line}`),
    simulatedNodesWhenUnsupported: true,
  });
  process.once('SIGINT', () => void fx.stop().then(() => process.exit(130)));
  try {
    say(
      'the workload issuer trusts nodeflavor capi with flavor sweet (a ServiceAccount token, RBAC verb use)',
    );
    await fx.allowFlavors(['sweet']);
    await fx.writeAccessSecret();

    say('MachineDeployment sweet: annotated nodeflavor.io/flavor-class=sweet, 0 replicas');
    await applyObjects(fx.plane.kubeconfigPath, [
      kubeadmConfigTemplate(NS, 'sweet'),
      localMachineTemplate(NS, 'local'),
      machineDeployment({
        namespace: NS,
        cluster: CLUSTER,
        name: 'sweet',
        replicas: 0,
        kubeadmConfigTemplate: 'sweet',
        localMachineTemplate: 'local',
        annotations: { 'nodeflavor.io/flavor-class': 'sweet', 'nodeflavor.io/node-name': 'machine' },
        readinessGates: ['NodeFlavorVerified'],
      }),
    ]);

    say('scaling it from 0 to 2');
    const started = Date.now();
    await kubeJson(
      fx.admin,
      'PATCH',
      `/apis/cluster.x-k8s.io/v1beta2/namespaces/${NS}/machinedeployments/sweet`,
      {
        contentType: 'application/merge-patch+json',
        body: { spec: { replicas: 2 } },
      },
    );
    const machines = await waitFor(
      async () => {
        const list = await kubeJson<{ items: Machine[] }>(
          fx.admin,
          'GET',
          `/apis/cluster.x-k8s.io/v1beta2/namespaces/${NS}/machines`,
        );
        const verified = list.items.filter((m) => condition(m, 'NodeFlavorVerified')?.status === 'True');
        return list.items.length === 2 && verified.length === 2 && list.items;
      },
      { what: 'both Machines to be verified', timeoutMs: 180_000, intervalMs: 500 },
    ).catch((error: Error) => {
      throw new Error(`${error.message}\n${fx.logs()}`);
    });
    console.log(
      `    both Machines verified ${((Date.now() - started) / 1000).toFixed(1)} s after the scale-up`,
    );

    const rows = [['MACHINE', 'PHASE', 'TOKEN', 'NODE', 'FLAVOR', 'NodeFlavorVerified']];
    for (const machine of machines) {
      const config = await kubeJson<{ metadata: { annotations?: Record<string, string> } }>(
        fx.admin,
        'GET',
        `/apis/bootstrap.cluster.x-k8s.io/v1beta2/namespaces/${NS}/kubeadmconfigs/${machine.spec.bootstrap.configRef?.name}`,
      );
      const nodeName = machine.status?.nodeRef?.name ?? '';
      const node = await fx.env.core.readNode({ name: nodeName });
      const verified = condition(machine, 'NodeFlavorVerified');
      rows.push([
        machine.metadata.name,
        machine.status?.phase ?? '',
        config.metadata.annotations?.['nodeflavor.io/token-id'] ?? '',
        nodeName,
        node.metadata?.labels?.['nodeflavor.io/flavor'] ?? '<none>',
        `${verified?.status} (${verified?.reason})`,
      ]);
    }
    const widths = rows[0]?.map((_, i) => Math.max(...rows.map((r) => (r[i] ?? '').length))) ?? [];
    console.log('');
    for (const row of rows)
      console.log(
        row
          .map((cell, i) => cell.padEnd(widths[i] ?? 0))
          .join('   ')
          .trimEnd(),
      );
    console.log('');

    const kubeadmTokens = await fx.kubeadmGroupTokens();
    say(
      `CABPK minted ${kubeadmTokens.length} token(s) of its own: the KubeadmConfigs use file discovery with nodeflavor's tokens`,
    );
    say('shutting down');
  } finally {
    await fx.stop();
  }
  console.log('done: no process and no temp dir left behind');
}

main().then(
  () => process.exit(0),
  (error: Error) => {
    console.error(`demo-capi failed: ${error.message}`);
    process.exit(1);
  },
);
