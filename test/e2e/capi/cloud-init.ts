// Reads the bootstrap data CABPK renders for a worker (cloud-config format: write_files, then a
// runcmd of `kubeadm join --config /run/kubeadm/kubeadm-join-config.yaml && echo success > …`)
// into what a real node runs: the JoinConfiguration, the other files and the command. Anything
// this stand-in cannot carry out faithfully (other commands, jinja templates, encodings, files
// outside the node's own directories) is refused with the reason, never skipped.
import { parse } from 'yaml';

export const JOIN_CONFIG_PATH = '/run/kubeadm/kubeadm-join-config.yaml';
const SENTINEL_DIR = '/run/cluster-api/';
const JOIN_COMMAND =
  /^kubeadm join --config \/run\/kubeadm\/kubeadm-join-config\.yaml\s*(?:--v \d+\s*)?&& echo success > \/run\/cluster-api\/bootstrap-success\.complete$/;

export interface BootstrapFile {
  path: string;
  permissions: string;
  content: string;
}

export interface NodeBootstrap {
  joinConfiguration: string;
  /** The files written besides the join configuration and Cluster API's own marker files. */
  files: BootstrapFile[];
}

export function parseBootstrapData(value: string): NodeBootstrap {
  if (!/^(## template: jinja\n)?#cloud-config\n/.test(value))
    throw new Error('the bootstrap data is not a cloud-config (Ignition is not supported by the stand-in)');
  const document = parse(value) as {
    write_files?: { path: string; permissions?: string; content?: string; encoding?: string }[];
    runcmd?: unknown[];
  };
  let joinConfiguration: string | undefined;
  const files: BootstrapFile[] = [];
  for (const file of document.write_files ?? []) {
    if (file.encoding !== undefined && file.encoding !== 'plain')
      throw new Error(`write_files ${file.path}: encoding ${file.encoding} is not supported by the stand-in`);
    const content = file.content ?? '';
    if (content.includes('{{') || content.includes('{%'))
      throw new Error(`write_files ${file.path}: jinja templating is not supported by the stand-in`);
    if (file.path === JOIN_CONFIG_PATH) joinConfiguration = content;
    else if (file.path.startsWith(SENTINEL_DIR)) continue;
    else files.push({ path: file.path, permissions: file.permissions ?? '0644', content });
  }
  if (joinConfiguration === undefined) throw new Error(`the bootstrap data writes no ${JOIN_CONFIG_PATH}`);
  const commands = document.runcmd ?? [];
  if (commands.length !== 1 || typeof commands[0] !== 'string' || !JOIN_COMMAND.test(commands[0].trim()))
    throw new Error(
      `the bootstrap data runs ${JSON.stringify(commands).slice(0, 200)}: the stand-in runs only CABPK's kubeadm join`,
    );
  return { joinConfiguration, files };
}
