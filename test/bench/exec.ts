import { runPluginProcess } from '../support/plugin-process.js';

/** The benchmarks run the plugin exactly as the node suite does (`test/support/plugin-process.ts`). */
export const execPlugin = runPluginProcess;
