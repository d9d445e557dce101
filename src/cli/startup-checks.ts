// What `nodeflavor run` decides before it writes anything: whether the controller may run as the
// identity the API server says it is (ADR 0003), and whether anything guards the Node keys it
// writes. Pure functions of facts gathered at start-up (src/cli/startup.ts); each refusal is the
// one line the process exits with, saying what to do.
import { type Config, controllerUsername } from '../config.ts';
import type { RegistrationFinding } from '../kube/admission-registration.ts';

export type { RegistrationFinding } from '../kube/admission-registration.ts';

export type StartupConfig = Pick<
  Config,
  'controller' | 'webhook' | 'allowUnguardedNodes' | 'namespace' | 'serviceAccount' | 'webhookConfigName'
>;

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
