// Every Kubernetes API request nodeflavor makes has a deadline: an API server that accepts
// connections and never answers must cost a bounded wait, never a stuck reconcile, lease renewal
// or review. A KubeConfig can also be *fenced* by a signal (a leader's term): once the signal
// fires, every request made through it is cut off at once, those in flight included, and new
// ones fail before they are sent. Both reach client-node's typed clients through
// applySecurityAuthentication (which every client-node request passes through) and kubeFetch.
import type { KubeConfig, RequestAuthContext as RequestContext } from './kubeconfig.ts';

/** Long enough for a page of a large list on a loaded API server; short enough to notice a hang. */
const DEFAULT_REQUEST_TIMEOUT_MS = 30_000;

interface RequestPolicy {
  timeoutMs: number;
  fence?: AbortSignal;
}

const policies = new WeakMap<KubeConfig, RequestPolicy>();
const patched = new WeakSet<KubeConfig>();

type Authenticate = (this: KubeConfig, context: RequestContext) => Promise<void>;

/** The error a fenced request fails with (its name is what toKubeError recognises). */
export class FenceClosedError extends Error {
  constructor(message = 'this replica lost its leadership: the request was cancelled') {
    super(message);
    this.name = 'FenceClosedError';
  }
}

/**
 * Gives every request made through `kubeConfig` a deadline. Idempotent: without `timeoutMs` an
 * earlier deadline stays (else the default applies); with it, it replaces the earlier one.
 */
export function withRequestDeadlines<T extends KubeConfig>(kubeConfig: T, timeoutMs?: number): T {
  const ms = timeoutMs ?? policies.get(kubeConfig)?.timeoutMs ?? DEFAULT_REQUEST_TIMEOUT_MS;
  if (!Number.isFinite(ms) || ms <= 0) throw new RangeError('timeoutMs must be positive');
  policies.set(kubeConfig, { ...policies.get(kubeConfig), timeoutMs: ms });
  if (!patched.has(kubeConfig)) {
    const target = kubeConfig as unknown as { applySecurityAuthentication: Authenticate };
    const original = target.applySecurityAuthentication;
    target.applySecurityAuthentication = async function (this: KubeConfig, context: RequestContext) {
      await original.call(this, context);
      const signal = requestSignal(this, { signal: context.getSignal() });
      if (signal) context.setSignal(signal);
    };
    patched.add(kubeConfig);
  }
  return kubeConfig;
}

/**
 * A view of `kubeConfig` whose requests are all cancelled when `fence` fires (a leader's term):
 * the same credentials, connections and deadline, one more signal. Cheap: one object per term.
 */
export function fencedKubeConfig<T extends KubeConfig>(kubeConfig: T, fence: AbortSignal): T {
  withRequestDeadlines(kubeConfig);
  const fenced = Object.create(kubeConfig) as T;
  const base = policies.get(kubeConfig) as RequestPolicy;
  const fences = base.fence ? AbortSignal.any([base.fence, fence]) : fence;
  policies.set(fenced, { timeoutMs: base.timeoutMs, fence: fences });
  return fenced;
}

/**
 * The signal one request runs under: the caller's own (if any), the KubeConfig's fence, and a
 * deadline (`timeoutMs` overrides the KubeConfig's; 0 means none, for watches, which have their
 * own inactivity watchdog). Throws at once when the fence has already fired.
 */
export function requestSignal(
  kubeConfig: KubeConfig,
  options: { signal?: AbortSignal | undefined; timeoutMs?: number | undefined } = {},
): AbortSignal | undefined {
  const policy = policies.get(kubeConfig);
  const signals: AbortSignal[] = [];
  if (options.signal) signals.push(options.signal);
  if (policy?.fence) {
    if (policy.fence.aborted) throw fenceReason(policy.fence);
    signals.push(policy.fence);
  }
  const timeoutMs = options.timeoutMs ?? policy?.timeoutMs ?? DEFAULT_REQUEST_TIMEOUT_MS;
  if (timeoutMs > 0) signals.push(AbortSignal.timeout(timeoutMs));
  if (signals.length <= 1) return signals[0];
  return AbortSignal.any(signals);
}

function fenceReason(fence: AbortSignal): Error {
  return fence.reason instanceof Error ? fence.reason : new FenceClosedError();
}
