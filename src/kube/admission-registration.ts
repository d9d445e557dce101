// Keeps the admission registration true: applies the desired ValidatingWebhookConfiguration and/or
// ValidatingAdmissionPolicy + binding (server-side apply, field manager `nodeflavor`, forced, so a
// field someone else took is taken back), removes the other mode's objects, and does it again
// whenever the desired state changes (FlavorClass keys, the CA), whenever someone edits the objects
// (watched), and periodically. Server-side apply cannot remove what another manager ADDED (an extra
// matchCondition that switches the guard off, a namespace selector), so after applying we compare
// the live object with ours and overwrite it when it still differs. An unchanged apply writes
// nothing and so triggers no watch event: reacting to our own writes cannot loop.

import { isDeepStrictEqual } from 'node:util';
import type { KubeConfig } from '@kubernetes/client-node';
import type { Logger } from 'pino';
import { CoalescedRun } from '../ops/coalesced-run.ts';
import type {
  DesiredRegistration,
  OwnerReference,
  RegistrationKind,
  RegistrationObject,
} from '../webhook/desired-registration.ts';
import { kubeJson } from './fetch.ts';
import { isNotFound, KubeError } from './kube-error.ts';
import { ListWatch } from './listwatch.ts';

export const FIELD_MANAGER = 'nodeflavor';
const API_PREFIX = '/apis/admissionregistration.k8s.io/v1';
const COLLECTION: Record<RegistrationKind, string> = {
  ValidatingWebhookConfiguration: `${API_PREFIX}/validatingwebhookconfigurations`,
  ValidatingAdmissionPolicy: `${API_PREFIX}/validatingadmissionpolicies`,
  ValidatingAdmissionPolicyBinding: `${API_PREFIX}/validatingadmissionpolicybindings`,
};
/** The label our objects carry; we only ever delete objects that have it. */
const OWNED_LABEL = ['app.kubernetes.io/name', 'nodeflavor'] as const;
const MAX_RETRY_DELAY_MS = 30_000;

export interface LiveObject {
  metadata: {
    name: string;
    resourceVersion?: string;
    uid?: string;
    labels?: Record<string, string>;
    annotations?: Record<string, string>;
  };
  [field: string]: unknown;
}

export interface AdmissionRegistrarOptions {
  kubeConfig: KubeConfig;
  logger: Logger;
  /** Recomputed on every pass. */
  desired: () => DesiredRegistration;
  /** Re-apply even without any event this often (drift repair of last resort). */
  resyncMs?: number;
}

export class AdmissionRegistrar {
  private readonly options: AdmissionRegistrarOptions;
  private readonly watches: ListWatch<LiveObject>[] = [];
  private timer: NodeJS.Timeout | undefined;
  private readonly run = new CoalescedRun({
    pass: () => this.pass(),
    onSuccess: () => {
      this.applied = true;
      this.firstSuccess?.();
    },
    onError: (error, failures) =>
      this.options.logger.error({ err: error.message, failures }, 'cannot apply the admission registration'),
    onSettled: () => this.schedule(),
    isStopped: () => this.stopped,
  });
  private stopped = false;
  private firstSuccess: (() => void) | undefined;
  private applied = false;

  constructor(options: AdmissionRegistrarOptions) {
    this.options = options;
  }

  /** Applies, then keeps applying; resolves after the first complete, successful pass. */
  start(): Promise<void> {
    const first = new Promise<void>((resolve) => {
      this.firstSuccess = resolve;
    });
    this.watchOwnObjects();
    this.refresh();
    return first;
  }

  get isApplied(): boolean {
    return this.applied;
  }

  /** Asks for another pass (coalesced: at most one runs, at most one more is queued). */
  refresh(): void {
    this.run.request();
  }

  stop(): void {
    this.stopped = true;
    if (this.timer !== undefined) clearTimeout(this.timer);
    for (const watch of this.watches) watch.stop();
  }

  private schedule(): void {
    if (this.stopped) return;
    if (this.timer !== undefined) clearTimeout(this.timer);
    const delay =
      this.run.failures > 0
        ? Math.min(MAX_RETRY_DELAY_MS, 250 * 2 ** Math.min(this.run.failures, 7))
        : (this.options.resyncMs ?? 600_000);
    this.timer = setTimeout(() => this.refresh(), delay);
    this.timer.unref();
  }

