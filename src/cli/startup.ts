// The checks `nodeflavor run` makes before it writes anything (decisions in startup-checks.ts):
// given its Node's name (in a Pod), whether that Node is trusted (it reads it); who the API server says
// this process is (SelfSubjectReview, allowed for every authenticated user), and, for a
// controller without its own admission guard, whether one is registered.
// A transient failure (API server unreachable or silent, 5xx, 429) is retried with backoff for
// as long as it lasts, and reported through `onWaiting` (/readyz says why the process is not
// ready): exiting would only have the kubelet restart the pod in a loop while the API server is
// briefly down. A definite answer (who we are, what is registered) decides at once.

import type { Logger } from 'pino';
import { readNodePlacement } from '../kube/node-placement.ts';
import { KubeReviews } from '../kube/reviews.ts';
import { KubeError } from '../runtime/kube-error.ts';
import type { KubeConfig } from '../runtime/kubeconfig.ts';
import { findRegistration } from '../webhook/admission-registration.ts';
import {
  type GuardDecision,
  guardDecision,
  identityRefusal,
  type PlacementDecision,
  placementDecision,
  type StartupConfig,
} from './startup-checks.ts';

const MAX_RETRY_DELAY_MS = 5_000;

interface StartupVerdict {
  username: string;
  /** The one line to exit with (code 2), when the process must not run. */
  refusal?: string;
  guard: GuardDecision;
  /** Set when the process runs on an untrusted Node because --allow-untrusted-node says so. */
  placementWarning?: string;
}

export async function startupChecks(
  kubeConfig: KubeConfig,
  config: StartupConfig,
  log: Logger,
  /** Why the checks have not finished yet: a sentence for /readyz. */
  onWaiting: (why: string) => void = () => undefined,
): Promise<StartupVerdict> {
  const retried = <T>(what: string, attempt: () => Promise<T>) =>
    retriedWhileTransient(log, what, attempt, onWaiting);
  // First of all: the key ring must not be loaded on a node whose administrator could read it.
  const nodeName = config.nodeName;
  const placement: PlacementDecision =
    nodeName === undefined
      ? {}
      : placementDecision(
          config,
          await retried(`reading the Node this process runs on (${nodeName})`, () =>
            readNodePlacement(kubeConfig, nodeName),
          ),
        );
  if (placement.refusal) return { username: '', refusal: placement.refusal, guard: { guarded: false } };
  if (nodeName !== undefined && !placement.warning) log.info({ node: nodeName }, 'running on a trusted Node');
  const placementWarning = placement.warning ? { placementWarning: placement.warning } : {};
  const username = await retried(
    'asking the API server who this process is (SelfSubjectReview)',
    async () => {
      const name = await new KubeReviews(kubeConfig).whoAmI();
      if (!name) throw new KubeError(401, 'Unauthorized', 'SelfSubjectReview returned no username');
      return name;
    },
  );
  log.info({ username }, 'running as this identity (SelfSubjectReview)');
  const refusal = identityRefusal(config, username);
  if (refusal) return { username, refusal, guard: { guarded: false }, ...placementWarning };
  const registration =
    config.controller && !config.webhook
      ? await retried('looking for the admission registration another process serves', () =>
          findRegistration(kubeConfig, config.webhookConfigName),
        )
      : undefined;
  const guard = guardDecision(config, registration);
  if (registration?.state === 'present')
    log.info(
      { name: config.webhookConfigName, kinds: registration.kinds },
      'nodes are guarded by an admission registration that another process serves',
    );
  return { username, ...(guard.refusal ? { refusal: guard.refusal } : {}), guard, ...placementWarning };
}

function transient(error: unknown): boolean {
  if (!(error instanceof KubeError)) return true; // not an HTTP answer: the request never got through
  return error.status === 0 || error.status === 429 || error.status >= 500;
}

async function retriedWhileTransient<T>(
  log: Logger,
  what: string,
  attempt: () => Promise<T>,
  onWaiting: (why: string) => void,
): Promise<T> {
  onWaiting(what);
  for (let delay = 250, attempts = 1; ; delay = Math.min(delay * 2, MAX_RETRY_DELAY_MS), attempts++) {
    try {
      return await attempt();
    } catch (error) {
      if (!transient(error)) throw error;
      const message = (error as Error).message;
      onWaiting(`${what}: ${message} (attempt ${attempts}; retrying)`);
      log.warn({ err: message, attempts }, 'start-up check failed; retrying');
      await new Promise((resolve) => setTimeout(resolve, delay));
    }
  }
}
