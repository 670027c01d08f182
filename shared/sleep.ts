/** Resolves after `ms` milliseconds; the default wherever a wait is injectable (tests pass their own). */
export function sleepMs(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
