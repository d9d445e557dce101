// Waiting on conditions with a deadline: the only synchronisation e2e tests use.
import { setTimeout as delay } from 'node:timers/promises';

export interface WaitOptions {
  timeoutMs?: number;
  intervalMs?: number;
  /** What we were waiting for, for the failure message. */
  what: string;
}

/** Polls `probe` until it returns a value other than undefined/false; throws at the deadline. */
export async function waitFor<T>(
  probe: () => Promise<T | undefined | false> | T | undefined | false,
  options: WaitOptions,
): Promise<T> {
  const deadline = Date.now() + (options.timeoutMs ?? 30_000);
  let lastError: unknown;
  while (Date.now() < deadline) {
    try {
      const value = await probe();
      if (value !== undefined && value !== false) return value;
    } catch (error) {
      lastError = error;
    }
    await delay(options.intervalMs ?? 100);
  }
  const detail = lastError instanceof Error ? ` (last error: ${lastError.message})` : '';
  throw new Error(
    `timed out after ${(options.timeoutMs ?? 30_000) / 1000} s waiting for ${options.what}${detail}`,
  );
}

export function uniqueName(prefix: string): string {
  return `${prefix}-${Math.random().toString(36).slice(2, 8)}`;
}
