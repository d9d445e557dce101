// Keeps the admission registration true: applies the desired webhook configurations and/or
// admission policies + bindings (server-side apply, field manager `nodeflavor`, forced, so a
// field someone else took is taken back), removes the other mode's objects, and does it again
// whenever the desired state changes (FlavorClass keys, the CA), whenever someone edits the objects
// (watched), and periodically. Server-side apply cannot remove what another manager ADDED (an extra
// matchCondition that switches the guard off, a namespace selector), so after applying we compare
// the live object with ours and overwrite it when it still differs. An unchanged apply writes
// nothing and so triggers no watch event: reacting to our own writes cannot loop.
//
// With several replicas, only the leader writes (the process's Lease, through a KubeConfig fenced
// by its term): two replicas whose generated objects differ (the old and the new release in a
// rolling upgrade) would otherwise take the objects back from each other in a loop. And no
// release writes over objects a newer revision generated (mayWriteRegistration), so a rolling
// upgrade never rolls the registration back, whichever replica leads.

import { isDeepStrictEqual } from 'node:util';
import type { Logger } from 'pino';
import { FIELD_MANAGER } from '../flavor/resources.ts';
import { CoalescedRun } from '../runtime/coalesced-run.ts';
import { fencedKubeConfig } from '../runtime/deadlines.ts';
import { kubeJson } from '../runtime/fetch.ts';
import { isNotFound, KubeError } from '../runtime/kube-error.ts';
import type { KubeConfig } from '../runtime/kubeconfig.ts';
import type { Leadership } from '../runtime/leader.ts';
import { ListWatch } from '../runtime/listwatch.ts';
import { classKeysPolicyName } from './class-keys-policy.ts';
import {
  type DesiredRegistration,
  liveRevision,
  mayWriteRegistration,
  type OwnerReference,
  type RegistrationKind,
  type RegistrationObject,
  WEBHOOK_KINDS,
} from './desired-registration.ts';
import { flavoredTokenPolicyName } from './flavored-token-policy.ts';

const API_PREFIX = '/apis/admissionregistration.k8s.io/v1';
const COLLECTION: Record<RegistrationKind, string> = {
  ValidatingWebhookConfiguration: `${API_PREFIX}/validatingwebhookconfigurations`,
  ValidatingAdmissionPolicy: `${API_PREFIX}/validatingadmissionpolicies`,
  ValidatingAdmissionPolicyBinding: `${API_PREFIX}/validatingadmissionpolicybindings`,
  MutatingWebhookConfiguration: `${API_PREFIX}/mutatingwebhookconfigurations`,
  MutatingAdmissionPolicy: `${API_PREFIX}/mutatingadmissionpolicies`,
  MutatingAdmissionPolicyBinding: `${API_PREFIX}/mutatingadmissionpolicybindings`,
};
/** The label our objects carry; we only ever delete objects that have it. */
const OWNED_LABEL = ['app.kubernetes.io/name', 'nodeflavor'] as const;
const MAX_RETRY_DELAY_MS = 30_000;

interface LiveObject {
  metadata: {
    name: string;
    resourceVersion?: string;
    uid?: string;
    labels?: Record<string, string>;
    annotations?: Record<string, string>;
  };
  [field: string]: unknown;
}

interface AdmissionRegistrarOptions {
  kubeConfig: KubeConfig;
  logger: Logger;
  /** Recomputed on every pass. */
  desired: () => DesiredRegistration;
  /** Re-apply even without any event this often (drift repair of last resort). */
  resyncMs?: number;
  /** Who may write; without it this process always does (a single replica, tests). */
  leadership?: Leadership;
  /** The revision this release generates (desiredRegistration's annotation). */
  revision: number;
  /** Told whether this release currently leaves a newer release's objects alone (a metric). */
  onDeferred?: (deferred: boolean) => void;
}

