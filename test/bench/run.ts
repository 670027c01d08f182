/**
 * `npm run bench` runs every benchmark; `npm run bench -- NAME…` runs some (cni, churn, scale, cost, lambdas).
 * Each prints ONE JSON line: `{"bench": NAME, …figures, "machine": {…}}`. Flags: `--rounds N` (cni, lambdas),
 * `--seconds N` (churn), `--instances N` or `--large` (scale: 1000 instances), `--adopt` (scale: pod ENIs
 * from the launch template, adopted), `--prefix-delegation` / `--no-prefix-delegation` (scale: that mode only;
 * default both), `--time-scale X` and
 * `--concurrency N` (scale: simulator pace, Lambda MaximumConcurrency), `--ec2-buckets JSON` (scale: an account's
 * raised EC2 buckets, `{"AttachNetworkInterface":{"bucket":100,"refillPerSecond":10}}`), `--seed N`,
 * `--baseline DIR` (churn: another build's dist/, whose agent runs beside this build's in the same run).
 * Never part of `npm test`: these are figures, not pass/fail — nothing here asserts a wall-clock limit.
 */
import { parseArgs } from 'node:util';
import { parseEc2Buckets } from '../../shared/ec2/account-buckets.js';
import { machineInfo } from './machine.js';
import { BENCHMARKS, type BenchFlags } from './registry.js';

const { values, positionals } = parseArgs({
  allowPositionals: true,
  options: {
    rounds: { type: 'string' },
    seconds: { type: 'string' },
    instances: { type: 'string' },
    'time-scale': { type: 'string' },
    concurrency: { type: 'string' },
    large: { type: 'boolean', default: false },
    adopt: { type: 'boolean', default: false },
    'prefix-delegation': { type: 'boolean' },
    seed: { type: 'string' },
    'ec2-buckets': { type: 'string' },
    baseline: { type: 'string' },
  },
  allowNegative: true,
});

const flags: BenchFlags = {
  rounds: values.rounds ? Number(values.rounds) : undefined,
  seconds: values.seconds ? Number(values.seconds) : undefined,
  instances: values.instances ? Number(values.instances) : values.large ? 1000 : undefined,
  timeScale: values['time-scale'] ? Number(values['time-scale']) : undefined,
  concurrency: values.concurrency ? Number(values.concurrency) : undefined,
  seed: values.seed ? Number(values.seed) : 1,
  adopt: values.adopt,
  prefixDelegation: values['prefix-delegation'],
  ec2Buckets: values['ec2-buckets'] ? parseEc2Buckets(values['ec2-buckets'], '--ec2-buckets') : undefined,
  baseline: values.baseline,
};

const names = positionals.length > 0 ? positionals : Object.keys(BENCHMARKS);
const unknown = names.filter((n) => !(n in BENCHMARKS));
if (unknown.length > 0) {
  console.error(`unknown benchmark(s) ${unknown.join(', ')}; known: ${Object.keys(BENCHMARKS).join(', ')}`);
  process.exit(2);
}

let failed = 0;
for (const name of names) {
  const startedAt = new Date().toISOString();
  try {
    const figures = await BENCHMARKS[name]!(flags);
    console.log(JSON.stringify({ bench: name, startedAt, ...figures, machine: machineInfo() }));
  } catch (err) {
    failed += 1;
    const error = err instanceof Error ? (err.stack ?? err.message) : String(err);
    console.log(JSON.stringify({ bench: name, startedAt, error: error.split('\n')[0], machine: machineInfo() }));
    console.error(error);
  }
}
process.exit(failed > 0 ? 1 : 0);
