import { spawn } from 'node:child_process';
import { chmodSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { NO_EXTENSIONS } from '../../node/agent/observer.js';
import { encodeRequest } from '../../node/agent/protocol.js';
import { AgentServer } from '../../node/agent/server.js';
import { WarmDeps } from '../../node/agent/warm-deps.js';
import { buildNativeAddon } from '../../packaging/build.js';
import { createLogger } from '../../shared/log.js';
import { missing } from '../support/capabilities.js';

const NOBODY = 65534;
const VERSION = encodeRequest({ env: { CNI_COMMAND: 'VERSION' }, stdin: '{"cniVersion":"1.0.0"}' });

/** Connects as `uid`, sends a VERSION request and resolves with every byte the agent sent back (hex). */
function requestAs(uid: number, socket: string): Promise<string> {
  const script = `
const c = require('node:net').connect(process.argv[1], () => c.write(Buffer.from(process.argv[2], 'base64')));
const got = [];
c.on('data', (b) => got.push(b));
c.on('error', () => undefined);
c.on('close', () => process.stdout.write(Buffer.concat(got).toString('hex')));`;
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['-e', script, socket, VERSION.toString('base64')], {
      uid,
      gid: uid,
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    let out = '';
    child.stdout?.on('data', (b: Buffer) => {
      out += b.toString('utf8');
    });
    child.once('error', reject);
    child.once('close', () => resolve(out));
  });
}

describe.skipIf(missing('root'))('Class: AgentServer, who may call', () => {
  // flock and SO_PEERCRED come from the setns addon, built here on a fresh clone.
  beforeAll(() => void buildNativeAddon(), 300_000);
  let dir: string;
  let server: AgentServer;
  const logged: string[] = [];
  beforeEach(async () => {
    dir = mkdtempSync(join(tmpdir(), 'vpc-lease-trust-'));
    const log = createLogger({ sink: (line) => logged.push(line) });
    server = await AgentServer.start({
      socketPath: join(dir, 'run', 'agent.sock'),
      deps: new WarmDeps(log, Date.now),
      observer: NO_EXTENSIONS.observer,
      log,
    });
  });
  afterEach(async () => {
    await server.stop(0);
    rmSync(dir, { recursive: true, force: true });
  });

  it('refuses a non-root client even when the file modes would let it in', async () => {
    const socket = join(dir, 'run', 'agent.sock');
    // The modes are the first wall; widen them so the peer check is what stands.
    chmodSync(dir, 0o755);
    chmodSync(dirname(socket), 0o755);
    chmodSync(socket, 0o666);

    const asNobody = await requestAs(NOBODY, socket);
    const asRoot = await requestAs(0, socket);

    expect(asNobody).toBe('');
    expect(asRoot.slice(0, 2)).toBe('41'); // 'A': accepted, then the VERSION answer
    expect(
      logged.some((l) => l.includes('agent: refused a caller that is not root') && l.includes('"uid":65534')),
    ).toBe(true);
  });
});
