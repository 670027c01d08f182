/**
 * `npm run local`: the local cloud in the foreground until SIGINT/SIGTERM. Prints one `export` line per
 * variable on stdout (so `eval "$(npm run -s local | head -8)"` or copy-paste points any AWS SDK or CLI at
 * it), then logs to stderr.
 *
 *   --data-dir DIR     keep DynamoDB data under DIR (default: in memory)
 *   --time-scale X     real ms per simulated ms (default 1)
 *   --seed N           seed of ids and choices (default 1)
 *   --table NAME       create the lease table NAME (default vpc-lease; "" for none)
 *   --port-base P      EC2 on P, Auto Scaling P+1, SQS P+2, DynamoDB P+3 (default: random ports)
 */
import { parseArgs } from 'node:util';
import { createLogger } from '../shared/log.js';
import { startLocalCloud } from './cloud.js';

function shellQuote(value: string): string {
  return /^[\w@%+=:,./-]+$/.test(value) ? value : `'${value.replace(/'/g, `'\\''`)}'`;
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      'data-dir': { type: 'string' },
      'time-scale': { type: 'string', default: '1' },
      seed: { type: 'string', default: '1' },
      table: { type: 'string', default: 'vpc-lease' },
      'port-base': { type: 'string' },
    },
  });
  const timeScale = Number(values['time-scale']);
  const seed = Number(values.seed);
  const portBase = values['port-base'] !== undefined ? Number(values['port-base']) : undefined;
  if (!(timeScale >= 0) || !Number.isInteger(seed) || (portBase !== undefined && !Number.isInteger(portBase))) {
    throw new Error(
      'usage: npm run local -- [--data-dir DIR] [--time-scale X] [--seed N] [--table NAME] [--port-base P]',
    );
  }
  const log = createLogger({ level: 'info' });
  const cloud = await startLocalCloud({
    ...(values['data-dir'] ? { dataDir: values['data-dir'] } : {}),
    timeScale,
    seed,
    ...(values.table ? { leaseTable: values.table } : {}),
    seedNetwork: true,
    ...(portBase !== undefined
      ? { ports: { ec2: portBase, autoScaling: portBase + 1, sqs: portBase + 2, dynamodb: portBase + 3 } }
      : {}),
    log,
  });
  for (const [name, value] of Object.entries(cloud.env)) process.stdout.write(`export ${name}=${shellQuote(value)}\n`);
  log.info('local cloud running; Ctrl-C to stop', {
    endpoints: cloud.endpoints,
    vpcId: cloud.network?.vpcId,
    subnetIds: cloud.network?.subnetIds,
    leaseTable: values.table || undefined,
    dataDir: values['data-dir'],
  });
  let stopping = false;
  const stop = (signal: string): void => {
    if (stopping) return;
    stopping = true;
    log.info('stopping local cloud', { signal });
    cloud.close().then(
      () => process.exit(0),
      (err: unknown) => {
        log.error('failed to stop local cloud cleanly', { err });
        process.exit(1);
      },
    );
  };
  process.on('SIGINT', () => stop('SIGINT'));
  process.on('SIGTERM', () => stop('SIGTERM'));
}

main().catch((err: unknown) => {
  process.stderr.write(`failed to start local cloud: ${err instanceof Error ? err.message : String(err)}\n`);
  process.exit(1);
});
