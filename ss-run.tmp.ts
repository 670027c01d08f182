import { runSteadyState } from './test/bench/steady-state.js';

const [nodes, pods, measured] = process.argv.slice(2).map(Number);
const r = await runSteadyState({
  nodes: nodes!,
  leasesPerNode: 30,
  claimedPerNode: 20,
  podStartsPerNodeHour: pods!,
  ...(measured ? { measuredRunsPerSchedule: measured } : {}),
});
console.log(JSON.stringify(r, null, 1));
