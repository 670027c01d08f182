import { type ChildProcess, spawn } from 'node:child_process';
import { chmodSync, existsSync, mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { AttachmentBusyError, attachmentLockPath, lockAttachment } from '../../node/journal/lock.js';
import { buildNativeAddon } from '../../packaging/build.js';
import { sleepMs } from '../../shared/sleep.js';
import { missing } from '../support/capabilities.js';
import { abstractLockAttachment, abstractLockName } from './support/abstract-lock.js';

const NOBODY = 65534;

/**
 * What a hostNetwork pod running as a non-root user can do on the node: bind the abstract socket name of an
 * attachment's lock (the host netns is its netns), and try to open or create the lock file. It prints what it got
 * and keeps holding whatever it bound until killed.
 */
const SQUATTER = `
const net = require('node:net'), fs = require('node:fs');
const [name, path] = JSON.parse(process.argv[1]);
const out = {};
const report = () => {
  try { fs.openSync(path, 'a'); out.open = 'opened'; } catch (e) { out.open = e.code; }
  process.stdout.write(JSON.stringify(out) + '\\n');
};
const s = net.createServer();
s.on('error', (e) => { out.bind = e.code; report(); });
s.listen(name, () => { out.bind = 'bound'; report(); });
`;

function squat(name: string, path: string): Promise<{ child: ChildProcess; got: { bind: string; open: string } }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['-e', SQUATTER, JSON.stringify([name, path])], {
      uid: NOBODY,
      gid: NOBODY,
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    child.once('error', reject);
    child.stdout?.once('data', (line: Buffer) => resolve({ child, got: JSON.parse(line.toString('utf8')) }));
  });
}

describe.skipIf(missing('root'))('Function: lockAttachment', () => {
  // flock and SO_PEERCRED come from the setns addon, built here on a fresh clone.
  beforeAll(() => void buildNativeAddon(), 300_000);
  let scope: string;
  const children: ChildProcess[] = [];
  beforeEach(() => {
    scope = mkdtempSync(join(tmpdir(), 'vpc-lease-lock-'));
    // As /var/lib/cni/vpc-lease may be: only the lock directory itself keeps others out.
    chmodSync(scope, 0o755);
  });
  afterEach(() => {
    for (const c of children) c.kill('SIGKILL');
    children.length = 0;
    rmSync(scope, { recursive: true, force: true });
  });

  it('cannot be held by a non-root process in the host netns', async () => {
    await (await lockAttachment(scope, 'c0', 'eth0', 0)).release(); // the lock directory exists, as on a node
    const { child, got } = await squat(abstractLockName(scope, 'c1', 'eth0'), attachmentLockPath(scope, 'c1', 'eth0'));
    children.push(child);

    const lock = await lockAttachment(scope, 'c1', 'eth0', 200);

    expect(got).toEqual({ bind: 'bound', open: 'EACCES' });
    expect(statSync(join(scope, 'locks')).mode & 0o777).toBe(0o700);
    await lock.release();
  });

  it('control: the abstract-socket lock it replaced is held by the same non-root process', async () => {
    const { child, got } = await squat(abstractLockName(scope, 'c1', 'eth0'), attachmentLockPath(scope, 'c1', 'eth0'));
    children.push(child);

    await expect(abstractLockAttachment(scope, 'c1', 'eth0', 200)).rejects.toThrow(AttachmentBusyError);
    expect(got.bind).toBe('bound');
  });

  it('narrows a lock directory left wider, so a non-root process cannot create the lock file first', async () => {
    await (await lockAttachment(scope, 'c1', 'eth0', 0)).release();
    chmodSync(join(scope, 'locks'), 0o777);

    const lock = await lockAttachment(scope, 'c2', 'eth0', 0);
    const { child, got } = await squat(abstractLockName(scope, 'c3', 'eth0'), attachmentLockPath(scope, 'c3', 'eth0'));
    children.push(child);

    expect(got.open).toBe('EACCES');
    await lock.release();
  });

  it('is released by the kernel when its holder is killed', async () => {
    const path = attachmentLockPath(scope, 'c1', 'eth0');
    await (await lockAttachment(scope, 'c0', 'eth0', 0)).release(); // the directory exists
    const addon = join(__dirname, '..', '..', 'node', 'native', 'build', 'Release', 'vpc_lease_netns.node');
    const holder = spawn(
      process.execPath,
      [
        '-e',
        `const fd = require('node:fs').openSync(${JSON.stringify(path)}, 'a');
         process.stdout.write(String(require(${JSON.stringify(addon)}).tryLock(fd)) + '\\n');
         setInterval(() => {}, 1000);`,
      ],
      { stdio: ['ignore', 'pipe', 'inherit'] },
    );
    children.push(holder);
    const took = await new Promise<string>((resolve) => holder.stdout?.once('data', (b: Buffer) => resolve(`${b}`)));
    expect(took.trim()).toBe('true');

    await expect(lockAttachment(scope, 'c1', 'eth0', 100)).rejects.toThrow(AttachmentBusyError);
    holder.kill('SIGKILL');
    await new Promise((resolve) => holder.once('exit', resolve));
    const lock = await lockAttachment(scope, 'c1', 'eth0', 0);

    await lock.release();
    expect(existsSync(path)).toBe(false);
  });

  it('lets one of many concurrent calls in one process (the agent) in at a time, and leaves no file', async () => {
    let inside = 0;
    let most = 0;
    let entered = 0;

    await Promise.all(
      Array.from({ length: 24 }, async () => {
        const lock = await lockAttachment(scope, 'c1', 'eth0', 30_000);
        inside += 1;
        most = Math.max(most, inside);
        entered += 1;
        await sleepMs(2);
        inside -= 1;
        await lock.release();
      }),
    );

    expect({ most, entered }).toEqual({ most: 1, entered: 24 });
    expect(existsSync(attachmentLockPath(scope, 'c1', 'eth0'))).toBe(false);
  });
});
