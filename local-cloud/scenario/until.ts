import { VpcLeaseError } from '../../shared/errors.js';
import { sleepMs } from '../../shared/sleep.js';

export class ScenarioTimeoutError extends VpcLeaseError {}

/** Polls `check` every 25 ms until it returns true (real time; the cloud itself runs scaled). */
export async function until(what: string, check: () => boolean | Promise<boolean>, timeoutMs = 60_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (await check()) return;
    if (Date.now() > deadline) throw new ScenarioTimeoutError(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await sleepMs(25);
  }
}
