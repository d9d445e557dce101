// Renders what a node administrator needs to join a node: a kubeadm JoinConfiguration carrying
// the bootstrap token and the flavor token label, the discovery kubeconfig it points to (file
// discovery, the default; see discovery-kubeconfig.ts), the `kubeadm join` line and a cloud-init
// that writes both files. Pure: no I/O, no clock. The flavor name is deliberately not an input:
// every flavor's material has the same shape and the same byte length (tokens have fixed lengths
// and every string value is quoted the same way), so a token holder cannot tell flavors apart.

import type { ToStringOptions } from 'yaml';
import { Document, Scalar, stringify } from 'yaml';
import type { BootstrapToken } from '../../flavor/bootstrap-token.ts';
import {
  formatBootstrapToken,
  TOKEN_ID_PATTERN,
  TOKEN_SECRET_PATTERN,
} from '../../flavor/bootstrap-token.ts';
import { FLAVOR_TOKEN_PATTERN } from '../../flavor/flavor-token.ts';
import {
  JOINED_LABEL_KEY,
  JOINED_LABEL_VALUE,
  QUARANTINE_TAINT_KEY,
  TOKEN_LABEL_KEY,
} from '../../flavor/resources.ts';
import { rfc3339 } from '../../flavor/rfc3339.ts';
import type { Secret } from '../../flavor/secret.ts';
import {
  ATTEST_SCRIPT_PATH,
  BOOTSTRAP_TOKEN_PLACEHOLDER,
  FLAVOR_TOKEN_PLACEHOLDER,
  ISSUER_CA_PATH,
  JOIN_TEMPLATE_PATH,
  renderAttestScript,
} from '../attestation/attest-script.ts';
import {
  DEFAULT_DISCOVERY_KUBECONFIG_PATH,
  DEFAULT_DISCOVERY_MODE,
  type DiscoveryMode,
  isDiscoveryPath,
  renderDiscoveryKubeconfig,
} from './discovery-kubeconfig.ts';

const DEFAULT_TOKEN_LABEL_KEY = TOKEN_LABEL_KEY;
const DEFAULT_QUARANTINE_TAINT: QuarantineTaint = {
  key: QUARANTINE_TAINT_KEY,
  effect: 'NoSchedule',
};
/**
 * kubeadm's config API the material uses: v1beta4 serves kubeadm 1.31 and later. v1beta3 (kubeadm
 * 1.22–1.36) was dropped because kubeadm 1.37 refuses it ("uses an old API spec"); every variant
 * rendered here passes `kubeadm config validate` of the pinned kubeadm (test/e2e/join-config-validate).
 */
const KUBEADM_API_VERSION = 'kubeadm.k8s.io/v1beta4';
const JOIN_CONFIG_PATH = '/etc/kubernetes/nodeflavor-join.yaml';

interface QuarantineTaint {
  key: string;
  effect: 'NoSchedule';
}

export interface JoinMaterialInput {
  /** `host:port` of the API server, as in kube-public/cluster-info. */
  apiServerEndpoint: string;
  /** `sha256:<64 hex>` of the cluster CA's public key. */
  caCertHash: string;
  /** The cluster CA certificate(s), PEM: what the discovery kubeconfig carries. */
  caCertPem: string;
  /** How kubeadm trusts the API server: `file` (default, no cluster-info signature) or `token`. */
  discovery?: DiscoveryMode;
  /** Where the JoinConfiguration expects the discovery kubeconfig (file discovery). */
  discoveryKubeconfigPath?: string;
  token: BootstrapToken;
  flavorToken: Secret;
  expiresAt: Date;
  tokenLabelKey?: string;
  /** Taint the node registers with until the controller verifies it; null registers none. */
  quarantineTaint?: QuarantineTaint | null;
}

/**
 * The rendered material. It holds the bootstrap token and the flavor token in clear text, as plain
 * strings: it exists only to become the issuer's HTTP response body or the CLI's output, and must
 * never be logged, stored in a resource or put in an error.
 */
