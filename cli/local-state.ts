import { existsSync, mkdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { CliError, EXIT } from './errors.js';

/**
 * The state file a running local cloud (`vpc-lease local up`, or `npm start -- --keep`) leaves in the
 * project-local folder: its endpoints and names, so `vpc-lease --local …` finds it without exported variables.
 * Removed when that process stops.
 */
export interface LocalState {
  readonly pid: number;
  readonly startedAt: string;
  /** `local up` or `npm start --keep`. */
  readonly owner: 'local-up' | 'npm-start';
  readonly region: string;
  readonly accountId: string;
  readonly endpoints: {
    readonly ec2: string;
    readonly autoScaling: string;
    readonly sqs: string;
    readonly dynamodb: string;
  };
  readonly tableName: string;
  readonly clusterName: string;
  readonly queueUrl: string;
  readonly dlqUrl: string;
  readonly vpcId: string;
  readonly subnetIds: readonly string[];
  readonly dataDir: string;
  /** `npm start --keep`: each running simulated node's agent, where its /metrics is served (a loopback port each). */
  readonly nodes?: readonly { readonly instanceId: string; readonly metricsUrl: string }[];
}

export class LocalStateError extends CliError {
  constructor(message: string) {
    super(message, EXIT.environment);
  }
}

export const PROJECT_ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');

/** `.local/` at the project root unless VPC_LEASE_LOCAL_DIR says otherwise (tests use a temp folder). */
export function defaultLocalDir(env: NodeJS.ProcessEnv = process.env): string {
  return resolve(env['VPC_LEASE_LOCAL_DIR'] || join(PROJECT_ROOT, '.local'));
}

export function statePath(localDir: string): string {
  return join(localDir, 'state.json');
}

export function writeLocalState(localDir: string, state: LocalState): void {
  mkdirSync(localDir, { recursive: true });
  const path = statePath(localDir);
  // Through a temp file and rename: a reader never sees half a file.
  writeFileSync(`${path}.tmp`, `${JSON.stringify(state, null, 2)}\n`);
  renameSync(`${path}.tmp`, path);
}

export function removeLocalState(localDir: string, pid = process.pid): void {
  const state = tryReadLocalState(localDir);
  // Only the process that wrote it removes it (a second `local up` must not lose the first one's file).
  if (state && state.pid !== pid) return;
  rmSync(statePath(localDir), { force: true });
}

export function tryReadLocalState(localDir: string): LocalState | undefined {
  const path = statePath(localDir);
  if (!existsSync(path)) return undefined;
  try {
    return JSON.parse(readFileSync(path, 'utf8')) as LocalState;
  } catch {
    return undefined;
  }
}

export function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** The running local cloud's state. @throws LocalStateError when none runs (or its process died). */
export function readLocalState(localDir: string): LocalState {
  const state = tryReadLocalState(localDir);
  if (!state)
    throw new LocalStateError(
      `no local cloud is running (no ${statePath(localDir)}): start one with \`vpc-lease local up\` or \`npm start -- --keep\``,
    );
  if (!isAlive(state.pid))
    throw new LocalStateError(
      `the local cloud of ${statePath(localDir)} (pid ${state.pid}) is not running any more: \`vpc-lease local up\` starts a new one`,
    );
  return state;
}
