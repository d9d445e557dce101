// What `nodeflavor run` decides before it writes anything: whether it runs on a Node it may trust
// with the key ring, whether the controller may run as the identity the API server says it is
// (ADR 0003), and whether anything guards the Node keys it writes. Pure functions of facts
// gathered at start-up (src/cli/startup.ts); each refusal is the one line the process exits
// with, saying what to do.
import { type Config, controllerUsername } from '../config.ts';
import { type NodePlacementFacts, placementFailure, SYSTEM_NODE_LABEL } from '../flavor/placement.ts';
import type { RegistrationFinding } from '../webhook/admission-registration.ts';

export type { RegistrationFinding } from '../webhook/admission-registration.ts';

export type StartupConfig = Pick<
  Config,
  | 'controller'
  | 'webhook'
  | 'allowUnguardedNodes'
  | 'namespace'
  | 'serviceAccount'
  | 'webhookConfigName'
  | 'nodeName'
  | 'trustedNodeLabels'
  | 'allowUntrustedNode'
>;

export interface PlacementDecision {
  /** The line to exit with. */
  refusal?: string;
  /** Running on an untrusted Node because --allow-untrusted-node says so: the loud warning. */
  warning?: string;
}

/**
 * Whether this process may run on the Node it was scheduled to (`node`: that Node as read at
 * start, undefined when it does not exist). It holds the key ring: on a Node that joined through
 * nodeflavor, is quarantined, or that no admin marked trusted, the node's administrator could read
 * the keys and mint any flavor. Without --node-name (outside a Pod) there is nothing to check.
 */
export function placementDecision(
  config: StartupConfig,
  node: NodePlacementFacts | undefined,
): PlacementDecision {
  const name = config.nodeName;
  if (name === undefined) return {};
  const failure = node ? placementFailure(node, config.trustedNodeLabels) : undefined;
  if (node && !failure) return {};
  const why = failure
    ? `${failure.message}, and whoever administers such a node could read the HMAC key ring (and mint any flavor) and this pod's ServiceAccount token`
    : `no Node named "${name}" exists (--node-name; the chart passes the pod's spec.nodeName)`;
  if (config.allowUntrustedNode) {
    return {
      warning: `RUNNING ON AN UNTRUSTED NODE: ${why}; running anyway because of --allow-untrusted-node`,
    };
  }
  return {
    refusal: `refusing to run on Node ${name}: ${why}; run the operator only on a trusted node (the chart requires one of placement.trustedNodeLabels, now ${config.trustedNodeLabels.join(', ')}: mark a system node with \`kubectl label node <name> ${SYSTEM_NODE_LABEL}=true\`), or pass --allow-untrusted-node`,
  };
}

const SERVICE_ACCOUNT_USER = /^system:serviceaccount:([^:]+):([^:]+)$/;

/**
 * Why the controller must not run as `username`, or undefined when it may. The admission guard
 * exempts exactly controllerUsername(config); any other identity would have every flavor write
 * denied and retried forever. Widening the exemption to whoever runs the process is refused on
 * purpose (ADR 0003): it would make that identity, often a human admin's, a way around the guard.
 */
export function identityRefusal(config: StartupConfig, username: string): string | undefined {
  if (!config.controller) return undefined;
  const expected = controllerUsername(config);
  if (username === expected) return undefined;
  const serviceAccount = SERVICE_ACCOUNT_USER.exec(username);
  const fix = serviceAccount
    ? `if "${username}" is the operator's ServiceAccount, pass --namespace=${serviceAccount[1]} --service-account=${serviceAccount[2]}; else run as "${expected}"`
    : `run as that ServiceAccount, e.g. with a kubeconfig holding the token of \`kubectl -n ${config.namespace} create token ${config.serviceAccount}\` (README, "Run from source")`;
  return `refusing to run the controller as "${username}": the admission guard lets only "${expected}" write flavors, so every flavor write would be denied; ${fix}`;
}

export interface GuardDecision {
  /** The line to exit with. */
  refusal?: string;
  /** Running without a guard because --allow-unguarded-nodes says so: the loud warning. */
  warning?: string;
  /** Whether some admission guard protects the Node keys the controller writes. */
  guarded: boolean;
}

/** Whether the controller may run given what guards Nodes (undefined finding: this process runs the guard). */
export function guardDecision(config: StartupConfig, registration?: RegistrationFinding): GuardDecision {
  if (!config.controller || config.webhook) return { guarded: true };
  if (registration?.state === 'present') return { guarded: true };
  const name = config.webhookConfigName;
  const found =
    registration?.state === 'unreadable'
      ? `its admission registration "${name}" cannot be read (${registration.why})`
      : `no ValidatingWebhookConfiguration or ValidatingAdmissionPolicy with binding "${name}" is registered`;
  const why = `this process runs no admission guard (--no-webhook) and ${found}, so any kubelet could give itself a flavor`;
  if (config.allowUnguardedNodes) {
    return {
      guarded: false,
      warning: `NODES ARE UNGUARDED: ${why}; running anyway because of --allow-unguarded-nodes`,
    };
  }
  return {
    guarded: false,
    refusal: `refusing to run the controller unguarded: ${why}; run the guard (drop --no-webhook; chart: admission.enabled=true), or pass --allow-unguarded-nodes (chart: controller.allowUnguardedNodes=true) to run without one`,
  };
}