  private watchOwnObjects(): void {
    const desired = this.options.desired();
    const targets = [
      ...desired.apply.map((o) => ({ kind: o.kind, name: o.metadata.name })),
      ...desired.remove,
    ];
    for (const { kind, name } of targets) {
      const watch = new ListWatch<LiveObject>({
        kubeConfig: this.options.kubeConfig,
        path: COLLECTION[kind],
        fieldSelector: `metadata.name=${name}`,
        // The objects are only a trigger here; keep nothing of their (large) CEL text.
        transform: (raw) => ({ metadata: (raw as LiveObject).metadata }),
        onEvent: () => this.refresh(),
        onRestart: (reason, error) => {
          if (error !== undefined) {
            this.options.logger.warn(
              { kind, reason, err: error.message },
              'watch on the admission registration restarted',
            );
          }
        },
      });
      this.watches.push(watch);
      void watch.start();
    }
  }

  private async pass(): Promise<void> {
    const desired = this.options.desired();
    for (const object of desired.apply) await this.applyOne(object);
    for (const { kind, name } of desired.remove) await this.removeIfOurs(kind, name);
  }

  private async applyOne(desired: RegistrationObject): Promise<void> {
    const path = `${COLLECTION[desired.kind]}/${desired.metadata.name}`;
    const what = `${desired.kind} ${desired.metadata.name}`;
    const live = await kubeJson<LiveObject>(this.options.kubeConfig, 'PATCH', path, {
      body: desired,
      contentType: 'application/apply-patch+yaml',
      query: { fieldManager: FIELD_MANAGER, force: true },
      action: `apply ${what}`,
    });
    const drift = driftedFields(desired, live);
    if (drift.length === 0) return;
    this.options.logger.warn(
      { kind: desired.kind, name: desired.metadata.name, fields: drift },
      'restoring an edited admission registration',
    );
    await kubeJson(this.options.kubeConfig, 'PUT', path, {
      body: overwrite(desired, live),
      query: { fieldManager: FIELD_MANAGER },
      action: `restore ${what}`,
    });
  }

  private async removeIfOurs(kind: RegistrationKind, name: string): Promise<void> {
    await removeOwned(this.options.kubeConfig, kind, name, () =>
      this.options.logger.info({ kind, name }, 'removed the admission registration of the other mode'),
    );
  }
}

/**
 * The top-level fields (outside metadata) where the live object differs from ours. The API server
 * fills nothing in that we do not set ourselves, except the caBundle that cert-manager injects
 * when we leave it out.
 */
export function driftedFields(desired: RegistrationObject, live: LiveObject): string[] {
  const ours = desired as unknown as Record<string, unknown>;
  const theirs = withoutInjectedCaBundle(desired, live);
  return Object.keys(ours)
    .filter((field) => field !== 'metadata' && field !== 'apiVersion' && field !== 'kind')
    .filter((field) => !isDeepStrictEqual(ours[field], theirs[field]));
}

function withoutInjectedCaBundle(desired: RegistrationObject, live: LiveObject): Record<string, unknown> {
  if (desired.kind !== 'ValidatingWebhookConfiguration') return live;
  const ourWebhooks = (desired as unknown as { webhooks: { clientConfig: { caBundle?: string } }[] })
    .webhooks;
  const webhooks = (live['webhooks'] as { clientConfig?: Record<string, unknown> }[] | undefined)?.map(
    (w, i) => {
      if (ourWebhooks[i]?.clientConfig.caBundle !== undefined || w.clientConfig === undefined) return w;
      const { caBundle: _injected, ...clientConfig } = w.clientConfig;
      return { ...w, clientConfig };
    },
  );
  return { ...live, webhooks };
}

/** Ours, with the live metadata (resourceVersion for optimistic concurrency) and any injected caBundle. */
function overwrite(desired: RegistrationObject, live: LiveObject): object {
  const replacement = structuredClone(desired) as unknown as Record<string, unknown>;
  if (desired.kind === 'ValidatingWebhookConfiguration') {
    const liveWebhooks = live['webhooks'] as { clientConfig?: { caBundle?: string } }[] | undefined;
    const webhooks = replacement['webhooks'] as { clientConfig: { caBundle?: string } }[];
    webhooks.forEach((w, i) => {
      const injected = liveWebhooks?.[i]?.clientConfig?.caBundle;
      if (w.clientConfig.caBundle === undefined && injected !== undefined) w.clientConfig.caBundle = injected;
    });
  }
  replacement['metadata'] = {
    ...live.metadata,
    labels: { ...live.metadata.labels, ...desired.metadata.labels },
    annotations: { ...live.metadata.annotations, ...desired.metadata.annotations },
  };
  return replacement;
}

