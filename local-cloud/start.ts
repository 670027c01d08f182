/**
 * `npm start`: the whole of vpc-lease on this machine, no AWS account needed (see START.md and `--help`).
 * Progress goes to stderr as it happens; the report goes to stdout (text, or one JSON object with `--json`).
 * Exit code 0 when every checked invariant held and every pod call succeeded, 1 otherwise, 2 on bad options.
 */

import { PROJECT_ROOT, removeLocalState, writeLocalState } from '../cli/local-state.js';
import { errorMessage, ValidationError } from '../shared/errors.js';
import { HostNet } from './scenario/host-net.js';
import { parseScenarioArgs, type ScenarioOptions, USAGE } from './scenario/options.js';
import { renderReport } from './scenario/report.js';
import { CLUSTER_NAME, runScenario, type ScenarioRun, TABLE_NAME } from './scenario/run.js';

// package.json's engines allow Node 20; the SDK's warning concerns SDK releases newer than the pinned one.
process.env['AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED'] ??= 'true';

function progressWriter(): (line: string) => void {
  const startMs = Date.now();
  return (line) => {
    const s = ((Date.now() - startMs) / 1000).toFixed(1).padStart(5);
    process.stderr.write(`[${s}s] ${line}\n`);
  };
}

async function main(): Promise<number> {
  let options: ScenarioOptions | 'help';
  try {
    options = parseScenarioArgs(process.argv.slice(2), PROJECT_ROOT);
  } catch (err) {
    process.stderr.write(`npm start: ${errorMessage(err)}\n\n${USAGE}\n`);
    return 2;
  }
  if (options === 'help') {
    process.stdout.write(`${USAGE}\n`);
    return 0;
  }
  const opts = options;
  const hostNet = new HostNet();
  let run: ScenarioRun | undefined;
  // Namespaces and links must not outlive the run, whatever ends it: the exit handler is synchronous and
  // idempotent, the signal handlers close the cloud too.
  process.on('exit', () => hostNet.cleanup());
  let stopping = false;
  const stop = (signal: NodeJS.Signals): void => {
    if (stopping) return;
    stopping = true;
    const code = signal === 'SIGINT' ? 130 : 143;
    // Closing the cloud under requests still in flight can throw inside dynalite ("Database is closed"); once
    // stopping, the signal decides the exit status, and the exit handler still removes namespaces and links.
    process.on('uncaughtException', (err) => {
      process.stderr.write(`${signal}: while stopping: ${errorMessage(err)}\n`);
      process.exit(code);
    });
    // Commands in flight (an `ip netns add`, a plugin ADD) finish first, so none creates anything after the
    // cleanup; then the namespaces and links go, then the cloud.
    hostNet
      .shutdown()
      .then((removed) => {
        process.stderr.write(
          `\n${signal}: stopping; removed ${removed.namespaces} namespaces and ${removed.links} host links\n`,
        );
        removeLocalState(opts.localDir);
        return run?.close();
      })
      .finally(() => process.exit(code));
  };
  process.on('SIGINT', stop);
  process.on('SIGTERM', stop);

  const progress = progressWriter();
  try {
    run = await runScenario(opts, { progress }, hostNet);
  } catch (err) {
    // Stopping on a signal makes the scenario fail on purpose; the signal handler exits.
    if (stopping) await new Promise<never>(() => {});
    hostNet.cleanup();
    process.stderr.write(`npm start failed: ${errorMessage(err)}\n`);
    return 1;
  }
  // A scenario can also end normally with failed pods because the signal's cleanup took their namespaces away;
  // the signal handler owns the exit then, so the status is the signal's and not a failure's.
  if (stopping) await new Promise<never>(() => {});
  let report = run.report;
  if (!opts.keep) {
    const removed = await run.close();
    report = { ...report, cleanup: { ...removed, done: true } };
  }
  process.stdout.write(opts.json ? `${JSON.stringify(report)}\n` : `\n${renderReport(report)}\n`);
  if (!opts.keep) {
    // A newcomer's next step: the report above is all this run leaves, so say how to keep it for the CLI.
    if (!opts.json)
      progress('to look around: `npm start -- --keep`, then `npx vpc-lease --local nodes` in another shell');
    return report.ok ? 0 : 1;
  }

  run.deployment.startSchedule('reconciler');
  writeLocalState(opts.localDir, {
    pid: process.pid,
    startedAt: new Date().toISOString(),
    owner: 'npm-start',
    region: run.cloud.region,
    accountId: run.cloud.accountId,
    endpoints: run.cloud.endpoints,
    tableName: TABLE_NAME,
    clusterName: CLUSTER_NAME,
    queueUrl: run.deployment.queue.url(),
    dlqUrl: run.deployment.dlq.url(),
    vpcId: run.vpcId,
    subnetIds: run.subnetIds,
    dataDir: opts.localDir,
    nodes: run.agents().map((a) => ({ instanceId: a.instanceId, metricsUrl: a.metricsUrl })),
  });
  progress(
    'local cloud kept running for the CLI: try `npx vpc-lease --local nodes` in another shell; Ctrl-C here stops it',
  );
  await new Promise<never>(() => {}); // until a signal ends the process
  return 0;
}

main().then(
  (code) => process.exit(code),
  (err: unknown) => {
    process.stderr.write(`npm start failed: ${err instanceof ValidationError ? err.message : String(err)}\n`);
    process.exit(1);
  },
);
