/**
 * `node agent.mjs <web|dns|relay> <name>`: one workload of agent.ts, bundled apart from the guest suite so that it
 * starts in a fraction of the time (the suite's bundle is 1.4 MB, which the emulated guest compiles at every start).
 */
import { runAgent } from './agent.js';

runAgent(process.argv[2] ?? 'web', process.argv[3] ?? 'agent');