export interface JoinMaterial {
  /** The JoinConfiguration YAML (contains both tokens). */
  joinConfiguration: string;
  /**
   * The command to run with the JoinConfiguration saved as join.yaml (with file discovery, the
   * discovery kubeconfig installed at discoveryKubeconfigPath first).
   */
  joinCommand: string;
  /** A #cloud-config that writes the discovery kubeconfig (file discovery) and the JoinConfiguration, and joins. */
  cloudInit: string;
  apiServerEndpoint: string;
  caCertHash: string;
  tokenId: string;
  /** RFC 3339, UTC, whole seconds: always 20 characters. */
  expiresAt: string;
  discovery: DiscoveryMode;
  /** The discovery kubeconfig (no secret; the same for every token of the cluster). */
  discoveryKubeconfig: string;
  /** Where the JoinConfiguration reads it (file discovery). */
  discoveryKubeconfigPath: string;
  /**
   * Attested tokens only (ADR 0014): the node-side script the cloud-init installs and runs. Then
   * joinConfiguration is a template holding no secret; the script fills in what the TPM earns.
   */
  attestScript?: string;
}

/** What attested material needs besides the cluster's join facts: no secret at all. */
export interface AttestedMaterialInput extends Omit<JoinMaterialInput, 'token' | 'flavorToken'> {
  tokenId: string;
  /** Where nodes reach the issuer, and the CA they trust it with (else the system's). */
  issuerUrl: string;
  issuerCaPem?: string;
}

/**
 * Material for a token bound to a TPM: the JoinConfiguration with placeholders where the tokens
 * go, the attestation script, and a cloud-init that installs both and runs the script. It holds
 * nothing secret, and nothing that differs between flavors.
 */
export function renderAttestedJoinMaterial(input: AttestedMaterialInput): JoinMaterial {
  const shape = documentShape(input);
  if (!TOKEN_ID_PATTERN.test(input.tokenId)) throw new Error('join material: the token ID is malformed');
  const { discovery, discoveryKubeconfig, discoveryKubeconfigPath } = shape;
  const { joinConfiguration } = renderDocumentsDirectly(
    shape,
    BOOTSTRAP_TOKEN_PLACEHOLDER,
    FLAVOR_TOKEN_PLACEHOLDER,
  );
  const attestScript = renderAttestScript({
    issuerUrl: input.issuerUrl,
    tokenId: input.tokenId,
    pinnedCa: input.issuerCaPem !== undefined,
    joinConfigPath: JOIN_CONFIG_PATH,
  });
  const files = [
    ...(discovery === 'file'
      ? [{ path: discoveryKubeconfigPath, permissions: '0644', content: discoveryKubeconfig }]
      : []),
    ...(input.issuerCaPem !== undefined
      ? [{ path: ISSUER_CA_PATH, permissions: '0644', content: input.issuerCaPem }]
      : []),
    { path: JOIN_TEMPLATE_PATH, permissions: '0600', content: joinConfiguration },
    { path: ATTEST_SCRIPT_PATH, permissions: '0700', content: attestScript },
  ];
  return {
    joinConfiguration,
    joinCommand: ATTEST_SCRIPT_PATH,
    cloudInit: cloudConfig(files, [ATTEST_SCRIPT_PATH]),
    apiServerEndpoint: input.apiServerEndpoint,
    caCertHash: input.caCertHash,
    tokenId: input.tokenId,
    expiresAt: rfc3339(input.expiresAt),
    discovery,
    discoveryKubeconfig,
    discoveryKubeconfigPath,
    attestScript,
  };
}

