import { readFileSync, writeSync } from 'node:fs';
import { isSea } from 'node:sea';
import { errorMessage } from '../shared/errors.js';
import { sleepMs } from '../shared/sleep.js';
import { CniError } from './cni/errors.js';
import { type CniHandlers, runSkel } from './cni/skel.js';
import { parseNetconf } from './config/netconf.js';
import { NetlinkDatapath } from './datapath/netlink-datapath.js';
import { type InstallOptions, install, installOptionsFromArgs } from './installer/install.js';
import { storeReadiness } from './installer/readiness.js';
import { SEA_NATIVE_FILES } from './launcher/layout.js';
import { appendFallbackRecord } from './metrics/fallback-records.js';
import { observeHandlers } from './metrics/observe-handlers.js';
import { pluginHandlers } from './plugin/handlers.js';
import { readBootId } from './plugin/status.js';
import { openLeaseStore } from './store/open-store.js';

/**
 * A kubelet that admits more pods than this node has addresses for leaves the extra pods in ContainerCreating:
 * say so at install time. Only a warning: the plugin still serves the pods it has addresses for.
 */
async function warnOnKubeletMaxPods(options: InstallOptions, env: NodeJS.ProcessEnv, say: (line: string) => void) {
  try {
    const { checkKubeletMaxPods } = await import('./max-pods/figure.js');
    const check = await checkKubeletMaxPods({
      env,
      pluginConfig: options.pluginConfig,
      ...(options.kubeletConfigPath ? { kubeletConfigPath: options.kubeletConfigPath } : {}),
      ...(options.kubeletArgsPath ? { kubeletArgsPath: options.kubeletArgsPath } : {}),
    });
    if (check.exceeds) say(`warning: ${check.message}`);
  } catch (err) {
    say(`warning: cannot compare kubelet's max-pods with ours: ${errorMessage(err)}`);
  }
}

/**
 * This process ran the command itself, not the agent: the agent counts it from the record (fallback-records.ts).
 * A netconf too broken to name its dataDir leaves no record; its error is in the runtime's log anyway.
 */
function recordFallbacks(handlers: CniHandlers): CniHandlers {
  return observeHandlers(handlers, (request, outcome) => {
    const dataDir = parseNetconf(request.netconf).dataDir;
    appendFallbackRecord(dataDir, { command: request.command, ...outcome, atMs: Date.now() });
  });
}

/** `vpc-lease-cni` as the runtime calls it (CNI_* env + stdin), or `vpc-lease-cni install …` / `max-pods …` / `agent`. */
export async function runCli(args: readonly string[], env: NodeJS.ProcessEnv): Promise<number> {
  if (args[0] === 'max-pods') {
    // Loaded only here: it carries the instance-type table, which ADD and DEL must not pay for.
    const { runMaxPods } = await import('./max-pods/command.js');
    // Synchronous writes: the process exits right after, before a pipe would drain.
    return runMaxPods(args.slice(1), env, { out: (text) => writeSync(1, text), err: (text) => writeSync(2, text) });
  }
  if (args[0] === 'agent') {
    // The resident agent behind the shim (node/agent/); a plugin call never loads it.
    const [{ runAgent }, { agentMetrics }] = await Promise.all([
      import('./agent/command.js'),
      import('./metrics/agent-metrics.js'),
    ]);
    return runAgent(args.slice(1), env, agentMetrics(env).extensions);
  }
  if (args[0] === 'install') {
    try {
      // The single executable installs itself (its argv[1] is the executable too) and only its natives beside it.
      const sea = isSea();
      const options = installOptionsFromArgs(args.slice(1), env, sea ? process.execPath : (process.argv[1] ?? ''));
      const say = (line: string) => process.stderr.write(`vpc-lease-cni install: ${line}\n`);
      const report = await install(sea ? { ...options, supportFiles: SEA_NATIVE_FILES } : options, {
        // Only a wait asks the store: --no-wait-ready must not need what the probe checks (identity, endpoints).
        probe: options.skipReadyWait
          ? async () => undefined
          : storeReadiness(options.pluginConfig, options.networkName, env),
        sleep: sleepMs,
        nowMs: Date.now,
        log: say,
      });
      say(`installed ${report.installed.join(', ')}; wrote ${report.conflist} (${report.written}):`);
      process.stderr.write(`${JSON.stringify(report.body)}\n`);
      await warnOnKubeletMaxPods(options, env, say);
      return 0;
    } catch (err) {
      const details = err instanceof CniError && err.details ? ` (${err.details})` : '';
      process.stderr.write(`vpc-lease-cni install: ${errorMessage(err)}${details}\n`);
      return 1;
    }
  }
  const handlers = recordFallbacks(
    pluginHandlers({
      env,
      nowMs: Date.now,
      bootId: () => readBootId(),
      openStore: openLeaseStore,
      openDatapath: (log, hooks) => NetlinkDatapath.open(log, hooks),
    }),
  );
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
