import { execFileSync, spawn } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
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
