import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { ensureTable } from '../../shared/lease-store/ensure-table.js';

/** dynalite in a process of its own, with the lease table made. */
export interface DynaliteProcess {
  readonly endpoint: string;
  readonly pid: number;
  close(): Promise<void>;
}

// Prints the port it listens on, then serves until killed or its stdin ends: the parent holds the pipe's other
// end, so the kernel ends it when the parent dies in any way (SIGKILL too) and no server outlives its bench.
const SERVER = `
const dynalite = require('dynalite');
const server = dynalite({ createTableMs: 0, deleteTableMs: 0, updateTableMs: 0 });
server.listen(0, '127.0.0.1', () => process.stdout.write(server.address().port + '\\n'));
process.stdin.on('end', () => process.exit(0)).resume();
`;

/**
 * The local cloud is one Node thread (Lambdas, simulators, the DynamoDB proxy); at a doubled EC2 rate it was
 * ~0.9 of a core busy, so its timers fired late. Running dynalite beside it uses the machine's second core.
 */
export async function startDynaliteProcess(tableName: string, region: string): Promise<DynaliteProcess> {
  const child = spawn(process.execPath, ['-e', SERVER], { stdio: ['pipe', 'pipe', 'inherit'] });
  let out = '';
  child.stdout.setEncoding('utf8');
  const port = await new Promise<number>((resolve, reject) => {
    child.once('error', reject);
    child.once('exit', (code) => reject(new Error(`dynalite exited with ${code} before listening`)));
    child.stdout.on('data', (chunk: string) => {
      out += chunk;
      if (out.includes('\n')) resolve(Number(out.trim()));
    });
  });
  const endpoint = `http://127.0.0.1:${port}`;
  const client = new DynamoDBClient({
    endpoint,
    region,
    credentials: { accessKeyId: 'AKIDLOCAL', secretAccessKey: 'local-secret' },
  });
  try {
    await ensureTable(client, tableName, { pollMs: 10 });
  } finally {
    client.destroy();
  }
  return {
    endpoint,
    pid: child.pid!,
    close: async () => {
      if (child.exitCode !== null) return;
      child.kill('SIGTERM');
      await once(child, 'exit');
    },
  };
}