const ENDPOINT_PATTERN = /^(?:\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9](?:[A-Za-z0-9.-]*[A-Za-z0-9])?):([0-9]{1,5})$/;
const CA_CERT_HASH_PATTERN = /^sha256:[0-9a-f]{64}$/;
const QUALIFIED_NAME_PATTERN =
  /^(?:[a-z0-9](?:[-a-z0-9.]{0,251}[a-z0-9])?\/)?[A-Za-z0-9](?:[-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$/;

/**
 * Every string value double-quoted, never folded: a plain scalar would be quoted only when its
 * content happens to look like a number (a token such as `123456.7890123456789012`), and that
 * would make the length depend on the token. Mapping keys stay plain (they are constants).
 */
const YAML_OPTIONS: ToStringOptions = {
  defaultStringType: 'QUOTE_DOUBLE',
  defaultKeyType: 'PLAIN',
  lineWidth: 0,
};

export function renderJoinMaterial(input: JoinMaterialInput): JoinMaterial {
  const shape = documentShape(input);
  checkTokens(input);
  const { discovery, discoveryKubeconfig, discoveryKubeconfigPath } = shape;

  // The documents differ from token to token only in the two tokens, which have fixed lengths and
  // need no quoting: they are rendered once per cluster and settings with placeholders, and each
  // token fills those in (rendering the YAML was ~6% of the issuer's CPU per token).
  const { joinConfiguration, cloudInit } = renderDocuments(
    shape,
    formatBootstrapToken(input.token),
    input.flavorToken.reveal(),
  );

  return {
    joinConfiguration,
    joinCommand: 'kubeadm join --config join.yaml',
    cloudInit,
    apiServerEndpoint: input.apiServerEndpoint,
    caCertHash: input.caCertHash,
    tokenId: input.token.id,
    expiresAt: rfc3339(input.expiresAt),
    discovery,
    discoveryKubeconfig,
    discoveryKubeconfigPath,
  };
}

/** The input's settings with their defaults, checked (the checks never echo a token). */
function documentShape(input: Omit<JoinMaterialInput, 'token' | 'flavorToken'>): DocumentShape {
  const tokenLabelKey = input.tokenLabelKey ?? DEFAULT_TOKEN_LABEL_KEY;
  const quarantineTaint =
    input.quarantineTaint === undefined ? DEFAULT_QUARANTINE_TAINT : input.quarantineTaint;
  const discoveryKubeconfigPath = input.discoveryKubeconfigPath ?? DEFAULT_DISCOVERY_KUBECONFIG_PATH;
  checkInput(input, tokenLabelKey, quarantineTaint, discoveryKubeconfigPath);
  return {
    apiServerEndpoint: input.apiServerEndpoint,
    caCertHash: input.caCertHash,
    discovery: input.discovery ?? DEFAULT_DISCOVERY_MODE,
    discoveryKubeconfigPath,
    discoveryKubeconfig: renderDiscoveryKubeconfig(input),
    tokenLabelKey,
    quarantineTaint,
  };
}

/** Everything the two documents depend on besides the tokens. */
export interface DocumentShape {
  apiServerEndpoint: string;
  caCertHash: string;
  discovery: DiscoveryMode;
  discoveryKubeconfigPath: string;
  discoveryKubeconfig: string;
  tokenLabelKey: string;
  quarantineTaint: QuarantineTaint | null;
}

interface Documents {
  joinConfiguration: string;
  cloudInit: string;
}

/** The JoinConfiguration and the cloud-init for one token, rendered with the YAML library. */
export function renderDocumentsDirectly(shape: DocumentShape, token: string, flavorToken: string): Documents {
  // The joined mark too: a Node registered as issued is quarantined and marked already, so its
  // registration never waits on the mutating webhook (ADR 0012), whose answer it would not change.
  const nodeLabels = `${shape.tokenLabelKey}=${flavorToken},${JOINED_LABEL_KEY}=${JOINED_LABEL_VALUE}`;
  const joinConfiguration = stringify(
    {
      apiVersion: KUBEADM_API_VERSION,
      kind: 'JoinConfiguration',
      discovery: {
        // file: kubeadm trusts the CA in the discovery kubeconfig and talks to its server; the
        // token serves only the TLS bootstrap. token: the CA pin and cluster-info's JWS.
        ...(shape.discovery === 'file'
          ? { file: { kubeConfigPath: shape.discoveryKubeconfigPath } }
          : {
              bootstrapToken: {
                token,
                apiServerEndpoint: shape.apiServerEndpoint,
                caCertHashes: [shape.caCertHash],
              },
            }),
        tlsBootstrapToken: token,
      },
      // No `name`: the node's own hostname (kubeadm's default) names it; the controller binds
      // the name from the CSR the node makes, not from anything in this file.
      nodeRegistration: {
        kubeletExtraArgs: [{ name: 'node-labels', value: nodeLabels }],
        taints: shape.quarantineTaint
          ? [{ key: shape.quarantineTaint.key, effect: shape.quarantineTaint.effect }]
          : [],
      },
    },
    YAML_OPTIONS,
  );
  const cloudInit = renderCloudInit(
    shape.discovery === 'file'
      ? { path: shape.discoveryKubeconfigPath, content: shape.discoveryKubeconfig }
      : undefined,
    joinConfiguration,
  );
  return { joinConfiguration, cloudInit };
}

/** Placeholders of the tokens' exact lengths and alphabets (two pairs: the second checks the first). */
const PLACEHOLDERS = [
  { token: 'qqqqqq.qqqqqqqqqqqqqqqq', flavorToken: 'q'.repeat(52) },
  { token: 'wwwwww.wwwwwwwwwwwwwwww', flavorToken: 'w'.repeat(52) },
] as const;

/** A document cut at its token placeholders: text, then which token, text, ... */
type Template = { texts: string[]; slots: ('token' | 'flavorToken')[] };

function cut(text: string, placeholders: (typeof PLACEHOLDERS)[number]): Template {
  const texts: string[] = [];
  const slots: ('token' | 'flavorToken')[] = [];
  let rest = text;
  for (;;) {
    const t = rest.indexOf(placeholders.token);
    const f = rest.indexOf(placeholders.flavorToken);
    if (t < 0 && f < 0) break;
    const slot = f < 0 || (t >= 0 && t < f) ? 'token' : 'flavorToken';
    const at = slot === 'token' ? t : f;
    texts.push(rest.slice(0, at));
    slots.push(slot);
    rest = rest.slice(at + placeholders[slot].length);
  }
  texts.push(rest);
  return { texts, slots };
}

function fill(template: Template, values: { token: string; flavorToken: string }): string {
  let text = template.texts[0] ?? '';
  for (const [i, slot] of template.slots.entries()) text += values[slot] + (template.texts[i + 1] ?? '');
  return text;
}

let lastTemplates:
  | { shape: DocumentShape; templates: { joinConfiguration: Template; cloudInit: Template } | null }
  | undefined;

function sameShape(a: DocumentShape, b: DocumentShape): boolean {
  return (
    a.apiServerEndpoint === b.apiServerEndpoint &&
    a.caCertHash === b.caCertHash &&
    a.discovery === b.discovery &&
    a.discoveryKubeconfigPath === b.discoveryKubeconfigPath &&
    a.discoveryKubeconfig === b.discoveryKubeconfig &&
    a.tokenLabelKey === b.tokenLabelKey &&
    a.quarantineTaint?.key === b.quarantineTaint?.key &&
    a.quarantineTaint?.effect === b.quarantineTaint?.effect
  );
}

/**
 * The documents for one token: from the templates of the last shape when they reproduce a direct
 * rendering exactly (checked once per shape with a second set of placeholders), else directly.
 */
function renderDocuments(shape: DocumentShape, token: string, flavorToken: string): Documents {
  if (!lastTemplates || !sameShape(lastTemplates.shape, shape))
    lastTemplates = { shape, templates: buildTemplates(shape) };
  const templates = lastTemplates.templates;
  if (!templates) return renderDocumentsDirectly(shape, token, flavorToken);
  const values = { token, flavorToken };
  return {
    joinConfiguration: fill(templates.joinConfiguration, values),
    cloudInit: fill(templates.cloudInit, values),
  };
}

function buildTemplates(shape: DocumentShape): { joinConfiguration: Template; cloudInit: Template } | null {
  const [first, second] = PLACEHOLDERS;
  const withFirst = renderDocumentsDirectly(shape, first.token, first.flavorToken);
  const templates = {
    joinConfiguration: cut(withFirst.joinConfiguration, first),
    cloudInit: cut(withFirst.cloudInit, first),
  };
  // A placeholder that also occurred in the cluster's own data would be cut wrongly: then the
  // second rendering differs from the template filled with it, and every token is rendered directly.
  const withSecond = renderDocumentsDirectly(shape, second.token, second.flavorToken);
  const same =
    fill(templates.joinConfiguration, second) === withSecond.joinConfiguration &&
    fill(templates.cloudInit, second) === withSecond.cloudInit;
  return same ? templates : null;
}

function renderCloudInit(
  discoveryFile: { path: string; content: string } | undefined,
  joinConfiguration: string,
): string {
  // The discovery kubeconfig holds no secret (CA and server): readable, like cluster-info itself.
  const files = [
    ...(discoveryFile
      ? [{ path: discoveryFile.path, permissions: '0644', content: discoveryFile.content }]
      : []),
    { path: JOIN_CONFIG_PATH, permissions: '0600', content: joinConfiguration },
  ];
  return cloudConfig(files, ['kubeadm', 'join', '--config', JOIN_CONFIG_PATH]);
}

/** A #cloud-config that writes `files` (owned by root) and runs one command. */
function cloudConfig(
  files: { path: string; permissions: string; content: string }[],
  command: string[],
): string {
  const document = new Document({
    write_files: files.map(({ path, permissions, content }) => ({
      path,
      permissions,
      owner: 'root:root',
      content,
    })),
    runcmd: [command],
  });
  // The embedded documents read best, and are copied most faithfully, as literal blocks.
  for (const index of files.keys()) {
    const content = document.getIn(['write_files', index, 'content'], true);
    if (content instanceof Scalar) content.type = Scalar.BLOCK_LITERAL;
  }
  return '#cloud-config\n' + document.toString(YAML_OPTIONS);
}

// The checks name the offending field; they never echo a token.
function checkTokens(input: Pick<JoinMaterialInput, 'token' | 'flavorToken'>): void {
  if (!TOKEN_ID_PATTERN.test(input.token.id) || !TOKEN_SECRET_PATTERN.test(input.token.secret.reveal())) {
    throw new Error('join material: the bootstrap token is malformed');
  }
  if (!FLAVOR_TOKEN_PATTERN.test(input.flavorToken.reveal())) {
    throw new Error('join material: the flavor token is malformed (expected 52 characters of [a-z2-7])');
  }
}

function checkInput(
  input: Omit<JoinMaterialInput, 'token' | 'flavorToken'>,
  tokenLabelKey: string,
  quarantineTaint: QuarantineTaint | null,
  discoveryKubeconfigPath: string,
): void {
  const endpoint = ENDPOINT_PATTERN.exec(input.apiServerEndpoint);
  const port = Number(endpoint?.[1]);
  if (!endpoint || port < 1 || port > 65535) {
    throw new Error(
      `join material: apiServerEndpoint '${input.apiServerEndpoint}' is not host:port (use [addr]:port for IPv6)`,
    );
  }
  if (!CA_CERT_HASH_PATTERN.test(input.caCertHash)) {
    throw new Error(`join material: caCertHash '${input.caCertHash}' is not sha256:<64 lowercase hex>`);
  }
  const year = input.expiresAt.getUTCFullYear();
  if (Number.isNaN(year) || year < 1970 || year > 9999) {
    throw new Error('join material: expiresAt is not a valid date between 1970 and 9999');
  }
  if (!QUALIFIED_NAME_PATTERN.test(tokenLabelKey)) {
    throw new Error(`join material: tokenLabelKey '${tokenLabelKey}' is not a valid label key`);
  }
  if (quarantineTaint && !QUALIFIED_NAME_PATTERN.test(quarantineTaint.key)) {
    throw new Error(`join material: quarantine taint key '${quarantineTaint.key}' is not a valid taint key`);
  }
  if (!isDiscoveryPath(discoveryKubeconfigPath) || discoveryKubeconfigPath === JOIN_CONFIG_PATH) {
    throw new Error(
      `join material: discoveryKubeconfigPath '${discoveryKubeconfigPath}' is not an absolute file path of its own`,
    );
  }
}
