import { execFileSync } from 'node:child_process';
import { copyFileSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { NODE_METRIC_NAMES } from '../../node/metrics/node-metrics.js';
import { missing } from '../support/capabilities.js';

const DIR = join(import.meta.dirname, '..', '..', 'node', 'deploy', 'monitoring');
const skip = missing('prometheus');

/** Runs promtool; its exit status and everything it printed. */
function promtool(args: readonly string[], cwd: string): { ok: boolean; output: string } {
  try {
    return { ok: true, output: execFileSync('promtool', args, { cwd, encoding: 'utf8', stdio: 'pipe' }) };
  } catch (err) {
    const e = err as { stdout?: string; stderr?: string };
    return { ok: false, output: `${e.stdout ?? ''}${e.stderr ?? ''}` };
  }
}

const HISTOGRAM_SUFFIXES = ['_bucket', '_sum', '_count'];
const EXPORTED = new Set<string>(Object.values(NODE_METRIC_NAMES));

/** Names in a PromQL expression that look like ours (vpc_lease_*, process_*) but that the node does not export. */
function unknownMetricNames(expr: string): string[] {
  const names = expr.match(/\b(?:vpc_lease|process)_[a-z0-9_]+/g) ?? [];
  return names.filter((name) => {
    if (EXPORTED.has(name)) return false;
    const suffix = HISTOGRAM_SUFFIXES.find((s) => name.endsWith(s));
    return !(suffix && EXPORTED.has(name.slice(0, -suffix.length)));
  });
}

function dashboardExprs(): string[] {
  const dashboard = JSON.parse(readFileSync(join(DIR, 'dashboard.json'), 'utf8')) as {
    panels: { targets: { expr: string }[] }[];
    templating: { list: { type: string; query?: unknown }[] };
  };
  return [
    ...dashboard.panels.flatMap((p) => p.targets.map((t) => t.expr)),
    ...dashboard.templating.list.filter((v) => v.type === 'query').map((v) => String(v.query)),
  ];
}

function alertExprs(text: string): string[] {
  return [...text.matchAll(/expr: (?:\|\n((?: {10}.*\n)+)|(.*)\n)/g)].map((m) => m[1] ?? m[2] ?? '');
}

describe.skipIf(skip)('node/deploy/monitoring: alert rules and dashboard', () => {
  const temps: string[] = [];
  afterAll(() => {
    for (const t of temps) rmSync(t, { recursive: true, force: true });
  });

  /** promtool test rules over a copy of the rules with one edit: the unit tests must catch it. */
  function testMutated(from: string | RegExp, to: string): { ok: boolean; output: string } {
    const dir = mkdtempSync(join(tmpdir(), 'vpc-lease-alerts-'));
    temps.push(dir);
    const rules = readFileSync(join(DIR, 'alerts.yml'), 'utf8');
    const mutated = rules.replace(from, to);
    expect(mutated).not.toBe(rules);
    writeFileSync(join(dir, 'alerts.yml'), mutated);
    copyFileSync(join(DIR, 'alerts.test.yml'), join(dir, 'alerts.test.yml'));
    return promtool(['test', 'rules', 'alerts.test.yml'], dir);
  }

  it('promtool check rules accepts the rule file', () => {
    const result = promtool(['check', 'rules', 'alerts.yml'], DIR);
    expect(result.output).toContain('SUCCESS: 4 rules found');
    expect(result.ok).toBe(true);
  });

  it('promtool test rules: every alert fires where it should and stays silent where it should not', () => {
    const result = promtool(['test', 'rules', 'alerts.test.yml'], DIR);
    expect(result.output).toContain('SUCCESS');
    expect(result.ok, result.output).toBe(true);
  });

  it.each([
    [
      'without the waiting-ADDs clause, a full but quiet node would page',
      /\n {10}and on \(instance, job\)\n.*\n/,
      '\n',
    ],
    ['counting lost claim races as store errors', '{error!="ConditionalCheckFailedException"}', ''],
    ['a fallback threshold of 50%', '> 0.1', '> 0.5'],
    ['firing at once instead of after 15 minutes', 'for: 15m', 'for: 0m'],
  ])('the unit tests catch a broken rule (negative control): %s', (_label, from, to) => {
    const result = testMutated(from, to);
    expect(result.ok).toBe(false);
    expect(result.output).toMatch(/FAILED|alertname/);
  });

  it('the dashboard and the rules name only metrics the node exports', () => {
    const exprs = [...dashboardExprs(), ...alertExprs(readFileSync(join(DIR, 'alerts.yml'), 'utf8'))];
    expect(exprs.length).toBeGreaterThan(12);
    for (const expr of exprs) expect(unknownMetricNames(expr), expr).toEqual([]);
    // Every panel and rule reads at least one of our metrics (or `up`, for the agent's reachability).
    for (const expr of exprs) expect(/\b(?:vpc_lease|process)_[a-z0-9_]+|\bup\{/.test(expr), expr).toBe(true);
  });

  it('finds a misspelled metric name (negative control)', () => {
    expect(unknownMetricNames('sum(rate(vpc_lease_cni_request_total[5m]))')).toEqual(['vpc_lease_cni_request_total']);
    expect(unknownMetricNames('rate(vpc_lease_store_request_duration_seconds_total[5m])')).toEqual([
      'vpc_lease_store_request_duration_seconds_total',
    ]);
    expect(unknownMetricNames('rate(vpc_lease_store_request_duration_seconds_bucket[5m])')).toEqual([]);
  });
});
