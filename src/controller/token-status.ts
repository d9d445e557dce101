// Read-modify-write of a FlavoredToken's status with optimistic concurrency: the first attempt
// uses the cached object; a 409 (someone wrote first) re-reads from the API server and re-runs
// the mutation on fresh data, so a decision is never written over a newer state.
import type { FlavoredTokenStatus } from '../flavor/resources.ts';
import { kubeJson } from '../kube/fetch.ts';
import { KubeError } from '../kube/kube-error.ts';
import { type StoredToken, tokenPath, writeTokenStatus } from '../kube/token-writes.ts';
import type { ControllerContext } from './context.ts';

const MAX_ATTEMPTS = 5;

export async function updateTokenStatus(
  ctx: ControllerContext,
  name: string,
  mutate: (token: StoredToken) => Promise<FlavoredTokenStatus | undefined>,
): Promise<StoredToken | undefined> {
  let token = ctx.caches.tokens.get(name);
  for (let attempt = 1; token && attempt <= MAX_ATTEMPTS; attempt++) {
    const status = await mutate(token);
    if (!status || JSON.stringify(status) === JSON.stringify(token.status ?? {})) return token;
    try {
      return await writeTokenStatus(ctx.kubeConfig, token, status);
    } catch (error) {
      if (!(error instanceof KubeError) || error.status !== 409 || attempt === MAX_ATTEMPTS) throw error;
      try {
        token = await kubeJson<StoredToken>(ctx.kubeConfig, 'GET', tokenPath(name), {
          action: `read FlavoredToken ${name}`,
        });
      } catch (readError) {
        if (readError instanceof KubeError && readError.status === 404) return undefined;
        throw readError;
      }
    }
  }
  return token;
}
