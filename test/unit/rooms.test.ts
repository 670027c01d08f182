import { existsSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';

const ROOT = resolve(import.meta.dirname, '..', '..');

/** What ships: each Lambda's handler, the node binary's entry points, and the CDK app with its construct. */
const DEPLOYED_ENTRIES = [
  'lambdas/instance-lifecycle/handler.ts',
  'lambdas/pool-manager/handler.ts',
  'lambdas/reconciler/handler.ts',
  'node/main.ts',
  'node/cli.ts',
  'infra/app.ts',
  'infra/construct/index.ts',
];

/** Rooms no deployed module may reach: the local cloud stands in for AWS, and test machinery is for tests. */
const FORBIDDEN_ROOMS = ['local-cloud/', 'test/'];

const IMPORT =
  /(?:^|[\s;])(?:import|export)\s[^'"]*?from\s*['"]([^'"]+)['"]|(?:^|[\s;])import\s*\(?\s*['"]([^'"]+)['"]/g;

/** The relative specifiers a source file imports (type-only imports included: they still couple the rooms). */
function relativeImports(source: string): string[] {
  const specs: string[] = [];
  for (const m of source.matchAll(IMPORT)) {
    const spec = m[1] ?? m[2];
    if (spec?.startsWith('.')) specs.push(spec);
  }
  return specs;
}

function resolveSpecifier(fromFile: string, spec: string): string | undefined {
  const base = resolve(dirname(fromFile), spec);
  for (const candidate of [base.replace(/\.js$/, '.ts'), base, `${base}.ts`, join(base, 'index.ts')])
    if (existsSync(candidate) && candidate.endsWith('.ts')) return candidate;
  return undefined;
}

/** Every project file reachable from `entries` through relative imports, with the chain that reached it. */
function importGraph(entries: readonly string[]): Map<string, string[]> {
  const reached = new Map<string, string[]>();
  const queue: [string, string[]][] = entries.map((e) => [join(ROOT, e), [e]]);
  while (queue.length > 0) {
    const [file, chain] = queue.shift()!;
    if (reached.has(file)) continue;
    reached.set(file, chain);
    for (const spec of relativeImports(readFileSync(file, 'utf8'))) {
      const target = resolveSpecifier(file, spec);
      if (target && !reached.has(target)) queue.push([target, [...chain, relative(ROOT, target)]]);
    }
  }
  return reached;
}

describe('Rooms by purpose', () => {
  it('reads static, re-exported and dynamic imports', () => {
    const source = [
      "import { a } from './a.js';",
      "import type { B } from '../b.js';",
      "export { c } from './c/index.js';",
      "const d = await import('./d.js');",
      "import './e.js';",
      "import { readFileSync } from 'node:fs';",
    ].join('\n');
    expect(relativeImports(source)).toEqual(['./a.js', '../b.js', './c/index.js', './d.js', './e.js']);
  });

  it('no deployed code (Lambdas, node binary, CDK app and construct) imports the local cloud or test machinery', () => {
    const graph = importGraph(DEPLOYED_ENTRIES);
    // The walk must reach the product's depths, or an empty graph would pass.
    expect(graph.size).toBeGreaterThan(100);
    const offenders = [...graph]
      .filter(([file]) => FORBIDDEN_ROOMS.some((room) => relative(ROOT, file).startsWith(room)))
      .map(([, chain]) => chain.join(' → '));
    expect(offenders).toEqual([]);
  });

  it('sees a forbidden import when one is there (control: the local cloud reaches itself)', () => {
    const graph = importGraph(['local-cloud/cloud.ts']);
    expect([...graph.keys()].some((f) => relative(ROOT, f).startsWith('local-cloud/ec2/'))).toBe(true);
  });
});