/** What the last pass did, for /readyz and logs. */
type RegistrarState = 'applied' | 'standby' | 'deferred';

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
    onError: (error, failures) => {
      this.lastError = error.message;
      // A pass cut off because this replica stopped leading is no failure of the registration.
      if (error instanceof KubeError && error.reason === 'NotLeader') return;
      this.options.logger.error({ err: error.message, failures }, 'cannot apply the admission registration');
    },
    onSettled: () => this.schedule(),
    isStopped: () => this.stopped,
  });
  private stopped = false;
  private firstSuccess: (() => void) | undefined;
  private applied = false;
  private lastState: RegistrarState | undefined;
  private lastError: string | undefined;
  private unsubscribe: (() => void) | undefined;

  constructor(options: AdmissionRegistrarOptions) {
    this.options = options;
  }

  /** Applies, then keeps applying; resolves after the first complete, successful pass. */
  start(): Promise<void> {
    const first = new Promise<void>((resolve) => {
      this.firstSuccess = resolve;
    });
    this.watchOwnObjects();
    // A new leader applies at once, rather than at the next event or resync.
    this.unsubscribe = this.options.leadership?.subscribe((term) => {
      if (term) this.refresh();
    });
    this.refresh();
    return first;
  }

  /** True once a pass completed: the registration applied, or left to the leader (a standby). */
  get isApplied(): boolean {
    return this.applied;
  }

  /** Why the first pass has not completed yet (the last error), for /readyz. */
  get notAppliedReason(): string | undefined {
    if (this.applied) return undefined;
    return this.lastError
      ? `applying the registration failed: ${this.lastError}`
      : 'applying the registration';
  }

  /** Asks for another pass (coalesced: at most one runs, at most one more is queued). */
  refresh(): void {
    this.run.request();
  }

  stop(): void {
    this.stopped = true;
    this.unsubscribe?.();
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
    const term = this.options.leadership ? this.options.leadership.term() : ALWAYS;
    if (!term) {
      this.note('standby');
      return; // the leader keeps the registration true
    }
    const kubeConfig = fencedKubeConfig(this.options.kubeConfig, term);
    const desired = this.options.desired();
    let deferred = false;
    for (const object of desired.apply) deferred = !(await this.applyOne(kubeConfig, object)) || deferred;
    for (const { kind, name } of desired.remove)
      deferred = !(await this.removeIfOurs(kubeConfig, kind, name)) || deferred;
    this.note(deferred ? 'deferred' : 'applied');
  }

  private note(state: RegistrarState): void {
    if (state === this.lastState) return;
    this.lastState = state;
    this.options.onDeferred?.(state === 'deferred');
    if (state === 'deferred')
      this.options.logger.warn(
        { revision: this.options.revision },
        'a newer nodeflavor release generated the admission registration: this release leaves it alone (expected while a rolling upgrade is under way)',
      );
  }

  /** Applies one object; false when a newer release's object is left alone. */
  private async applyOne(kubeConfig: KubeConfig, desired: RegistrationObject): Promise<boolean> {
    const path = `${COLLECTION[desired.kind]}/${desired.metadata.name}`;
    const what = `${desired.kind} ${desired.metadata.name}`;
    const current = await readLive(kubeConfig, path, what);
    if (!mayWriteRegistration(current, this.options.revision)) {
      this.options.logger.debug(
        { kind: desired.kind, revision: liveRevision(current?.metadata.annotations) },
        'left a newer release’s admission registration alone',
      );
      return false;
    }
    // The version read above is a precondition: a newer release's write in between fails this (409).
    const precondition = current?.metadata.resourceVersion;
    const body =
      precondition === undefined
        ? desired
        : { ...desired, metadata: { ...desired.metadata, resourceVersion: precondition } };
    const live = await kubeJson<LiveObject>(kubeConfig, 'PATCH', path, {
      body,
      contentType: 'application/apply-patch+yaml',
      query: { fieldManager: FIELD_MANAGER, force: true },
      action: `apply ${what}`,
    });
    const drift = driftedFields(desired, live);
    if (drift.length === 0) return true;
    this.options.logger.warn(
      { kind: desired.kind, name: desired.metadata.name, fields: drift },
      'restoring an edited admission registration',
    );
    await kubeJson(kubeConfig, 'PUT', path, {
      body: overwrite(desired, live),
      query: { fieldManager: FIELD_MANAGER },
      action: `restore ${what}`,
    });
    return true;
  }

  /** Removes the other mode's object; false when a newer release's object is left alone. */
  private async removeIfOurs(kubeConfig: KubeConfig, kind: RegistrationKind, name: string): Promise<boolean> {
    let deferred = false;
    await removeOwned(
      kubeConfig,
      kind,
      name,
      () => this.options.logger.info({ kind, name }, 'removed the admission registration of the other mode'),
      (live) => {
        deferred = !mayWriteRegistration(live, this.options.revision);
        return !deferred;
      },
    );
    return !deferred;
  }
}

/** The term of a registrar without leadership: it always writes. */
const ALWAYS = new AbortController().signal;

async function readLive(kubeConfig: KubeConfig, path: string, what: string): Promise<LiveObject | undefined> {
  try {
    return await kubeJson<LiveObject>(kubeConfig, 'GET', path, { action: `read ${what}` });
  } catch (error) {
    if (isNotFound(error)) return undefined;
    throw error;
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
  if (!WEBHOOK_KINDS.has(desired.kind)) return live;
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
  if (WEBHOOK_KINDS.has(desired.kind)) {
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
  mayRemove: (live: LiveObject) => boolean = () => true,
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
  if (!mayRemove(live)) return;
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
  for (const policy of [classKeysPolicyName(name), flavoredTokenPolicyName(name)]) {
    await removeOwned(kubeConfig, 'ValidatingAdmissionPolicy', policy);
    await removeOwned(kubeConfig, 'ValidatingAdmissionPolicyBinding', policy);
  }
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
