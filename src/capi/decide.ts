// What `nodeflavor capi` does with one KubeadmConfig, decided purely from the objects (no I/O, no
// clock): a chain of small checks, each either deciding (skip it, wait for a named reason, give it
// a token, revoke its token) or passing to the next. The reconciler (reconcile-config.ts) gathers
// the facts from its caches, asks once, and carries out the answer.
//
// The rules that keep a flavored Machine from ever joining with a plain token: a KubeadmConfig is
// filled only while Cluster API's pause holds CABPK off it (the pause is what keeps its bootstrap
// data from existing), and a config that CABPK rendered first is never touched, only reported.
import {
  CAPI_FINALIZER,
  type CachedCluster,
  type CachedKubeadmConfig,
  type CachedMachine,
  CONTROL_PLANE_LABEL,
  controllerOf,
  controlPlaneInitialized,
  FLAVOR_CLASS_ANNOTATION,
  ISSUANCE_ATTEMPT_ANNOTATION,
  KUBEADM_CONTROL_PLANE_KIND,
  MACHINE_KIND,
  MACHINE_POOL_KIND,
  MACHINE_POOL_LABEL,
  NODE_NAME_ANNOTATION,
  NODE_NAME_FROM_MACHINE,
  PAUSED_ANNOTATION,
  Reason,
  TOKEN_ID_ANNOTATION,
} from './resources.ts';

