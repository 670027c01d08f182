import { execFileSync, spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { build } from 'esbuild';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { Journal } from '../../node/journal/journal.js';

describe('Journal', () => {
  let dir: string;
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'vpc-lease-journal-'));
  });
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  it('publishes an intent once and keeps the first record when asked again', () => {
    const j = new Journal(dir);
    expect(j.createIntent({ containerId: 'c1', ifName: 'eth0', netns: '/a', createdAtMs: 1 })).toBe(true);
    expect(j.createIntent({ containerId: 'c1', ifName: 'eth0', netns: '/b', createdAtMs: 2 })).toBe(false);
    expect(j.read('c1', 'eth0')).toMatchObject({ netns: '/a', createdAtMs: 1 });
  });

  it('replaces a record with the claimed address, lists and removes it, leaving no temp files', async () => {
    const j = new Journal(dir);
    j.createIntent({ containerId: 'c1', ifName: 'eth0', netns: '/a', createdAtMs: 1 });
    await j.write({ containerId: 'c1', ifName: 'eth0', netns: '/a', createdAtMs: 1, ip: '10.0.0.9' });
    j.createIntent({ containerId: 'c2', ifName: 'net1', netns: '/b', createdAtMs: 1 });
    expect(j.read('c1', 'eth0')?.ip).toBe('10.0.0.9');
    expect(
      j
        .list()
        .map((r) => `${r.containerId}/${r.ifName}`)
        .sort(),
    ).toEqual(['c1/eth0', 'c2/net1']);
    j.remove('c1', 'eth0');
    j.remove('c1', 'eth0');
    expect(j.read('c1', 'eth0')).toBeUndefined();
    expect(readdirSync(join(dir, 'attachments'))).toEqual(['c2~net1.json']);
  });

  // The spec bounds no container id's length; a file name holds 255 bytes.
  const longId = (bytes: number): string => `a${'0123456789abcdef'.repeat(bytes / 16 + 1)}`.slice(0, bytes);

  it.each([240, 300, 4000])(
    'keeps a %i-byte container id through intent, write, read, list and remove',
    async (bytes) => {
      const j = new Journal(dir);
      const containerId = longId(bytes);
      expect(j.createIntent({ containerId, ifName: 'eth0', netns: '/a', createdAtMs: 1 })).toBe(true);
      expect(j.createIntent({ containerId, ifName: 'eth0', netns: '/b', createdAtMs: 2 })).toBe(false);
      await j.write({ containerId, ifName: 'eth0', netns: '/a', createdAtMs: 1, ip: '10.0.0.9' });
      // Another id sharing the first 255 bytes is another attachment.
      const sibling = `${containerId}-2`;
      expect(j.read(sibling, 'eth0')).toBeUndefined();
      j.createIntent({ containerId: sibling, ifName: 'eth0', netns: '/c', createdAtMs: 1 });
      expect(j.read(containerId, 'eth0')).toMatchObject({ containerId, ip: '10.0.0.9' });
      expect(j.list().map((r) => [r.containerId, r.ifName, r.netns])).toEqual(
        expect.arrayContaining([
          [containerId, 'eth0', '/a'],
          [sibling, 'eth0', '/c'],
        ]),
      );
      expect(j.list()).toHaveLength(2);
      j.remove(containerId, 'eth0');
      expect(j.read(containerId, 'eth0')).toBeUndefined();
      expect(j.list().map((r) => r.containerId)).toEqual([sibling]);
      j.remove(sibling, 'eth0');
      expect(readdirSync(join(dir, 'attachments'))).toEqual([]);
    },
  );

  it('finds a record under the name earlier versions wrote, and keeps writing short ids under it', async () => {
    mkdirSync(join(dir, 'attachments'));
    const old = { containerId: 'old', ifName: 'eth0', netns: '/a', createdAtMs: 1, ip: '10.0.0.7' };
    writeFileSync(join(dir, 'attachments', 'old~eth0.json'), JSON.stringify(old));
    const j = new Journal(dir);
    expect(j.read('old', 'eth0')).toEqual(old);
    expect(j.createIntent({ ...old, netns: '/b' })).toBe(false);
    expect(j.list()).toEqual([old]);
    j.createIntent({ containerId: 'new', ifName: 'eth0', netns: '/b', createdAtMs: 1 });
    expect(readdirSync(join(dir, 'attachments')).sort()).toEqual(['new~eth0.json', 'old~eth0.json']);
  });

  it('lists an interface name holding "~" (the kernel allows it) whole', () => {
    const j = new Journal(dir);
    j.createIntent({ containerId: 'c1', ifName: 'net~1', netns: '/a', createdAtMs: 1 });
    expect(j.list().map((r) => [r.containerId, r.ifName])).toEqual([['c1', 'net~1']]);
    j.remove('c1', 'net~1');
    expect(readdirSync(join(dir, 'attachments'))).toEqual([]);
  });

  it('lists an unreadable long-id record under a name that remove finds', () => {
    const j = new Journal(dir);
    const containerId = longId(300);
    j.createIntent({ containerId, ifName: 'eth0', netns: '/a', createdAtMs: 1 });
    // A power loss can leave the unsynced intent empty: then only its file name is left to go by.
    const digestName = readdirSync(join(dir, 'attachments')).find((n) => n.endsWith('~eth0.json'))!;
    writeFileSync(join(dir, 'attachments', digestName), '');
    const listed = j.list();
    expect(listed.map((r) => [r.containerId, r.ifName])).toEqual([[digestName.slice(0, -'~eth0.json'.length), 'eth0']]);
    expect(j.read(containerId, 'eth0')).toMatchObject({ containerId, createdAtMs: 0 });
    for (const r of listed) j.remove(r.containerId, r.ifName);
    expect(readdirSync(join(dir, 'attachments'))).toEqual([]);
  });

  const bundleJournal = async (): Promise<string> => {
    // Bundled so each process is a bare `node` (tsx would make a race mostly start-up time, and clutter strace).
    const bundle = join(dir, 'journal.mjs');
    await build({
      entryPoints: [resolve('node/journal/journal.ts')],
      bundle: true,
      platform: 'node',
      format: 'esm',
      outfile: bundle,
    });
    return bundle;
  };

  it('fsyncs the address record before its rename and the directory after, as the kernel sees it (strace)', async () => {
    const bundle = await bundleJournal();
    const script = `
      import { Journal } from ${JSON.stringify(bundle)};
      const j = new Journal(process.argv[1] + '/data');
      j.createIntent({ containerId: 'c1', ifName: 'eth0', netns: '/a', createdAtMs: 1 });
      await j.write({ containerId: 'c1', ifName: 'eth0', netns: '/a', createdAtMs: 1, ip: '10.0.0.9' });`;
    const trace = join(dir, 'trace');
    execFileSync('strace', [
      '-f',
      '-qq',
      '-o',
      trace,
      '-e',
      'trace=openat,fsync,fdatasync,link,linkat,rename,renameat,renameat2,close',
      process.execPath,
      '--input-type=module',
      '-e',
      script,
      dir,
    ]);
    // Replay the trace: which path each fd names, and the order of syncs and publications under data/attachments.
    const attachments = join(dir, 'data', 'attachments');
    const fds = new Map<string, string>();
    const events: string[] = [];
    const name = (path: string) => (path === attachments ? 'dir' : path.endsWith('.tmp') ? 'tmp' : path);
    for (const line of readFileSync(trace, 'utf8').split('\n')) {
      const open = /openat\(AT_FDCWD, "([^"]+)".*\)\s+= (\d+)$/.exec(line);
      if (open) fds.set(open[2]!, open[1]!);
      const sync = /f(?:data)?sync\((\d+)\)\s+= 0/.exec(line);
      const path = sync ? fds.get(sync[1]!) : undefined;
      if (path?.startsWith(attachments)) events.push(`fsync ${name(path)}`);
      const publish = /(link|rename)(?:at2?)?\(.*"([^"]+\.tmp)", .*"([^"]+\.json)"/.exec(line);
      if (publish) events.push(publish[1]!);
    }
    // The intent is published unsynced (see Journal); the record with the address is synced, then its directory.
    expect(events).toEqual(['link', 'fsync tmp', 'rename', 'fsync dir']);
  });

  it('lets exactly one of many racing processes publish the intent', async () => {
    const bundle = await bundleJournal();
    const script = `
      import { Journal } from ${JSON.stringify(bundle)};
      const won = new Journal(process.argv[1] + '/data').createIntent({ containerId: 'race', ifName: 'eth0', netns: String(process.pid), createdAtMs: 1 });
      process.stdout.write(won ? 'won' : 'lost');`;
    const racers = Array.from(
      { length: 6 },
      () =>
        new Promise<string>((done, fail) => {
          const child = spawn(process.execPath, ['--input-type=module', '-e', script, dir], {
            stdio: ['ignore', 'pipe', 'inherit'],
          });
          let out = '';
          child.stdout.on('data', (c: Buffer) => {
            out += c.toString();
          });
          child.on('error', fail);
          child.on('close', () => done(out));
        }),
    );
    const results = await Promise.all(racers);
    expect(results.filter((r) => r === 'won')).toHaveLength(1);
    expect(results.filter((r) => r === 'lost')).toHaveLength(5);
  });
});
