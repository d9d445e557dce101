// What the admission registration should be right now, as a pure function of the configuration,
// the protected keys and the webhook's CA: the objects to apply for the configured mode, and the
// objects of the other mode to remove (so switching `admissionMode` leaves no stale guard behind,
// such as a webhook with failurePolicy Fail pointing at a server that no longer runs).
// Each object carries the revision of the rules that generated it, so that during a rolling
// upgrade an older release never rolls back a newer release's registration (registrationRule).
import { type Config, controllerUsername } from '../config.ts';
import type { ProtectedKeys } from '../flavor/admission.ts';
import {
  validatingAdmissionPolicy,
  validatingAdmissionPolicyBinding,
  validatingWebhookConfiguration,
} from './registration.ts';
import { VALIDATE_NODES_PATH } from './server.ts';

export type RegistrationKind =
  | 'ValidatingWebhookConfiguration'
  | 'ValidatingAdmissionPolicy'
  | 'ValidatingAdmissionPolicyBinding';

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
export const REGISTRATION_REVISION = 1;
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
    const endpoint =
      config.webhookUrl === undefined
        ? {
            service: {
              namespace: config.namespace,
              name: config.webhookService,
              port: WEBHOOK_SERVICE_PORT,
              path: VALIDATE_NODES_PATH,
            },
          }
        : { url: webhookUrl(config.webhookUrl) };
    const selfManaged = config.tlsMode === 'self';
    const caBundle =
      selfManaged && caPem !== undefined ? { caBundle: Buffer.from(caPem).toString('base64') } : {};
    const object: RegistrationObject = validatingWebhookConfiguration({
      name,
      ...guard,
      ...endpoint,
      ...caBundle,
    });
    if (!selfManaged)
      object.metadata.annotations = { [INJECT_CA_ANNOTATION]: `${config.namespace}/${config.tlsSecret}` };
    apply.push(object);
  } else {
    remove.push({ kind: 'ValidatingWebhookConfiguration', name });
  }

  if (policy) {
    apply.push(validatingAdmissionPolicy({ name, ...guard }));
    apply.push(validatingAdmissionPolicyBinding({ name, policyName: name }));
  } else {
    remove.push(
      { kind: 'ValidatingAdmissionPolicy', name },
      { kind: 'ValidatingAdmissionPolicyBinding', name },
    );
  }
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

/** A configured URL without a path gets the webhook's path; one with a path is used as it is. */
export function webhookUrl(configured: string): string {
  const url = new URL(configured);
  if (url.pathname === '/' || url.pathname === '') url.pathname = VALIDATE_NODES_PATH;
  return url.toString();
}
