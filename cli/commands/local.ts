import { spawn } from 'node:child_process';
import { closeSync, mkdirSync, openSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { sleepMs } from '../../shared/sleep.js';
import { CliError, EXIT, UsageError } from '../errors.js';
import {
  defaultLocalDir,
  isAlive,
  PROJECT_ROOT,
  removeLocalState,
  statePath,
  tryReadLocalState,
} from '../local-state.js';
import { type Command, print } from './command.js';

const DAEMON = join(dirname(fileURLToPath(import.meta.url)), '..', 'local-daemon.ts');

function tail(path: string, lines = 15): string {
  try {
    return readFileSync(path, 'utf8').trimEnd().split('\n').slice(-lines).join('\n');
  } catch {
    return '';
  }
}

/**
 * `local up` starts the local cloud as a detached process (DynamoDB on disk under the local folder, the control
 * plane deployed) and returns once its state file is written; `local down` stops it; `local status` shows it.
 */
export const localCommand: Command = {
  name: 'local',
  usage: 'vpc-lease local up|down|status [--time-scale X] [--local-dir DIR]',
  summary: 'start, stop or show the background local cloud the --local flag talks to',
  options: ['time-scale'],
  positionals: [1, 1],
  async run(input) {
    const action = input.line.positionals[0];
    const localDir = input.line.global.localDir ?? defaultLocalDir(input.io.env);
    const state = tryReadLocalState(localDir);
    const running = state && isAlive(state.pid) ? state : undefined;
    if (action === 'status') {
      print(input, { running: running !== undefined, state: running ?? null }, () =>
        running
          ? [
              `local cloud running (pid ${running.pid}, ${running.owner}, since ${running.startedAt})`,
              ...Object.entries(running.endpoints).map(([k, v]) => `  ${k.padEnd(12)} ${v}`),
              `  table        ${running.tableName}`,
              `  dlq          ${running.dlqUrl}`,
              `  data         ${running.dataDir}`,
            ]
          : ['no local cloud running'],
      );
      return running ? EXIT.ok : EXIT.negative;
    }
    if (action === 'down') {
      if (!running) {
        if (state) removeLocalState(localDir, state.pid); // a stale file of a process that died
        print(input, { stopped: false }, () => ['no local cloud running']);
        return EXIT.ok;
      }
      process.kill(running.pid, 'SIGTERM');
      for (let i = 0; i < 200 && isAlive(running.pid); i += 1) await sleepMs(50);
      if (isAlive(running.pid)) throw new CliError(`pid ${running.pid} did not stop within 10 s`, EXIT.environment);
      removeLocalState(localDir, running.pid);
      print(input, { stopped: true, pid: running.pid }, () => [`local cloud stopped (pid ${running.pid})`]);
      return EXIT.ok;
    }
    if (action !== 'up') throw new UsageError(`local: expected up, down or status, got ${JSON.stringify(action)}`);
    if (running) {
      print(input, { started: false, state: running }, () => [
        `local cloud already running (pid ${running.pid}); \`vpc-lease local down\` stops it`,
      ]);
      return EXIT.ok;
    }
    const timeScaleRaw = input.line.options['time-scale'];
    const timeScale = timeScaleRaw === undefined ? 1 : Number(timeScaleRaw);
    if (!(timeScale > 0 && timeScale <= 1))
      throw new UsageError(`--time-scale: expected a number in (0, 1], got ${JSON.stringify(timeScaleRaw)}`);
    mkdirSync(localDir, { recursive: true });
    const logPath = join(localDir, 'local-cloud.log');
    const logFd = openSync(logPath, 'a');
    const child = spawn(
      process.execPath,
      ['--import', import.meta.resolve('tsx'), DAEMON, localDir, String(timeScale)],
      {
        cwd: PROJECT_ROOT,
        detached: true,
        stdio: ['ignore', logFd, logFd],
        env: { ...input.io.env, AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED: 'true' },
      },
    );
    closeSync(logFd);
    child.unref();
    const pid = child.pid ?? -1;
    for (let i = 0; i < 600; i += 1) {
      const written = tryReadLocalState(localDir);
      if (written?.pid === pid) {
        print(input, { started: true, state: written }, () => [
          `local cloud running in the background (pid ${pid}); data under ${localDir}, log ${logPath}`,
          ...Object.entries(written.endpoints).map(([k, v]) => `  ${k.padEnd(12)} ${v}`),
          'use it with `vpc-lease --local <command>`; stop it with `vpc-lease local down`',
        ]);
        return EXIT.ok;
      }
      if (!isAlive(pid)) break;
      await sleepMs(50);
    }
    if (isAlive(pid)) process.kill(pid, 'SIGTERM');
    throw new CliError(
      `the local cloud did not start (no ${statePath(localDir)} within 30 s); its log:\n${tail(logPath)}`,
      EXIT.environment,
    );
  },
};
