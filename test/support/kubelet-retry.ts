import { setTimeout as delay } from 'node:timers/promises';
import type { PluginRun } from './plugin-process.js';

/**
 * Whether kubelet would make a failed plugin call again: a DEL after any failure (it keeps tearing a sandbox down
 * until that succeeds, and DEL is idempotent), any call answered with code 11 ("try again later"). Never a
 * NoFreeLeaseError: that is how a leaked lease shows, and retries across the cooldown would wait the leak out.
 */
export function kubeletRetries(command: string, run: PluginRun): boolean {
  if (run.code === 0) return false;
  const error = run.json as { code?: unknown; details?: unknown } | undefined;
  if (error?.details === 'NoFreeLeaseError') return false;
  return command === 'DEL' || error?.code === 11;
}

export interface RetryPolicy {
  /** Calls in all, the first included. */
  readonly maxAttempts: number;
  readonly pauseMs: number;
}

/** Sized for the emulated guests: a few tries, seconds apart (kubelet's own pace is slower still). */
export const KUBELET_RETRY: RetryPolicy = { maxAttempts: 4, pauseMs: 2_000 };

/**
 * Calls as kubelet would: again while `kubeletRetries` says so, up to `maxAttempts`. Every failed answer that is
 * retried goes to `onRetry` first, so a harness can count it, list it and fail a run that needed too many.
 */
export async function callAsKubelet(
  command: string,
  call: () => Promise<PluginRun>,
  onRetry: (failed: PluginRun, attempt: number) => void,
  policy: RetryPolicy = KUBELET_RETRY,
): Promise<PluginRun> {
  for (let attempt = 1; ; attempt++) {
    const run = await call();
    if (!kubeletRetries(command, run) || attempt >= policy.maxAttempts) return run;
    onRetry(run, attempt);
    await delay(policy.pauseMs);
  }
}
