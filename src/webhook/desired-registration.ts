// What the admission registration should be right now, as a pure function of the configuration,
// the protected keys and the webhook's CA: the objects to apply for the configured mode, and the
// objects of the other mode to remove (so switching `admissionMode` leaves no stale guard behind,
// such as a webhook with failurePolicy Fail pointing at a server that no longer runs).
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

/** cert-manager's cainjector fills the caBundle from this Certificate (`<namespace>/<name>`). */
export const INJECT_CA_ANNOTATION = 'cert-manager.io/inject-ca-from';
/** The Service port the webhook configuration names (the Service maps it to the container port). */
export const WEBHOOK_SERVICE_PORT = 443;

export type RegistrationConfig = Pick<
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
  if (owner) for (const object of apply) object.metadata.ownerReferences = [{ ...owner }];
  return { apply, remove };
}

/** A configured URL without a path gets the webhook's path; one with a path is used as it is. */
export function webhookUrl(configured: string): string {
  const url = new URL(configured);
  if (url.pathname === '/' || url.pathname === '') url.pathname = VALIDATE_NODES_PATH;
  return url.toString();
}
