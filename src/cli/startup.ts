// The checks `nodeflavor run` makes before it writes anything (decisions in startup-checks.ts):
// who the API server says this process is (SelfSubjectReview, allowed for every authenticated
// user), and, for a controller without its own admission guard, whether one is registered.
// A transient failure (API server unreachable, 5xx, 429) is retried for a while; then it fails.
import type { KubeConfig } from '@kubernetes/client-node';
import type { Logger } from 'pino';
import { findRegistration } from '../kube/admission-registration.ts';
import { KubeError } from '../kube/kube-error.ts';
import { KubeReviews } from '../kube/reviews.ts';
import { type GuardDecision, guardDecision, identityRefusal, type StartupConfig } from './startup-checks.ts';

const RETRY_FOR_MS = 60_000;

export interface StartupVerdict {
  username: string;
  /** The one line to exit with (code 2), when the process must not run. */
  refusal?: string;
  guard: GuardDecision;
}

export async function startupChecks(
  kubeConfig: KubeConfig,
  config: StartupConfig,
  log: Logger,
): Promise<StartupVerdict> {
  const username = await retried(log, async () => {
    const name = await new KubeReviews(kubeConfig).whoAmI();
    if (!name) throw new KubeError(401, 'Unauthorized', 'SelfSubjectReview returned no username');
    return name;
  });
  log.info({ username }, 'running as this identity (SelfSubjectReview)');
  const refusal = identityRefusal(config, username);
  if (refusal) return { username, refusal, guard: { guarded: false } };
  const registration =
    config.controller && !config.webhook
      ? await retried(log, () => findRegistration(kubeConfig, config.webhookConfigName))
      : undefined;
  const guard = guardDecision(config, registration);
  if (registration?.state === 'present')
    log.info(
      { name: config.webhookConfigName, kinds: registration.kinds },
      'nodes are guarded by an admission registration that another process serves',
    );
  return { username, ...(guard.refusal ? { refusal: guard.refusal } : {}), guard };
}

function transient(error: unknown): boolean {
  if (!(error instanceof KubeError)) return true; // not an HTTP answer: the request never got through
  return error.status === 0 || error.status === 429 || error.status >= 500;
}

async function retried<T>(log: Logger, attempt: () => Promise<T>): Promise<T> {
  const deadline = Date.now() + RETRY_FOR_MS;
  for (let delay = 250; ; delay = Math.min(delay * 2, 5000)) {
    try {
      return await attempt();
    } catch (error) {
      if (!transient(error) || Date.now() + delay > deadline) throw error;
      log.warn({ err: (error as Error).message }, 'start-up check failed; retrying');
      await new Promise((resolve) => setTimeout(resolve, delay));
    }
  }
}
