#!/usr/bin/env node
// kubectl-flavor: the kubectl plugin for flavored join tokens. It acts as the caller (their
// kubeconfig, their RBAC) through the same issuance library as the token-issuer API.
// Exit codes: 0 success, 1 runtime error, 2 usage error; errors are one line on stderr.
import { readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { FLAVOR_CLASS_PLURAL, GROUP, isDnsSubdomain } from '../flavor/resources.ts';
import { ExplainReader } from '../kube/explain-facts.ts';
import { DEFAULT_KEY_SECRET_NAME, loadKeyRing } from '../kube/keyring-store.ts';
import { listNodeFacts } from '../kube/node-list.ts';
import { KubeReviews } from '../kube/reviews.ts';
import { KubeTokenStore } from '../kube/tokens.ts';
import { loadKubeConfig } from '../runtime/config.ts';
import { KubeError } from '../runtime/kube-error.ts';
import type { KubeConfig } from '../runtime/kubeconfig.ts';
import { type IssuanceSettings, IssuanceSettingsSchema } from '../tokenissuer/config.ts';
import { IssuerError } from '../tokenissuer/errors.ts';
import {
  DEFAULT_DISCOVERY_KUBECONFIG_PATH,
  DISCOVERY_MODES,
} from '../tokenissuer/issuance/discovery-kubeconfig.ts';
import {
  discoveryInfo,
  type IssuanceDeps,
  issueToken,
  listTokens,
  revokeToken,
} from '../tokenissuer/issuance/issue.ts';
import { type IssueRequest, validateIssueRequest } from '../tokenissuer/request.ts';
import { issueResponse } from '../tokenissuer/response.ts';
import { explainNode, explainToken, nodeReason } from './explain.ts';
import { keysUsageError, runKeys } from './flavor-keys.ts';
import { asJson, asYaml, nodesTable, table, tokensTable } from './flavor-output.ts';

const PROGRAM = 'kubectl-flavor';
const DEFAULT_KEY_SECRET = `nodeflavor/${DEFAULT_KEY_SECRET_NAME}`;
/** The issuer's defaults: the CLI mints exactly what the API mints. */
const SETTINGS = IssuanceSettingsSchema.parse({});

const USAGE = `Usage: kubectl flavor <command> [flags]

Commands:
  issue --flavor F [--ttl 1h | --expires-at T] [--max-uses N]
        [--node-name N | --node-name-pattern P] [--description D]
        [--discovery file|token]
        [--ek-certificate FILE | --ek-public-key FILE] [--allow-rejoin]
        [--attestation-url URL] [--attestation-ca-file F] [--tpm-manufacturer-ca-file F]
        [--tpm-manufacturer-crl-file F]
        [-o yaml|json|join|cloud-init]    issue a join token for flavor F (bound to a
                                          machine's TPM with --ek-*: docs/token-issuer.md)
  discovery [-o kubeconfig|json|yaml]     the discovery kubeconfig nodes need (no secret): install
                                          it once per machine at ${DEFAULT_DISCOVERY_KUBECONFIG_PATH}
  list [-o table|json|yaml]               list issued tokens (no secrets)
  revoke ID                               revoke a token (its name ft-<id> or its token ID)
  flavors                                 list FlavorClasses and whether you may use them
  nodes                                   list nodes with their flavor, verification state and,
                                          for unverified ones, the REASON
  explain NODE | node NODE | token ID     what nodeflavor concluded about a node (or a token) and
                                          why: the token, the CSR, the check that failed, what to do
  keys list [-o table|json|yaml]          list the HMAC keys: ids and states, never key material
  keys add                                add a verify-only key (verifies at once, signs nothing yet)
  keys activate ID                        make key ID active; the old active key turns verify-only
  keys retire ID                          drop verify-only key ID: tokens it derived stop verifying
  keys init                               start a new ring when the key Secret is lost for good

Flags:
  --kubeconfig PATH      kubeconfig to use (default: $KUBECONFIG, ~/.kube/config, in-cluster)
  --key-secret NS/NAME   the HMAC key Secret (issue, keys; default ${DEFAULT_KEY_SECRET})
  --bootstrap-group G    the token's bootstrap group (issue; default ${SETTINGS.authExtraGroups}:
                         keep it equal to the operator's --bootstrap-group)
  -h, --help             show this help

-o join prints the kubeadm JoinConfiguration (run: kubeadm join --config <file>). With file
discovery (the default) it reads the cluster CA and API server from the discovery kubeconfig:
install that first (kubectl flavor discovery > ${DEFAULT_DISCOVERY_KUBECONFIG_PATH}).
--discovery token pins the CA by hash instead and needs no such file, but every live token then
adds a signature to kube-public/cluster-info (see docs/token-issuer.md#discovery).
-o cloud-init prints a #cloud-config that writes both files and joins; -o yaml/json print everything.
Rotate keys with add, then activate; retire the old key once no token it derived is needed
(docs/operations.md#hmac-key-rotation). The keys commands need get and update on the key Secret.
`;

class UsageError extends Error {}

const OPTIONS = {
  kubeconfig: { type: 'string' },
  'key-secret': { type: 'string' },
  'bootstrap-group': { type: 'string' },
  help: { type: 'boolean', short: 'h' },
  flavor: { type: 'string' },
  ttl: { type: 'string' },
  'expires-at': { type: 'string' },
  'max-uses': { type: 'string' },
  'node-name': { type: 'string' },
  'node-name-pattern': { type: 'string' },
  description: { type: 'string' },
  output: { type: 'string', short: 'o' },
  discovery: { type: 'string' },
  'ek-certificate': { type: 'string' },
  'ek-public-key': { type: 'string' },
  'allow-rejoin': { type: 'boolean' },
  'attestation-url': { type: 'string' },
  'attestation-ca-file': { type: 'string' },
  'tpm-manufacturer-ca-file': { type: 'string' },
  'tpm-manufacturer-crl-file': { type: 'string' },
} as const;

type Values = ReturnType<typeof parseArgs<{ options: typeof OPTIONS; allowPositionals: true }>>['values'];

const COMMAND_FLAGS: Readonly<Record<string, readonly string[]>> = {
  issue: [
    'flavor',
    'ttl',
    'expires-at',
    'max-uses',
    'node-name',
    'node-name-pattern',
    'description',
    'output',
    'key-secret',
    'bootstrap-group',
    'discovery',
    'ek-certificate',
    'ek-public-key',
    'allow-rejoin',
    'attestation-url',
    'attestation-ca-file',
    'tpm-manufacturer-ca-file',
    'tpm-manufacturer-crl-file',
  ],
  discovery: ['output'],
  list: ['output'],
  revoke: [],
  flavors: [],
  nodes: [],
  explain: [],
  keys: ['output', 'key-secret'],
};
const COMMON_FLAGS = ['kubeconfig', 'help'];

/** Request fields as the flags that set them, so validation errors speak the CLI's language. */
const FLAG_OF_FIELD: Readonly<Record<string, string>> = {
  flavorClassName: '--flavor',
  ttl: '--ttl',
  expiresAt: '--expires-at',
  maxUses: '--max-uses',
  nodeName: '--node-name',
  nodeNamePattern: '--node-name-pattern',
  description: '--description',
  attestation: '--ek-certificate/--ek-public-key',
  'attestation.ekCertificate': '--ek-certificate',
  'attestation.ekPublicKey': '--ek-public-key',
};

interface Io {
  stdout: (text: string) => void;
  stderr: (text: string) => void;
}

export async function main(argv: string[], io: Io): Promise<number> {
  let values: Values;
  let positionals: string[];
  try {
    ({ values, positionals } = parseArgs({
      args: argv,
      options: OPTIONS,
      allowPositionals: true,
      strict: true,
    }));
  } catch (error) {
    return fail(io, new UsageError((error as Error).message));
  }
  const [command, ...rest] = positionals;
  if (values.help || command === 'help') {
    io.stdout(USAGE);
    return 0;
  }
  try {
    // Every usage check comes before the cluster is contacted, so that bad usage is always exit 2.
    checkUsage(command, values, rest);
    const issueFlags = command === 'issue' ? parseIssueFlags(values) : undefined;
    const keySecret = command === 'keys' ? parseKeySecret(values) : undefined;
    const kubeConfig = loadKubeConfig(values.kubeconfig);
    switch (command) {
      case 'issue':
        return await issue(kubeConfig, issueFlags!, io);
      case 'discovery':
        return await discovery(kubeConfig, values.output ?? 'kubeconfig', io);
      case 'list':
        return await list(kubeConfig, values.output ?? 'table', io);
      case 'revoke':
        return await revoke(kubeConfig, rest[0] ?? '', io);
      case 'flavors':
        return await flavors(kubeConfig, io);
      case 'keys':
        return await runKeys(kubeConfig, keySecret!, rest, values.output ?? 'table', io);
      case 'explain':
        return await explain(kubeConfig, rest, io);
      default:
        return await nodes(kubeConfig, io);
    }
  } catch (error) {
    return fail(io, error);
  }
}

function checkUsage(command: string | undefined, values: Values, rest: string[]): asserts command is string {
  if (command === undefined)
    throw new UsageError(
      'a command is required (issue, discovery, list, revoke, flavors, nodes, explain, keys)',
    );
  const allowed = COMMAND_FLAGS[command];
  if (!allowed) throw new UsageError(`unknown command '${command}'`);
  for (const flag of Object.keys(values)) {
    if (!allowed.includes(flag) && !COMMON_FLAGS.includes(flag)) {
      throw new UsageError(`flag --${flag} does not apply to '${command}'`);
    }
  }
  if (command === 'revoke') {
    if (rest.length !== 1 || !rest[0])
      throw new UsageError('revoke takes exactly one token (its name or token ID)');
  } else if (command === 'explain') {
    const [first, second, ...more] = rest;
    const kinds = ['node', 'token'];
    if (!first || more.length > 0 || (second !== undefined && !kinds.includes(first)))
      throw new UsageError('explain takes a node name, or node NAME, or token ID');
    if (kinds.includes(first) && !second) throw new UsageError(`explain ${first} needs a name`);
    const name = second ?? first;
    if (!kinds.includes(name) && !isDnsSubdomain(name))
      throw new UsageError(
        `'${name}' is not a node name or token (a DNS subdomain, or a 6-character token ID)`,
      );
  } else if (command === 'keys') {
    const problem = keysUsageError(rest);
    if (problem) throw new UsageError(problem);
    if (values.output !== undefined && rest[0] !== 'list')
      throw new UsageError(`flag --output does not apply to 'keys ${rest[0]}'`);
  } else if (rest.length > 0) {
    throw new UsageError(`unexpected argument '${rest[0]}'`);
  }
  if (
    (command === 'list' || command === 'keys') &&
    !['table', 'json', 'yaml'].includes(values.output ?? 'table')
  ) {
    throw new UsageError(`-o ${values.output} is not one of table, json, yaml`);
  }
  if (command === 'discovery' && !['kubeconfig', 'json', 'yaml'].includes(values.output ?? 'kubeconfig')) {
    throw new UsageError(`-o ${values.output} is not one of kubeconfig, json, yaml`);
  }
}

interface IssueFlags {
  request: IssueRequest;
  output: string;
  keySecret: { namespace: string; name: string };
  settings: IssuanceSettings;
}

/** The issue flags as a request, validated (InvalidRequest, exit 2) without touching the cluster. */
function parseIssueFlags(values: Values): IssueFlags {
  const output = values.output ?? 'yaml';
  if (!['yaml', 'json', 'join', 'cloud-init'].includes(output)) {
    throw new UsageError(`-o ${output} is not one of yaml, json, join, cloud-init`);
  }
  if (!values.flavor) throw new UsageError('--flavor is required');
  const maxUses = values['max-uses'];
  if (maxUses !== undefined && !/^[0-9]+$/.test(maxUses)) {
    throw new UsageError('--max-uses must be a whole number (0: no limit)');
  }
  const keySecret = parseKeySecret(values);
  const request: IssueRequest = {
    flavorClassName: values.flavor,
    ...(values.ttl !== undefined ? { ttl: values.ttl } : {}),
    ...(values['expires-at'] !== undefined ? { expiresAt: values['expires-at'] } : {}),
    ...(maxUses !== undefined ? { maxUses: Number(maxUses) } : {}),
    ...(values['node-name'] !== undefined ? { nodeName: values['node-name'] } : {}),
    ...(values['node-name-pattern'] !== undefined ? { nodeNamePattern: values['node-name-pattern'] } : {}),
    ...(values.description !== undefined ? { description: values.description } : {}),
    ...attestationRequest(values),
  };
  const discovery = values.discovery;
  if (discovery !== undefined && !(DISCOVERY_MODES as readonly string[]).includes(discovery)) {
    throw new UsageError(`--discovery must be one of ${DISCOVERY_MODES.join(', ')}`);
  }
  const settings = IssuanceSettingsSchema.safeParse({
    authExtraGroups: values['bootstrap-group'],
    discovery,
    attestation: {
      url: values['attestation-url'],
      issuerCaFile: values['attestation-ca-file'],
      manufacturerCaFile: values['tpm-manufacturer-ca-file'],
      manufacturerCrlFile: values['tpm-manufacturer-crl-file'],
    },
  });
  if (!settings.success) {
    const issue = settings.error.issues[0];
    const flag = issue?.path.includes('attestation') ? '--attestation-url' : '--bootstrap-group';
    throw new UsageError(`${flag} ${issue?.message ?? 'is invalid'}`);
  }
  validateIssueRequest(request, settings.data, new Date());
  return { request, output, keySecret, settings: settings.data };
}

/** --ek-certificate / --ek-public-key (PEM files) and --allow-rejoin as the request's `attestation`. */
function attestationRequest(values: Values): Pick<IssueRequest, 'attestation'> {
  const certificate = values['ek-certificate'];
  const publicKey = values['ek-public-key'];
  if (certificate === undefined && publicKey === undefined) {
    if (values['allow-rejoin'])
      throw new UsageError('--allow-rejoin needs --ek-certificate or --ek-public-key');
    return {};
  }
  const read = (path: string, flag: string) => {
    try {
      return readFileSync(path, 'utf8');
    } catch (error) {
      throw new UsageError(`${flag} ${path}: ${(error as NodeJS.ErrnoException).code ?? 'cannot be read'}`);
    }
  };
  return {
    attestation: {
      ...(certificate !== undefined ? { ekCertificate: read(certificate, '--ek-certificate') } : {}),
      ...(publicKey !== undefined ? { ekPublicKey: read(publicKey, '--ek-public-key') } : {}),
      ...(values['allow-rejoin'] ? { allowRejoin: true } : {}),
    },
  };
}

function parseKeySecret(values: Values): { namespace: string; name: string } {
  const [namespace, name, ...extra] = (values['key-secret'] ?? DEFAULT_KEY_SECRET).split('/');
  if (!namespace || !name || extra.length > 0) throw new UsageError('--key-secret must be NAMESPACE/NAME');
  return { namespace, name };
}

async function issue(kubeConfig: KubeConfig, flags: IssueFlags, io: Io): Promise<number> {
  const { namespace, name } = flags.keySecret;
  const deps: IssuanceDeps = {
    kube: new KubeTokenStore(kubeConfig),
    // Read only: the operator creates the key ring; a CLI that made its own would mint tokens
    // no controller could verify.
    keyRing: () => loadKeyRing(kubeConfig, { namespace, name, createIfMissing: false }),
    settings: flags.settings,
  };
  const flavor = flags.request.flavorClassName;
  const reviews = new KubeReviews(kubeConfig);
  // The API server checks the writes; this makes the flavor's own permission count too, as in the API.
  if (!(await reviews.selfCan({ group: GROUP, resource: FLAVOR_CLASS_PLURAL, verb: 'use', name: flavor }))) {
    throw new KubeError(
      403,
      'Forbidden',
      `you may not use FlavorClass '${flavor}': it needs RBAC verb 'use' on flavorclasses.nodeflavor.io '${flavor}'`,
    );
  }
  const requestedBy = await reviews.whoAmI().catch(() => undefined);
  const response = issueResponse(
    await issueToken(deps, { ...flags.request, ...(requestedBy ? { requestedBy } : {}) }),
  );
  if (flags.output === 'join') {
    io.stdout(response.joinConfiguration);
    if (response.discovery === 'file') {
      io.stderr(
        `${PROGRAM}: note: this JoinConfiguration reads ${response.discoveryKubeconfigPath}: install it on the node first (kubectl flavor discovery)\n`,
      );
    }
  } else if (flags.output === 'cloud-init') io.stdout(response.cloudInit);
  else if (flags.output === 'json') io.stdout(asJson(response));
  else io.stdout(asYaml(response));
  return 0;
}

/** The discovery kubeconfig (the cluster CA and API server): what machines install once. */
async function discovery(kubeConfig: KubeConfig, output: string, io: Io): Promise<number> {
  const info = await discoveryInfo({ kube: new KubeTokenStore(kubeConfig), settings: SETTINGS });
  if (output === 'json') io.stdout(asJson(info));
  else if (output === 'yaml') io.stdout(asYaml(info));
  else io.stdout(info.kubeconfig);
  return 0;
}

async function list(kubeConfig: KubeConfig, output: string, io: Io): Promise<number> {
  const tokens = await listTokens({ kube: new KubeTokenStore(kubeConfig) });
  if (output === 'json') io.stdout(asJson({ items: tokens }));
  else if (output === 'yaml') io.stdout(asYaml({ items: tokens }));
  else io.stdout(tokens.length === 0 ? 'No tokens found.\n' : tokensTable(tokens, new Date()));
  return 0;
}

async function revoke(kubeConfig: KubeConfig, ref: string, io: Io): Promise<number> {
  const view = await revokeToken({ kube: new KubeTokenStore(kubeConfig) }, ref);
  io.stdout(
    `token ${view.id} revoked: its bootstrap token Secret is deleted, no further node can join with it\n`,
  );
  return 0;
}

async function flavors(kubeConfig: KubeConfig, io: Io): Promise<number> {
  const classes = await new KubeTokenStore(kubeConfig).listFlavorClasses();
  const reviews = new KubeReviews(kubeConfig);
  const usable = await Promise.all(
    classes.map((c) =>
      reviews.selfCan({
        group: GROUP,
        resource: FLAVOR_CLASS_PLURAL,
        verb: 'use',
        name: c.metadata.name ?? '',
      }),
    ),
  );
  const rows = classes.map((c, i) => [
    c.metadata.name ?? '',
    usable[i] ? 'yes' : 'no',
    c.spec.description ?? '',
  ]);
  io.stdout(
    rows.length === 0 ? 'No FlavorClasses found.\n' : table(['NAME', 'YOU-MAY-USE', 'DESCRIPTION'], rows),
  );
  return 0;
}

async function nodes(kubeConfig: KubeConfig, io: Io): Promise<number> {
  const reader = new ExplainReader(kubeConfig);
  const [facts, tokens, events] = await Promise.all([
    listNodeFacts(kubeConfig),
    reader.tokens(),
    reader.events('Node'),
  ]);
  io.stdout(nodesTable(facts, (node) => nodeReason(node, tokens, events)));
  return 0;
}

/** `explain NAME` is a node, or else a token; `explain node NAME` and `explain token ID` say which. */
async function explain(kubeConfig: KubeConfig, args: string[], io: Io): Promise<number> {
  const reader = new ExplainReader(kubeConfig);
  const [first = '', second] = args;
  const kind = second === undefined ? undefined : first;
  const name = second ?? first;
  const node = kind === 'token' ? undefined : await reader.node(name);
  const now = new Date();
  if (node) {
    const [tokens, csrs, events, record] = await Promise.all([
      reader.tokens(),
      reader.kubeletCsrs(),
      reader.events('Node', node.name),
      reader.joinRecord(node.name),
    ]);
    io.stdout(explainNode(node, tokens, csrs, events, now, record));
    return 0;
  }
  const token = kind === 'node' ? undefined : await reader.findToken(name);
  if (!token) {
    const what = kind === 'node' ? 'node' : kind === 'token' ? 'token' : 'node or token';
    throw new KubeError(
      404,
      'NotFound',
      `no ${what} '${name}' found: check the name (kubectl flavor nodes, kubectl flavor list)`,
    );
  }
  const [csrs, events] = await Promise.all([
    reader.kubeletCsrs(),
    reader.events('FlavoredToken', token.metadata.name ?? ''),
  ]);
  io.stdout(explainToken(token, csrs, events, now));
  return 0;
}

function fail(io: Io, error: unknown): number {
  const usage =
    error instanceof UsageError || (error instanceof IssuerError && error.code === 'InvalidRequest');
  io.stderr(`${PROGRAM}: ${oneLine(messageOf(error))}\n`);
  return usage ? 2 : 1;
}

function messageOf(error: unknown): string {
  if (error instanceof IssuerError && error.fields && error.fields.length > 0) {
    return error.fields.map((f) => `${FLAG_OF_FIELD[f.field] ?? f.field}: ${f.message}`).join('; ');
  }
  if (error instanceof UsageError) return `${error.message} (see --help)`;
  if (error instanceof Error) return error.message;
  return String(error);
}

function oneLine(text: string): string {
  return text.replace(/\s*\n\s*/g, ' ').trim();
}

if (import.meta.main) {
  process.exitCode = await main(process.argv.slice(2), {
    stdout: (text) => process.stdout.write(text),
    stderr: (text) => process.stderr.write(text),
  });
}
