import type { NodeRecord } from '../../shared/domain/node.js';
import type { CommandOption, ParsedCommandLine } from '../args.js';
import type { CliContext, Io } from '../context.js';
import { CliError, EXIT } from '../errors.js';

export interface CommandInput {
  readonly line: ParsedCommandLine;
  readonly io: Io;
  /** The AWS or local-cloud context, built on first call (commands that need no AWS never build it). */
  readonly ctx: () => CliContext;
}

export interface Command {
  readonly name: string;
  readonly usage: string;
  readonly summary: string;
  readonly options: readonly CommandOption[];
  readonly positionals: readonly [min: number, max: number];
  run(input: CommandInput): Promise<number>;
}

/** `--json`: one JSON document on stdout; otherwise the lines for people. */
export function print(input: CommandInput, value: unknown, lines: () => readonly string[]): void {
  if (input.line.global.json) input.io.out(`${JSON.stringify(value, null, 2)}\n`);
  else input.io.out(`${lines().join('\n')}\n`);
}

export function isoOrDash(ms: number | undefined): string {
  return ms === undefined ? '-' : new Date(ms).toISOString().replace(/\.\d{3}Z$/, 'Z');
}

const INSTANCE_ID = /^i-[0-9a-f]{8}([0-9a-f]{9})?$/;

export function checkInstanceId(value: string): string {
  if (!INSTANCE_ID.test(value))
    throw new CliError(`--instance: ${JSON.stringify(value)} is not an instance id (i-…)`, EXIT.usage);
  return value;
}

/** The node item of an instance: its partition key carries the account and region the CLI cannot guess. */
export async function findNode(ctx: CliContext, instanceId: string): Promise<NodeRecord> {
  const node = (await ctx.store().listNodes()).find((n) => n.instanceId === instanceId);
  if (!node) throw new CliError(`no node ${instanceId} in table ${ctx.tableName}`, EXIT.negative);
  return node;
}
