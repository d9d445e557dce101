// What the admission registration should be right now, as a pure function of the configuration,
// the protected keys and the webhook's CA: the objects to apply for the configured mode, and the
// objects of the other mode to remove (so switching `admissionMode` leaves no stale guard behind,
// such as a webhook with failurePolicy Fail pointing at a server that no longer runs).
// Each object carries the revision of the rules that generated it, so that during a rolling
// upgrade an older release never rolls back a newer release's registration (registrationRule).
import { type Config, controllerUsername } from '../config.ts';
import type { ProtectedKeys } from '../flavor/admission.ts';
import { classKeysPolicy, classKeysPolicyBinding } from './class-keys-policy.ts';
import { flavoredTokenPolicy, flavoredTokenPolicyBinding } from './flavored-token-policy.ts';
import {
  mutatingWebhookConfiguration,
  quarantineAdmissionPolicy,
  quarantineAdmissionPolicyBinding,
} from './quarantine-registration.ts';
import {
  validatingAdmissionPolicy,
  validatingAdmissionPolicyBinding,
  validatingWebhookConfiguration,
} from './registration.ts';
import { MUTATE_NODES_PATH, VALIDATE_NODES_PATH } from './server.ts';

export type RegistrationKind =
  | 'ValidatingWebhookConfiguration'
  | 'ValidatingAdmissionPolicy'
  | 'ValidatingAdmissionPolicyBinding'
  | 'MutatingWebhookConfiguration'
  | 'MutatingAdmissionPolicy'
  | 'MutatingAdmissionPolicyBinding';

/** The kinds whose webhooks carry a clientConfig (and so a caBundle, ours or injected). */
export const WEBHOOK_KINDS: ReadonlySet<RegistrationKind> = new Set([
  'ValidatingWebhookConfiguration',
  'MutatingWebhookConfiguration',
]);

export interface OwnerReference {
  apiVersion: string;
  kind: string;
  name: string;
  uid: string;
}

export interface RegistrationObject {
  apiVersion: string;
  kind: RegistrationKind;
  metadata: {
    name: string;
    labels: Record<string, string>;
    annotations?: Record<string, string>;
    ownerReferences?: OwnerReference[];
  };
}

export interface DesiredRegistration {
  apply: RegistrationObject[];
  remove: { kind: RegistrationKind; name: string }[];
}

/**
 * The revision of the generated registration. Bump it whenever what desiredRegistration (or
 * registration.ts) generates changes: an older release leaves a newer revision alone, and the
 * unit test pinning the generated objects fails until it is bumped.
 */
export const REGISTRATION_REVISION = 3;
/** Where an object says which revision generated it; absent: older than revision 1. */
export const REGISTRATION_REVISION_ANNOTATION = 'nodeflavor.io/registration-revision';

/** cert-manager's cainjector fills the caBundle from this Certificate (`<namespace>/<name>`). */
export const INJECT_CA_ANNOTATION = 'cert-manager.io/inject-ca-from';
/** The Service port the webhook configuration names (the Service maps it to the container port). */
const WEBHOOK_SERVICE_PORT = 443;

type RegistrationConfig = Pick<
  Config,
  | 'admissionMode'
  | 'webhookConfigName'
  | 'webhookService'
  | 'webhookUrl'
  | 'namespace'
  | 'serviceAccount'
  | 'adminGroups'
  | 'tlsMode'
  | 'tlsSecret'
>;

