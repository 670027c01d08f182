/**
 * `npm run fabric [-- --only l2/boot,l3/pod] [--controls] [--verbose]`: the VPC fabric matrix in the VM, printed as
 * a table. --controls also runs every control with its defence removed, then restored, in each configuration run.
 */
import { formatControls, formatMatrix, formatRun, runFabric, unsupportedReason } from './harness.js';

const args = process.argv.slice(2);
const onlyAt = args.indexOf('--only');
const run = await runFabric({
  verbose: args.includes('--verbose'),
  ...(onlyAt >= 0 && args[onlyAt + 1] ? { only: args[onlyAt + 1] } : {}),
  ...(args.includes('--controls') ? { controls: 'all' } : {}),
});
console.log(`${formatMatrix(run.results.filter((r) => !r.cell.startsWith('control ')))}\n${formatRun(run)}`);
console.log(formatControls(run.results));
const unexpected = run.results.filter((r) => !r.ok && !unsupportedReason(r));
console.log(
  `\n${run.results.length} cells, ${unexpected.length} unexpected FAIL, VM exit ${run.exitCode}, ${Math.round(run.wallMs / 1000)} s`,
);
if (run.results.length === 0) console.log(run.consoleTail);
process.exit(unexpected.length > 0 || run.results.length === 0 ? 1 : 0);
