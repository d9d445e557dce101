// kubelet-sim: join one simulated node from a kubeadm JoinConfiguration (token discovery, or file
// discovery reading discovery.file.kubeConfigPath from this machine's disk, as kubeadm does).
//   kubelet-sim join --config join.yaml --name NAME [--write-kubeconfig PATH] [--timeout 60s]
// Exits 0 once the Node exists; otherwise prints one line to stderr and exits 1 (2: usage).
import { readFileSync, writeFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { kubeconfigYaml } from '../cluster/controlplane.ts';
import { parseJoinConfiguration } from './join-config.ts';
import { SimulatedKubelet } from './kubelet.ts';

const USAGE =
  'usage: kubelet-sim join --config FILE --name NODE [--write-kubeconfig PATH] [--timeout SECONDS]';

async function main(argv: string[]): Promise<number> {
  const [command, ...rest] = argv;
  if (command !== 'join') {
    process.stderr.write(`${USAGE}\n`);
    return 2;
  }
  let values: { config?: string; name?: string; 'write-kubeconfig'?: string; timeout?: string };
  try {
    ({ values } = parseArgs({
      args: rest,
      options: {
        config: { type: 'string' },
        name: { type: 'string' },
        'write-kubeconfig': { type: 'string' },
        timeout: { type: 'string' },
      },
    }));
  } catch (error) {
    process.stderr.write(`kubelet-sim: ${(error as Error).message}\n${USAGE}\n`);
    return 2;
  }
  if (!values.config) {
    process.stderr.write(`kubelet-sim: --config is required\n${USAGE}\n`);
    return 2;
  }
  const settings = parseJoinConfiguration(readFileSync(values.config, 'utf8'));
  const name = values.name ?? settings.nodeName;
  if (!name) {
    process.stderr.write(
      `kubelet-sim: --name is required (or nodeRegistration.name in the config)\n${USAGE}\n`,
    );
    return 2;
  }
  const timeoutMs = values.timeout ? Number(values.timeout) * 1000 : 60_000;
  const kubelet = new SimulatedKubelet(name, settings, { timeoutMs });
  try {
    const identity = await kubelet.join();
    if (values['write-kubeconfig']) {
      writeFileSync(
        values['write-kubeconfig'],
        kubeconfigYaml(
          identity.server,
          identity.caPem,
          { certPem: identity.certPem, keyPem: identity.keyPem },
          name,
        ),
        { mode: 0o600 },
      );
    }
    await kubelet.reportStatus();
    process.stdout.write(`node ${name} joined (CSR ${kubelet.csrName})\n`);
    return 0;
  } finally {
    kubelet.stop();
  }
}

main(process.argv.slice(2)).then(
  (code) => process.exit(code),
  (error: Error) => {
    process.stderr.write(`kubelet-sim: join failed: ${error.message}\n`);
    process.exit(1);
  },
);
