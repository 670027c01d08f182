import { existsSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import type { TestSpecification, Vitest } from 'vitest/node';
import { LONGEST_FIRST, LongestFirst } from '../../vitest.config.js';

/** The suite's file order: the longest files start first, so CI's two workers finish together. */
describe('vitest file order (vitest.config.ts)', () => {
  const root = '/repo';
  const spec = (file: string): TestSpecification =>
    ({ moduleId: `${root}/${file}`, project: { name: '', config: { root, sequence: { groupOrder: 0 } } } }) as never;
  // No timings and no sizes, as on a fresh clone: vitest's own order would leave the input order.
  const ctx = { config: { root }, cache: { getFileTestResults: () => undefined, getFileStats: () => undefined } };

  it('starts the listed files first, in the listed order, and keeps the others after them', async () => {
    const others = ['test/unit/a.test.ts', 'test/unit/b.test.ts'];
    const input = [others[0]!, ...[...LONGEST_FIRST].reverse(), others[1]!].map(spec);
    const sorted = await new LongestFirst(ctx as unknown as Vitest).sort(input);
    expect(sorted.map((s) => s.moduleId.slice(root.length + 1))).toEqual([...LONGEST_FIRST, ...others]);
  });

  it('names only files that exist (a renamed file would silently lose its place)', () => {
    expect(LONGEST_FIRST.filter((f) => !existsSync(f))).toEqual([]);
  });
});
