import { errorMessage, ValidationError } from '../shared/errors.js';
import { checkCommandLine, type ParsedCommandLine, parseCommandLine } from './args.js';
import { auditCommand } from './commands/audit.js';
import type { Command } from './commands/command.js';
import { dlqCommand } from './commands/dlq.js';
import { enisCommand } from './commands/enis.js';
import { gcCommand } from './commands/gc.js';
import { leaseCommand, leasesCommand } from './commands/leases.js';
import { localCommand } from './commands/local.js';
import { migrateCommand } from './commands/migrate.js';
import { nodeCommand } from './commands/node.js';
import { nodesCommand } from './commands/nodes.js';
import { limitsCommand, maxPodsCommand } from './commands/planning.js';
import { subnetsCommand } from './commands/subnets.js';
import { CliContext, type Io } from './context.js';
import { CliError, EXIT, explainAwsError } from './errors.js';

export const COMMANDS: readonly Command[] = [
  nodesCommand,
  nodeCommand,
  leasesCommand,
  leaseCommand,
  enisCommand,
  subnetsCommand,
  auditCommand,
  gcCommand,
  migrateCommand,
  dlqCommand,
  limitsCommand,
  maxPodsCommand,
  localCommand,
];

export function helpText(): string {
  const width = Math.max(...COMMANDS.map((c) => c.name.length));
  return [
    'usage: vpc-lease [--json] [--region R] [--table T] [--cluster C] [--local] <command> [options]',
    '',
    'Commands:',
    ...COMMANDS.map((c) => `  ${c.name.padEnd(width)}  ${c.summary}`),
    '',
    'Options:',
    '  --json         one JSON document on stdout instead of tables',
    '  --region R     AWS region (default: AWS_REGION or your profile)',
    '  --table T      the lease table (default: VPC_LEASE_TABLE or vpc-lease)',
    '  --cluster C    the cluster name on ENI tags (default: VPC_LEASE_CLUSTER_NAME or vpc-lease)',
    '  --local        talk to the local cloud of `vpc-lease local up` / `npm start -- --keep`',
    '  --local-dir D  its folder (default .local/ in the project, or VPC_LEASE_LOCAL_DIR)',
    '',
    'Against AWS the standard credential chain applies; AWS_ENDPOINT_URL_<SERVICE> variables are honoured.',
    'Exit codes: 0 ok, 1 negative answer (drift, not found), 2 bad command line, 3 AWS or local cloud unusable.',
    '`vpc-lease <command> --help` shows a command’s usage.',
  ].join('\n');
}

/** The whole CLI as a function: argv in, text out through `io`, exit code back (tests call this in-process). */
export async function runCli(argv: readonly string[], io: Io): Promise<number> {
  let line: ParsedCommandLine;
  try {
    line = parseCommandLine(argv);
  } catch (err) {
    io.err(`vpc-lease: ${errorMessage(err)}\n${helpText().split('\n')[0]}\n`);
    return EXIT.usage;
  }
  if (line.command === undefined) {
    (line.help ? io.out : io.err)(`${helpText()}\n`);
    return line.help ? EXIT.ok : EXIT.usage;
  }
  const command = COMMANDS.find((c) => c.name === line.command);
  if (!command) {
    io.err(`vpc-lease: unknown command ${JSON.stringify(line.command)}\n\n${helpText()}\n`);
    return EXIT.usage;
  }
  if (line.help) {
    io.out(`usage: ${command.usage}\n${command.summary}\n`);
    return EXIT.ok;
  }
  let ctx: CliContext | undefined;
  try {
    checkCommandLine(line, command.usage, command.options, command.positionals);
    return await command.run({
      line,
      io,
      ctx: () => {
        ctx ??= new CliContext(line.global, io);
        return ctx;
      },
    });
  } catch (err) {
    const explained =
      err instanceof CliError
        ? err
        : (explainAwsError(
            err,
            ctx?.errorContext ?? {
              region: line.global.region,
              tableName: line.global.table ?? 'vpc-lease',
              local: line.global.local,
            },
          ) ?? (err instanceof ValidationError ? new CliError(err.message, EXIT.usage) : undefined));
    if (explained) {
      io.err(`vpc-lease ${command.name}: ${explained.message}\n`);
      return explained.exitCode;
    }
    io.err(`vpc-lease ${command.name}: failed: ${errorMessage(err)}\n`);
    return EXIT.environment;
  } finally {
    ctx?.destroy();
  }
}
