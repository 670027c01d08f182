import { describe, expect, it } from 'vitest';
import { BUDGET_WAIT_MIN_MS, budgetWaitMsAt } from './control-plane-cloud.js';

/** The construct's function timeout, in AWS seconds. */
const FUNCTION_TIMEOUT_S = 40;

describe('Function: budgetWaitMsAt', () => {
  it.each([
    [1, 4_000],
    [5, 20_000],
    [0.25, 1_000],
  ])('at --time-scale %s is 4 AWS s on the cloud’s clock: %i real ms', (timeScale, realMs) => {
    expect(budgetWaitMsAt(timeScale)).toBe(realMs);
  });

  it('keeps the store round trips’ floor on a faster clock, and stays well inside the function timeout there', () => {
    // The chaos suite's scale: 4 AWS s would be 200 real ms, less than a grant's round trips may take.
    expect(budgetWaitMsAt(0.05)).toBe(BUDGET_WAIT_MIN_MS);
    expect(budgetWaitMsAt(0.05)).toBeLessThan((FUNCTION_TIMEOUT_S * 1000 * 0.05) / 2);
    expect(budgetWaitMsAt(0.001)).toBe(BUDGET_WAIT_MIN_MS);
  });
});
