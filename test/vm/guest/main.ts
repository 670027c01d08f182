/** Entry point of the in-guest suite (bundled to one file and run with plain node inside the VM). */
import { kernelCases } from './kernel-cases.js';
import { runGuestCases } from './runner.js';

const resultFile = process.argv[2];
if (!resultFile) {
  console.error('usage: guest.mjs <result-file>');
  process.exit(2);
}
const cases = [...kernelCases];
const failed = await runGuestCases(cases, resultFile);
process.exit(failed > 0 ? 1 : 0);
