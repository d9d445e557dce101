// Fills a paused KubeadmConfig with the token the workload cluster's issuer issued for it, purely:
// the object as the API server returned it in, the object to write back out (one Update, with its
// resourceVersion as the precondition). What it changes, all at once so no reader ever sees half:
//   - joinConfiguration.discovery: file discovery (the discovery kubeconfig: cluster CA and API
//     server, no secret) plus tlsBootstrapToken. With discovery.file set, CABPK creates, refreshes
//     and rotates no token of its own (reconcileDiscovery; the refresh runs only for bootstrapToken);
//   - the discovery kubeconfig as one of spec.files, at the path the JoinConfiguration reads;
//   - nodeRegistration: the issuer's node labels (the flavor token, the joined mark) merged into the
//     one `node-labels` kubelet argument, its quarantine taint, and the Machine's name when pinned;
//   - metadata: the token's public ID recorded, and Cluster API's pause lifted so CABPK renders it.
// The node labels and taint are taken from the JoinConfiguration the issuer rendered, so the
// Machine registers exactly as any node joining with that token would (the token label key and
// quarantine taint are the issuer's settings, not repeated here).
import { parse } from 'yaml';
import type { Secret } from '../flavor/secret.ts';
import { PAUSED_ANNOTATION, TOKEN_ID_ANNOTATION } from './resources.ts';

/** What of the issuer's answer to POST /v1/tokens a fill needs (the two holding tokens kept as secrets). */
export interface IssuedMaterial {
  tokenID: string;
  bootstrapToken: Secret;
  /** The issuer's JoinConfiguration: both tokens are in it. */
  joinConfiguration: Secret;
  discoveryKubeconfig: string;
  discoveryKubeconfigPath: string;
}

interface Arg {
  name: string;
  value: string;
}
interface Taint {
  key: string;
  value?: string;
  effect: string;
}
type Json = Record<string, unknown>;

const asObject = (value: unknown): Json =>
  typeof value === 'object' && value !== null && !Array.isArray(value) ? (value as Json) : {};

/** The node labels and taints the issuer asked for (its JoinConfiguration's nodeRegistration). */
export function issuedRegistration(joinConfiguration: Secret): { nodeLabels: string[]; taints: Taint[] } {
  // The document holds the tokens: an error here must not quote it.
  let document: Json;
  try {
    document = asObject(parse(joinConfiguration.reveal()));
  } catch {
    throw new Error('the issuer answered a JoinConfiguration that is not YAML');
  }
  const registration = asObject(document.nodeRegistration);
  const args = Array.isArray(registration.kubeletExtraArgs) ? (registration.kubeletExtraArgs as Arg[]) : [];
  const labels = args.find((a) => a?.name === 'node-labels')?.value;
  if (typeof labels !== 'string' || labels === '')
    throw new Error('the issuer answered a JoinConfiguration without node labels');
  const taints = Array.isArray(registration.taints) ? (registration.taints as Taint[]) : [];
  return { nodeLabels: labels.split(','), taints };
}

const labelKey = (label: string) => label.split('=')[0] ?? '';

/** `node-labels` with the issued labels: any earlier value of their keys replaced, others kept. */
function mergedLabelsArg(args: Arg[], issued: string[]): Arg[] {
  const keys = new Set(issued.map(labelKey));
  const existing = args.find((a) => a.name === 'node-labels');
  const kept = (existing?.value ?? '')
    .split(',')
    .filter((label) => label !== '' && !keys.has(labelKey(label)));
  const value = [...kept, ...issued].join(',');
  return [...args.filter((a) => a.name !== 'node-labels'), { name: 'node-labels', value }];
}

function mergedTaints(taints: Taint[], issued: Taint[]): Taint[] {
  const keys = new Set(issued.map((t) => `${t.key}:${t.effect}`));
  return [...taints.filter((t) => !keys.has(`${t.key}:${t.effect}`)), ...issued];
}

/**
 * The KubeadmConfig to write: `raw` (as read, with its resourceVersion) filled with the material.
 * `nodeName`: pin the node's name to it (the token is pinned to the same name).
 */
export function filledKubeadmConfig(raw: Json, material: IssuedMaterial, nodeName: string | undefined): Json {
  const { nodeLabels, taints } = issuedRegistration(material.joinConfiguration);
  const object = structuredClone(raw);
  const metadata = asObject(object.metadata);
  const annotations: Record<string, string> = {
    ...(asObject(metadata.annotations) as Record<string, string>),
  };
  delete annotations[PAUSED_ANNOTATION];
  annotations[TOKEN_ID_ANNOTATION] = material.tokenID;
  object.metadata = { ...metadata, annotations };

  const spec = asObject(object.spec);
  const join = asObject(spec.joinConfiguration);
  const registration = asObject(join.nodeRegistration);
  const args = Array.isArray(registration.kubeletExtraArgs) ? (registration.kubeletExtraArgs as Arg[]) : [];
  const existingTaints = Array.isArray(registration.taints) ? (registration.taints as Taint[]) : [];
  const files = Array.isArray(spec.files) ? (spec.files as Json[]) : [];
  object.spec = {
    ...spec,
    joinConfiguration: {
      ...join,
      // Exactly these: bootstrapToken and file are mutually exclusive, and a bootstrapToken left
      // behind would have CABPK refresh (or mint) a token of its own.
      discovery: {
        file: { kubeConfigPath: material.discoveryKubeconfigPath },
        tlsBootstrapToken: material.bootstrapToken.reveal(),
      },
      nodeRegistration: {
        ...registration,
        ...(nodeName !== undefined ? { name: nodeName } : {}),
        kubeletExtraArgs: mergedLabelsArg(args, nodeLabels),
        taints: mergedTaints(existingTaints, taints),
      },
    },
    files: [
      ...files.filter((f) => f.path !== material.discoveryKubeconfigPath),
      {
        path: material.discoveryKubeconfigPath,
        owner: 'root:root',
        // No secret in it (the cluster CA and API server), as the issuer's own cloud-init writes it.
        permissions: '0644',
        content: material.discoveryKubeconfig,
      },
    ],
  };
  return object;
}