const DNS_SUBDOMAIN = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?([.][a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;
/** After this many fresh starts (each after the issuer refused an Idempotency-Key), stop and say so. */
export const MAX_ISSUANCE_ATTEMPTS = 5;

/** Whether the issuer of the workload cluster can be called: its access Secret is there and sound. */
export type IssuerAccessFact = { ok: true } | { ok: false; message: string };

export interface ConfigFacts {
  config: CachedKubeadmConfig;
  /** The Machine that controls the config, when the cache has it. */
  machine: CachedMachine | undefined;
  /** The config's Cluster, when the cache has it. */
  cluster: CachedCluster | undefined;
  issuerAccess: IssuerAccessFact;
}

/** What a flavored Machine's token request says: the same body on every retry (idempotency). */
export interface IssueRequestBody {
  flavorClassName: string;
  ttl: string;
  maxUses: 1;
  nodeName?: string;
  description: string;
}

export type ConfigDecision =
  /** Not this controller's: not flavored, a control-plane Machine's, or gone. */
  | { kind: 'ignore' }
  /** Being deleted (or no longer flavored) with our finalizer: revoke its token, then let it go. */
  | { kind: 'release'; revoke: boolean; why: string }
  /** Not now: the condition says why (with an Event when the reason needs a human). */
  | { kind: 'wait'; reason: Reason; message: string }
  /** First the finalizer, so that a Machine deleted from here on gets its token revoked. */
  | { kind: 'addFinalizer' }
  /** Ask the workload cluster's issuer for the token, then fill the config with it. */
  | { kind: 'issue'; body: IssueRequestBody; idempotencyKey: string; nodeName: string | undefined }
  /** Filled earlier: its condition says so. */
  | { kind: 'issued'; tokenId: string };

export interface DecideOptions {
  /** The token validity asked for (a duration the issuer takes, e.g. 24h). */
  tokenTtl: string;
}

type Check = (facts: ConfigFacts, options: DecideOptions) => ConfigDecision | undefined;

export function flavorOf(object: {
  metadata: { annotations?: Record<string, string> | undefined };
}): string | undefined {
  return object.metadata.annotations?.[FLAVOR_CLASS_ANNOTATION];
}

export function hasFinalizer(config: CachedKubeadmConfig): boolean {
  return config.metadata.finalizers?.includes(CAPI_FINALIZER) ?? false;
}

export function filledTokenId(config: CachedKubeadmConfig): string | undefined {
  return config.metadata.annotations?.[TOKEN_ID_ANNOTATION];
}

/** CABPK rendered its bootstrap data already (the Machine may be booting with it). */
export function isRendered(config: CachedKubeadmConfig): boolean {
  return (
    (config.status?.dataSecretName ?? '') !== '' || config.status?.initialization?.dataSecretCreated === true
  );
}

/** A control-plane Machine's config: KubeadmControlPlane compares these specs and would roll out. */
export function isControlPlane(object: {
  metadata: { labels?: Record<string, string> | undefined; ownerReferences?: { kind: string }[] | undefined };
}): boolean {
  if (object.metadata.labels?.[CONTROL_PLANE_LABEL] !== undefined) return true;
  return (object.metadata.ownerReferences ?? []).some((o) => o.kind === KUBEADM_CONTROL_PLANE_KIND);
}

function isMachinePools(config: CachedKubeadmConfig): boolean {
  if (config.metadata.labels?.[MACHINE_POOL_LABEL] !== undefined) return true;
  return (config.metadata.ownerReferences ?? []).some((o) => o.kind === MACHINE_POOL_KIND);
}

/** The Idempotency-Key of a config's token: its UID (a config made again has a new one), per attempt. */
export function idempotencyKey(config: CachedKubeadmConfig): string {
  const attempt = issuanceAttempt(config);
  return attempt <= 1 ? `capi/${config.metadata.uid}` : `capi/${config.metadata.uid}/${attempt}`;
}

export function issuanceAttempt(config: CachedKubeadmConfig): number {
  const text = config.metadata.annotations?.[ISSUANCE_ATTEMPT_ANNOTATION];
  const attempt = Number(text);
  return text !== undefined && Number.isInteger(attempt) && attempt >= 1 ? attempt : 1;
}

/**
 * The description recorded on the token: names the config (for `kubectl flavor list` readers) and
 * its UID, by which the controller finds a token whose answer it lost to revoke it. No secret.
 */
export function tokenDescription(config: CachedKubeadmConfig): string {
  const { namespace, name, uid } = config.metadata;
  return `Cluster API KubeadmConfig ${namespace}/${name} (uid ${uid})`;
}

const wait = (reason: Reason, message: string): ConfigDecision => ({ kind: 'wait', reason, message });

const notOurs: Check = ({ config }) => (isControlPlane(config) ? { kind: 'ignore' } : undefined);

const deleting: Check = ({ config, cluster }) => {
  if (config.metadata.deletionTimestamp === undefined) return undefined;
  if (!hasFinalizer(config)) return { kind: 'ignore' };
  // The whole workload cluster (its issuer and every token with it) is going: nothing to revoke,
  // and waiting for an issuer that will not come back would hold the Cluster's deletion forever.
  if (cluster === undefined || cluster.metadata.deletionTimestamp !== undefined)
    return { kind: 'release', revoke: false, why: 'its Cluster is being deleted with its tokens' };
  return { kind: 'release', revoke: true, why: 'the KubeadmConfig is being deleted' };
};

const unflavored: Check = ({ config }) => {
  if (flavorOf(config) !== undefined) return undefined;
  // The annotation went before a token was in place: nothing of ours should hold the config.
  if (hasFinalizer(config) && filledTokenId(config) === undefined)
    return { kind: 'release', revoke: true, why: `the annotation ${FLAVOR_CLASS_ANNOTATION} was removed` };
  const tokenId = filledTokenId(config);
  return tokenId !== undefined ? { kind: 'issued', tokenId } : { kind: 'ignore' };
};

const machinePool: Check = ({ config }) =>
  isMachinePools(config)
    ? wait(
        Reason.MachinePoolUnsupported,
        'a MachinePool shares one bootstrap data among all its instances, so a single-use token per machine is impossible; nodeflavor does not fill it (remove the annotation, or use a MachineDeployment)',
      )
    : undefined;

const filled: Check = ({ config }) => {
  const tokenId = filledTokenId(config);
  return tokenId === undefined ? undefined : { kind: 'issued', tokenId };
};

const renderedFirst: Check = ({ config }) =>
  isRendered(config)
    ? wait(
        Reason.RenderedBeforeFill,
        'CABPK rendered its bootstrap data before nodeflavor could fill it: this Machine joins with a plain kubeadm token and gets no flavor; roll the MachineDeployment out to replace it (annotate before scaling)',
      )
    : undefined;

const notPaused: Check = ({ config }) =>
  config.metadata.annotations?.[PAUSED_ANNOTATION] === undefined
    ? wait(
        Reason.NotPaused,
        `it is not paused (${PAUSED_ANNOTATION}), so CABPK may render it with a plain kubeadm token at any moment: nodeflavor fills only paused KubeadmConfigs; install nodeflavor's MutatingAdmissionPolicy or add the annotation to the KubeadmConfigTemplate's spec.template.metadata.annotations`,
      )
    : undefined;

const badAnnotations: Check = ({ config }) => {
  const flavor = flavorOf(config) ?? '';
  if (!DNS_SUBDOMAIN.test(flavor) || flavor.length > 253)
    return wait(
      Reason.InvalidAnnotation,
      `${FLAVOR_CLASS_ANNOTATION} must name a FlavorClass (a DNS subdomain), not "${flavor.slice(0, 64)}"`,
    );
  const nodeName = config.metadata.annotations?.[NODE_NAME_ANNOTATION];
  if (nodeName !== undefined && nodeName !== NODE_NAME_FROM_MACHINE)
    return wait(
      Reason.InvalidAnnotation,
      `${NODE_NAME_ANNOTATION} may only be "${NODE_NAME_FROM_MACHINE}" (pin the token to the Machine's name), not "${nodeName.slice(0, 64)}"`,
    );
  return undefined;
};

const waitingForMachine: Check = ({ config, machine }) => {
  const owner = controllerOf(config);
  if (owner?.kind === MACHINE_KIND && machine !== undefined && machine.metadata.uid === owner.uid)
    return undefined;
  return wait(
    Reason.WaitingForMachine,
    'waiting for the Machine that owns it (Cluster API sets it as owner)',
  );
};

const waitingForControlPlane: Check = ({ cluster, config }) => {
  if (cluster !== undefined && controlPlaneInitialized(cluster)) return undefined;
  return wait(
    Reason.WaitingForControlPlane,
    `waiting for the control plane of Cluster ${config.metadata.namespace}/${cluster?.metadata.name ?? '?'} (its issuer lives there)`,
  );
};

const issuerNotConfigured: Check = ({ issuerAccess }) =>
  issuerAccess.ok ? undefined : wait(Reason.IssuerNotConfigured, issuerAccess.message);

const tooManyAttempts: Check = ({ config }) =>
  issuanceAttempt(config) > MAX_ISSUANCE_ATTEMPTS
    ? wait(
        Reason.IssuerRefused,
        `the issuer refused ${MAX_ISSUANCE_ATTEMPTS} Idempotency-Keys in a row; see the earlier Events (delete the Machine to start over)`,
      )
    : undefined;

const finalizerFirst: Check = ({ config }) => (hasFinalizer(config) ? undefined : { kind: 'addFinalizer' });

const issue: Check = ({ config, machine }, options) => {
  const pin = config.metadata.annotations?.[NODE_NAME_ANNOTATION] === NODE_NAME_FROM_MACHINE;
  const nodeName = pin ? machine?.metadata.name : undefined;
  return {
    kind: 'issue',
    body: {
      flavorClassName: flavorOf(config) ?? '',
      ttl: options.tokenTtl,
      maxUses: 1,
      ...(nodeName !== undefined ? { nodeName } : {}),
      description: tokenDescription(config),
    },
    idempotencyKey: idempotencyKey(config),
    nodeName,
  };
};

/** In order: the first check that decides wins. */
export const CONFIG_CHAIN: readonly Check[] = [
  notOurs,
  deleting,
  unflavored,
  machinePool,
  filled,
  renderedFirst,
  notPaused,
  badAnnotations,
  waitingForMachine,
  waitingForControlPlane,
  issuerNotConfigured,
  tooManyAttempts,
  finalizerFirst,
  issue,
];

export function decideConfig(facts: ConfigFacts, options: DecideOptions): ConfigDecision {
  for (const check of CONFIG_CHAIN) {
    const decision = check(facts, options);
    if (decision) return decision;
  }
  return { kind: 'ignore' };
}

/** The cluster key (namespace/name) a config belongs to. */
export function clusterKeyOf(namespace: string, clusterName: string | undefined): string | undefined {
  return clusterName === undefined ? undefined : `${namespace}/${clusterName}`;
}