async function removeOwned(
  kubeConfig: KubeConfig,
  kind: RegistrationKind,
  name: string,
  onRemoved?: () => void,
): Promise<void> {
  const path = `${COLLECTION[kind]}/${name}`;
  let live: LiveObject;
  try {
    live = await kubeJson<LiveObject>(kubeConfig, 'GET', path, { action: `read ${kind} ${name}` });
  } catch (error) {
    if (isNotFound(error)) return;
    throw error;
  }
  // Someone else's object that happens to share the name is not ours to delete.
  if (live.metadata.labels?.[OWNED_LABEL[0]] !== OWNED_LABEL[1]) return;
  try {
    await kubeJson(kubeConfig, 'DELETE', path, {
      body: { apiVersion: 'v1', kind: 'DeleteOptions', preconditions: { uid: live.metadata.uid } },
      action: `delete ${kind} ${name}`,
    });
    onRemoved?.();
  } catch (error) {
    if (isNotFound(error)) return;
    if (error instanceof KubeError && error.status === 409) return; // replaced meanwhile: next pass decides
    throw error;
  }
}

/** Deletes every registration object named `name` that nodeflavor made (uninstall hooks, tests). */
export async function removeAdmissionRegistration(kubeConfig: KubeConfig, name: string): Promise<void> {
  for (const kind of Object.keys(COLLECTION) as RegistrationKind[]) await removeOwned(kubeConfig, kind, name);
}

/** The owner reference to ClusterRole `name` (its uid read now), for config.registrationOwner. */
export async function clusterRoleOwner(kubeConfig: KubeConfig, name: string): Promise<OwnerReference> {
  const role = await kubeJson<LiveObject>(
    kubeConfig,
    'GET',
    `/apis/rbac.authorization.k8s.io/v1/clusterroles/${encodeURIComponent(name)}`,
    { action: `read ClusterRole ${name} (the admission registration's owner)` },
  );
  return {
    apiVersion: 'rbac.authorization.k8s.io/v1',
    kind: 'ClusterRole',
    name,
    uid: role.metadata.uid ?? '',
  };
}

/** What is registered under `name` (for a controller run with --no-webhook, whose guard another process runs). */
export type RegistrationFinding =
  | { state: 'present'; kinds: RegistrationKind[] }
  | { state: 'absent' }
  | { state: 'unreadable'; why: string };

/**
 * Whether a guard is registered under `name`: the webhook configuration, or the policy AND its
 * binding (a policy without a binding enforces nothing). Reads by name only, which the chart's
 * RBAC allows when admission is enabled.
 */
export async function findRegistration(kubeConfig: KubeConfig, name: string): Promise<RegistrationFinding> {
  const exists = async (kind: RegistrationKind): Promise<boolean> => {
    try {
      await kubeJson(kubeConfig, 'GET', `${COLLECTION[kind]}/${encodeURIComponent(name)}`, {
        action: `read ${kind} ${name}`,
      });
      return true;
    } catch (error) {
      if (isNotFound(error)) return false;
      throw error;
    }
  };
  try {
    const kinds: RegistrationKind[] = [];
    if (await exists('ValidatingWebhookConfiguration')) kinds.push('ValidatingWebhookConfiguration');
    if ((await exists('ValidatingAdmissionPolicy')) && (await exists('ValidatingAdmissionPolicyBinding')))
      kinds.push('ValidatingAdmissionPolicy', 'ValidatingAdmissionPolicyBinding');
    return kinds.length > 0 ? { state: 'present', kinds } : { state: 'absent' };
  } catch (error) {
    // Forbidden (the chart grants no read when admission is off) says nothing is known; anything
    // else (unreachable, 5xx) is for the caller to retry.
    if (error instanceof KubeError && (error.status === 401 || error.status === 403))
      return { state: 'unreadable', why: error.message };
    throw error;
  }
}
