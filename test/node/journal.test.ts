import { spawn } from 'node:child_process';
import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
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

  it('replaces a record with the claimed address, lists and removes it, leaving no temp files', () => {
    const j = new Journal(dir);
    j.createIntent({ containerId: 'c1', ifName: 'eth0', netns: '/a', createdAtMs: 1 });
    j.write({ containerId: 'c1', ifName: 'eth0', netns: '/a', createdAtMs: 1, ip: '10.0.0.9' });
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

  it('lets exactly one of many racing processes publish the intent', async () => {
    // Bundled once so each racer is a bare `node` (tsx would make the race mostly start-up time).
    const bundle = join(dir, 'journal.mjs');
    await build({
      entryPoints: [resolve('node/journal/journal.ts')],
      bundle: true,
      platform: 'node',
      format: 'esm',
      outfile: bundle,
    });
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
