import { readFileSync, writeSync } from 'node:fs';
import { isSea } from 'node:sea';
import { errorMessage } from '../shared/errors.js';
import { CniError } from './cni/errors.js';
import { runSkel } from './cni/skel.js';
import { NetlinkDatapath } from './datapath/netlink-datapath.js';
import { install, installOptionsFromArgs } from './installer/install.js';
import { storeReadiness } from './installer/readiness.js';
import { SEA_NATIVE_FILES } from './launcher/layout.js';
import { pluginHandlers } from './plugin/handlers.js';
import { readBootId } from './plugin/status.js';
import { openLeaseStore } from './store/open-store.js';

/** `vpc-lease-cni` as the runtime calls it (CNI_* env + stdin), or `vpc-lease-cni install …`. */
export async function runCli(args: readonly string[], env: NodeJS.ProcessEnv): Promise<number> {
  if (args[0] === 'install') {
    try {
      // The single executable installs itself (its argv[1] is the executable too) and only its natives beside it.
      const sea = isSea();
      const options = installOptionsFromArgs(args.slice(1), env, sea ? process.execPath : (process.argv[1] ?? ''));
      const say = (line: string) => process.stderr.write(`vpc-lease-cni install: ${line}\n`);
      const report = await install(sea ? { ...options, supportFiles: SEA_NATIVE_FILES } : options, {
        probe: storeReadiness(options.pluginConfig, options.networkName, env),
        sleep: (ms) => new Promise((resolve) => setTimeout(resolve, ms)),
        nowMs: Date.now,
        log: say,
      });
      say(`installed ${report.installed.join(', ')}; wrote ${report.conflist} (${report.written}):`);
      process.stderr.write(`${JSON.stringify(report.body)}\n`);
      return 0;
    } catch (err) {
      const details = err instanceof CniError && err.details ? ` (${err.details})` : '';
      process.stderr.write(`vpc-lease-cni install: ${errorMessage(err)}${details}\n`);
      return 1;
    }
  }
  const handlers = pluginHandlers({
    env,
    nowMs: Date.now,
    bootId: () => readBootId(),
    openStore: openLeaseStore,
    openDatapath: (log, hooks) => NetlinkDatapath.open(log, hooks),
  });
  return runSkel(handlers, {
    env,
    // A closed or absent stdin reads as empty, which the skel reports as a decode failure (code 6).
    readStdin: () => {
      try {
        return readFileSync(0, 'utf8');
      } catch {
        return '';
      }
    },
    // Synchronous: the process exits right after, and nothing else may ever reach stdout.
    writeStdout: (text) => {
      writeSync(1, text);
    },
  });
}
