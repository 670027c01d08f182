/**
 * `npm run chaos`: 200 seeded chaos schedules (schedule.ts) through the whole control plane on the local cloud,
 * each followed by the invariant checks (run-schedule.ts). Prints one line per schedule and a JSON summary;
 * exits 1 on any violation. `--count N`, `--seed FIRST` (replay one: `--seed 17 --count 1`), `--workers N`
 * (schedules mostly wait on simulated time, so a few processes side by side finish sooner; each has its own
 * local cloud and environment), `--out DIR` (or CHAOS_OUT; default .test-results/chaos): where each failed
 * schedule writes its trail (trail.ts), named on the FAIL line.
 */
import { spawn } from 'node:child_process';
import { parseArgs } from 'node:util';
import { machineInfo } from '../bench/machine.js';
import { describeSchedule } from './describe.js';
import { runSchedule, type ScheduleResult } from './run-schedule.js';
import { scheduleFor } from './schedule.js';
import { DEFAULT_TRAIL_DIR } from './trail.js';

const { values } = parseArgs({
  options: {
    count: { type: 'string' },
    seed: { type: 'string' },
    workers: { type: 'string' },
    out: { type: 'string' },
    worker: { type: 'boolean', default: false },
  },
});
const count = Number(values.count ?? 200);
const first = Number(values.seed ?? 1);
const workers = Math.max(1, Number(values.workers ?? 3));
const trailDir = values.out ?? process.env['CHAOS_OUT'] ?? DEFAULT_TRAIL_DIR;

async function runSeeds(seeds: number[], emit: (r: ScheduleResult) => void): Promise<void> {
  for (const seed of seeds) {
    let result: ScheduleResult;
    try {
      result = await runSchedule(scheduleFor(seed), { trailDir });
    } catch (err) {
      result = {
        seed,
        ok: false,
        violations: [`schedule crashed: ${err instanceof Error ? err.message : String(err)}`],
        stats: {} as ScheduleResult['stats'],
      };
    }
    emit(result);
  }
}

function print(result: ScheduleResult): void {
  console.log(
    `${result.ok ? 'ok  ' : 'FAIL'} seed ${result.seed} ${describeSchedule(scheduleFor(result.seed))} ${JSON.stringify(result.stats)}`,
  );
  for (const v of result.violations) console.log(`     ${v}`);
  if (result.trailFile) console.log(`     trail: ${result.trailFile}`);
}

/** Runs `seeds` in a child process of this script; its results come back as JSON lines. */
function worker(seeds: number[], emit: (r: ScheduleResult) => void): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn(
      process.execPath,
      [
        ...process.execArgv,
        process.argv[1]!,
        '--worker',
        '--seed',
        String(seeds[0]),
        '--count',
        String(seeds.length),
        '--out',
        trailDir,
      ],
      { stdio: ['ignore', 'pipe', 'inherit'], env: process.env },
    );
    let buffer = '';
    child.stdout.on('data', (chunk: Buffer) => {
      buffer += chunk.toString('utf8');
      let nl = buffer.indexOf('\n');
      while (nl >= 0) {
        const line = buffer.slice(0, nl);
        buffer = buffer.slice(nl + 1);
        if (line.startsWith('{"seed"')) emit(JSON.parse(line) as ScheduleResult);
        nl = buffer.indexOf('\n');
      }
    });
    child.on('error', reject);
    child.on('close', () => resolve());
  });
}

const seeds = Array.from({ length: count }, (_, i) => first + i);
if (values.worker) {
  await runSeeds(seeds, (r) => console.log(JSON.stringify(r)));
  process.exit(0);
}

const results: ScheduleResult[] = [];
const started = Date.now();
const collect = (r: ScheduleResult): void => {
  results.push(r);
  print(r);
};
if (workers === 1) await runSeeds(seeds, collect);
else {
  const size = Math.ceil(seeds.length / workers);
  const slices = Array.from({ length: workers }, (_, w) => seeds.slice(w * size, (w + 1) * size)).filter(
    (s) => s.length > 0,
  );
  await Promise.all(slices.map((slice) => worker(slice, collect)));
  // A worker that died takes its remaining seeds with it: they count as failed, never as passed.
  for (const seed of seeds)
    if (!results.some((r) => r.seed === seed))
      collect({
        seed,
        ok: false,
        violations: ['worker died before this schedule ran'],
        stats: {} as ScheduleResult['stats'],
      });
}

const failed = results.filter((r) => !r.ok);
const sum = (key: keyof ScheduleResult['stats']): number =>
  results.reduce((s, r) => s + (typeof r.stats[key] === 'number' ? (r.stats[key] as number) : 0), 0);
console.log(
  JSON.stringify({
    chaos: 'summary',
    schedules: results.length,
    passed: results.length - failed.length,
    failed: failed.length,
    failedSeeds: failed.map((r) => r.seed).sort((a, b) => a - b),
    invariantViolations: failed.reduce((s, r) => s + r.violations.length, 0),
    totals: {
      instancesLaunched: sum('instancesLaunched'),
      continued: sum('continued'),
      abandoned: sum('abandoned'),
      timedOut: sum('timedOut'),
      crashes: sum('crashes'),
      ec2Faulted: sum('ec2Faulted'),
      ec2Throttled: sum('ec2Throttled'),
      dynamoThrottled: sum('dynamoThrottled'),
      deliveries: sum('deliveries'),
      lateEventsReplayed: sum('lateEventsReplayed'),
      kubeletPods: sum('kubeletPods'),
      enisDeletedByReconcile: sum('enisDeletedByReconcile'),
      nodesWithSubnetRefusals: sum('nodesWithSubnetRefusals'),
    },
    wallS: Math.round((Date.now() - started) / 1000),
    machine: machineInfo(),
  }),
);
process.exit(failed.length > 0 ? 1 : 0);