export function desiredRegistration(
  config: RegistrationConfig,
  protectedKeys: ProtectedKeys,
  /** PEM of the CA behind the serving certificate (self-managed TLS only). */
  caPem: string | undefined,
  /** The object whose deletion deletes the registration (config.registrationOwner, resolved). */
  owner?: OwnerReference,
  revision: number = REGISTRATION_REVISION,
): DesiredRegistration {
  const name = config.webhookConfigName;
  const guard = {
    protectedKeys,
    controllerUsername: controllerUsername(config),
    adminGroups: config.adminGroups,
  };
  const webhook = config.admissionMode !== 'policy';
  const policy = config.admissionMode !== 'webhook';
  const apply: RegistrationObject[] = [];
  const remove: DesiredRegistration['remove'] = [];

  if (webhook) {
    const endpoint = (path: string) =>
      config.webhookUrl === undefined
        ? {
            service: {
              namespace: config.namespace,
              name: config.webhookService,
              port: WEBHOOK_SERVICE_PORT,
              path,
            },
          }
        : { url: webhookUrl(config.webhookUrl, path) };
    const selfManaged = config.tlsMode === 'self';
    const caBundle =
      selfManaged && caPem !== undefined ? { caBundle: Buffer.from(caPem).toString('base64') } : {};
    const objects: RegistrationObject[] = [
      validatingWebhookConfiguration({ name, ...guard, ...endpoint(VALIDATE_NODES_PATH), ...caBundle }),
      // Quarantine from a Node's first version (ADR 0012).
      mutatingWebhookConfiguration({ name, ...endpoint(MUTATE_NODES_PATH), ...caBundle }),
    ];
    for (const object of objects) {
      if (!selfManaged)
        object.metadata.annotations = { [INJECT_CA_ANNOTATION]: `${config.namespace}/${config.tlsSecret}` };
      apply.push(object);
    }
  } else {
    remove.push(
      { kind: 'ValidatingWebhookConfiguration', name },
      { kind: 'MutatingWebhookConfiguration', name },
    );
  }

  if (policy) {
    apply.push(validatingAdmissionPolicy({ name, ...guard }));
    apply.push(validatingAdmissionPolicyBinding({ name, policyName: name }));
    apply.push(quarantineAdmissionPolicy({ name }));
    apply.push(quarantineAdmissionPolicyBinding({ name, policyName: name }));
  } else {
    remove.push(
      { kind: 'ValidatingAdmissionPolicy', name },
      { kind: 'ValidatingAdmissionPolicyBinding', name },
      { kind: 'MutatingAdmissionPolicy', name },
      { kind: 'MutatingAdmissionPolicyBinding', name },
    );
  }
  // In every mode: a new FlavorClass's keys are guarded by the API server from its first second.
  apply.push(
    classKeysPolicy({
      name,
      controllerUsername: guard.controllerUsername,
      adminGroups: guard.adminGroups,
      covered: protectedKeys,
    }),
  );
  apply.push(classKeysPolicyBinding({ name }));
  // In every mode: creating a FlavoredToken needs `use` on its FlavorClass, and only the operator
  // writes the issuer's record of TPM proofs (issue 32).
  apply.push(flavoredTokenPolicy({ name, operatorUsername: guard.controllerUsername }));
  apply.push(flavoredTokenPolicyBinding({ name }));
  for (const object of apply) {
    object.metadata.annotations = {
      ...object.metadata.annotations,
      [REGISTRATION_REVISION_ANNOTATION]: String(revision),
    };
    if (owner) object.metadata.ownerReferences = [{ ...owner }];
  }
  return { apply, remove };
}

/** The revision a live object says generated it: 0 when it says none (a release before revisions). */
export function liveRevision(annotations: Record<string, string> | undefined): number {
  const text = annotations?.[REGISTRATION_REVISION_ANNOTATION];
  return text !== undefined && /^\d{1,9}$/.test(text) ? Number(text) : 0;
}

/**
 * Whether this release may write (apply, restore, or delete) a live registration object: not when
 * a newer release generated it. Same or older: ours to keep true. A missing object is ours to make.
 */
export function mayWriteRegistration(
  live: { metadata: { annotations?: Record<string, string> } } | undefined,
  revision: number,
): boolean {
  return live === undefined || liveRevision(live.metadata.annotations) <= revision;
}

/**
 * A configured URL without a path gets each webhook's path; one with a path is the validating
 * webhook's as it is, and the mutating webhook's path replaces its last segment.
 */
export function webhookUrl(configured: string, path: string = VALIDATE_NODES_PATH): string {
  const url = new URL(configured);
  if (url.pathname === '/' || url.pathname === '') url.pathname = path;
  else if (path !== VALIDATE_NODES_PATH) url.pathname = url.pathname.replace(/[^/]*$/, path.slice(1));
  return url.toString();
}
