import { parseArgs } from 'node:util';
import type { GlobalOptions } from './context.js';
import { UsageError } from './errors.js';

/** Every option any command takes; each command says which of the command options it accepts. */
const OPTIONS = {
  json: { type: 'boolean' },
  region: { type: 'string' },
  table: { type: 'string' },
  cluster: { type: 'string' },
  local: { type: 'boolean' },
  'local-dir': { type: 'string' },
  help: { type: 'boolean', short: 'h' },
  // command options
  instance: { type: 'string' },
  subnet: { type: 'string' },
  state: { type: 'string' },
  'dry-run': { type: 'boolean' },
  redrive: { type: 'boolean' },
  dlq: { type: 'string' },
  'prefix-delegation': { type: 'boolean' },
  'max-pods-cap': { type: 'string' },
  'ip-family': { type: 'string' },
  'from-ec2': { type: 'boolean' },
  'time-scale': { type: 'string' },
} as const;

export const GLOBAL_OPTION_NAMES = new Set(['json', 'region', 'table', 'cluster', 'local', 'local-dir', 'help']);

export type CommandOption = Exclude<
  keyof typeof OPTIONS,
  'json' | 'region' | 'table' | 'cluster' | 'local' | 'local-dir' | 'help'
>;

export interface ParsedCommandLine {
  readonly command: string | undefined;
  readonly positionals: readonly string[];
  readonly global: GlobalOptions;
  readonly help: boolean;
  /** Command options given, by name (strings or true). */
  readonly options: Readonly<Partial<Record<CommandOption, string | boolean>>>;
}

/** @throws UsageError naming the unknown option or the missing value. */
export function parseCommandLine(argv: readonly string[]): ParsedCommandLine {
  let parsed: ReturnType<typeof parseAll>;
  try {
    parsed = parseAll(argv);
  } catch (err) {
    throw new UsageError((err as Error).message.replace(/\. To specify a positional argument.*$/s, ''));
  }
  const { values, positionals } = parsed;
  const options: Partial<Record<CommandOption, string | boolean>> = {};
  for (const [k, v] of Object.entries(values)) {
    if (!GLOBAL_OPTION_NAMES.has(k) && v !== undefined) options[k as CommandOption] = v;
  }
  const region = values.region;
  if (region !== undefined && !/^[a-z]{2}(-[a-z]+)+-\d$/.test(region))
    throw new UsageError(`--region: ${JSON.stringify(region)} is not an AWS region (like us-east-1)`);
  const table = values.table;
  if (table !== undefined && !/^[A-Za-z0-9_.-]{3,255}$/.test(table))
    throw new UsageError(`--table: ${JSON.stringify(table)} is not a DynamoDB table name`);
  return {
    command: positionals[0],
    positionals: positionals.slice(1),
    help: values.help ?? false,
    options,
    global: {
      json: values.json ?? false,
      local: values.local ?? false,
      ...(region !== undefined ? { region } : {}),
      ...(table !== undefined ? { table } : {}),
      ...(values.cluster !== undefined ? { cluster: values.cluster } : {}),
      ...(values['local-dir'] !== undefined ? { localDir: values['local-dir'] } : {}),
    },
  };
}

function parseAll(argv: readonly string[]) {
  return parseArgs({ args: [...argv], options: OPTIONS, strict: true, allowPositionals: true });
}

/** Refuses command options the command does not take, and a wrong number of arguments. */
export function checkCommandLine(
  line: ParsedCommandLine,
  usage: string,
  allowed: readonly CommandOption[],
  positionals: readonly [min: number, max: number],
): void {
  for (const name of Object.keys(line.options))
    if (!allowed.includes(name as CommandOption))
      throw new UsageError(`${line.command} does not take --${name}\nusage: ${usage}`);
  const [min, max] = positionals;
  if (line.positionals.length < min) throw new UsageError(`${line.command}: missing argument\nusage: ${usage}`);
  if (line.positionals.length > max)
    throw new UsageError(
      `${line.command}: unexpected argument ${JSON.stringify(line.positionals[max])}\nusage: ${usage}`,
    );
}
