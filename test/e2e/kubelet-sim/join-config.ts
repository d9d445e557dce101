// Reads a kubeadm JoinConfiguration (kubeadm.k8s.io/v1beta3 or v1beta4) — the file a node
// admin passes to `kubeadm join --config` — into what the simulated kubelet needs: token discovery
// (discovery.bootstrapToken) or file discovery (discovery.file.kubeConfigPath), as kubeadm reads them.
import { parse } from 'yaml';
import { z } from 'zod';

const taint = z.object({ key: z.string().min(1), value: z.string().optional(), effect: z.string().min(1) });

const joinConfiguration = z.object({
  apiVersion: z.enum(['kubeadm.k8s.io/v1beta3', 'kubeadm.k8s.io/v1beta4']),
  kind: z.literal('JoinConfiguration'),
  discovery: z.object({
    bootstrapToken: z
      .object({
        token: z.string().min(1),
        apiServerEndpoint: z.string().min(1),
        caCertHashes: z.array(z.string()).optional(),
        unsafeSkipCAVerification: z.boolean().optional(),
      })
      .optional(),
    file: z.object({ kubeConfigPath: z.string().min(1) }).optional(),
    tlsBootstrapToken: z.string().optional(),
  }),
  nodeRegistration: z
    .object({
      name: z.string().optional(),
      // v1beta3: a map; v1beta4: a list of {name, value} (repeatable flags).
      kubeletExtraArgs: z
        .union([z.record(z.string(), z.string()), z.array(z.object({ name: z.string(), value: z.string() }))])
        .optional(),
      taints: z.array(taint).nullable().optional(),
    })
    .optional(),
});

/** Token discovery: cluster-info's JWS signed with the token, and the CA pinned by its hash. */
export interface TokenDiscovery {
  kind: 'token';
  apiServerEndpoint: string;
  token: string;
  caCertHashes: string[];
  unsafeSkipCAVerification: boolean;
}

/** File discovery: a kubeconfig on the node names the API server and the CA to trust. */
export interface FileDiscovery {
  kind: 'file';
  kubeConfigPath: string;
}

export interface JoinSettings {
  discovery: TokenDiscovery | FileDiscovery;
  tlsBootstrapToken: string;
  nodeName?: string;
  nodeLabels: Record<string, string>;
  taints: { key: string; value?: string; effect: string }[];
}

function extraArgs(
  raw: Record<string, string> | { name: string; value: string }[] | undefined,
): Map<string, string> {
  if (!raw) return new Map();
  if (Array.isArray(raw)) return new Map(raw.map((arg) => [arg.name, arg.value]));
  return new Map(Object.entries(raw));
}

/** kubelet's --node-labels syntax: comma-separated key=value pairs. */
export function parseNodeLabels(flag: string | undefined): Record<string, string> {
  const labels: Record<string, string> = {};
  for (const pair of (flag ?? '').split(',')) {
    if (pair.trim() === '') continue;
    const at = pair.indexOf('=');
    if (at <= 0) throw new Error(`invalid --node-labels entry (want key=value): ${pair.split('=')[0]}`);
    labels[pair.slice(0, at).trim()] = pair.slice(at + 1).trim();
  }
  return labels;
}

export function parseJoinConfiguration(text: string): JoinSettings {
  let document: unknown;
  try {
    // A multi-document file may also hold a KubeletConfiguration: take the JoinConfiguration.
    const documents = text.split(/^---\s*$/m).map((part) => parse(part) as unknown);
    document =
      documents.find((doc) => (doc as { kind?: string } | null)?.kind === 'JoinConfiguration') ??
      documents[0];
  } catch (error) {
    throw new Error(`join configuration is not valid YAML: ${(error as Error).message}`);
  }
  const result = joinConfiguration.safeParse(document);
  if (!result.success) {
    const problem = result.error.issues[0];
    throw new Error(`invalid JoinConfiguration: ${problem?.path.join('.') || '(root)'}: ${problem?.message}`);
  }
  const config = result.data;
  const args = extraArgs(config.nodeRegistration?.kubeletExtraArgs);
  const settings: JoinSettings = {
    discovery: discoveryOf(config.discovery),
    tlsBootstrapToken: config.discovery.tlsBootstrapToken ?? config.discovery.bootstrapToken?.token ?? '',
    nodeLabels: parseNodeLabels(args.get('node-labels')),
    taints: config.nodeRegistration?.taints ?? [],
  };
  if (config.nodeRegistration?.name) settings.nodeName = config.nodeRegistration.name;
  return settings;
}

/** kubeadm's rules (ValidateDiscovery): exactly one of bootstrapToken and file; a pin or an explicit skip. */
function discoveryOf(discovery: z.infer<typeof joinConfiguration>['discovery']): JoinSettings['discovery'] {
  const { bootstrapToken, file } = discovery;
  if ((bootstrapToken === undefined) === (file === undefined)) {
    throw new Error('invalid JoinConfiguration: discovery: set exactly one of bootstrapToken and file');
  }
  if (file) {
    if (/^[a-z]+:\/\//i.test(file.kubeConfigPath)) {
      throw new Error('the simulated kubelet reads discovery.file.kubeConfigPath from files only, not URLs');
    }
    // kubeadm would take credentials from the discovery kubeconfig instead; nodeflavor never relies on that.
    if (!discovery.tlsBootstrapToken) {
      throw new Error(
        'invalid JoinConfiguration: file discovery without tlsBootstrapToken is not supported here',
      );
    }
    return { kind: 'file', kubeConfigPath: file.kubeConfigPath };
  }
  const token = bootstrapToken as NonNullable<typeof bootstrapToken>;
  const settings: TokenDiscovery = {
    kind: 'token',
    apiServerEndpoint: token.apiServerEndpoint,
    token: token.token,
    caCertHashes: token.caCertHashes ?? [],
    unsafeSkipCAVerification: token.unsafeSkipCAVerification ?? false,
  };
  if (settings.caCertHashes.length === 0 && !settings.unsafeSkipCAVerification) {
    throw new Error(
      'invalid JoinConfiguration: discovery.bootstrapToken.caCertHashes is empty and unsafeSkipCAVerification is not set',
    );
  }
  return settings;
}
