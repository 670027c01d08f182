import { execFile } from 'node:child_process';
import {
  existsSync,
  lutimesSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  symlinkSync,
  unlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { fileLogger } from '../../node/plugin/context.js';
import { rotateIfFull } from '../../node/plugin/log-rotation.js';

const run = promisify(execFile);
const WRITER = join(import.meta.dirname, 'support', 'log-writer.ts');

/** Every JSON line of the log and its rotated generations. */
function allLines(dir: string): { tag: string; i: number }[] {
  return readdirSync(dir)
    .filter((f) => f.startsWith('cni.log'))
    .flatMap((f) => readFileSync(join(dir, f), 'utf8').split('\n').filter(Boolean))
    .map((l) => JSON.parse(l) as { tag: string; i: number });
}

describe('The plugin log is bounded: rotated at logMaxBytes, logKeepFiles generations kept', () => {
  let dir: string;
  let file: string;
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'vpc-lease-log-'));
    file = join(dir, 'cni.log');
  });
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  it('rotates to .1, shifts older generations and drops the oldest past the bound', () => {
    const log = fileLogger({ logFile: file, logLevel: 'info', logMaxBytes: 4096, logKeepFiles: 2 });
    for (let i = 0; i < 400; i++) log.info('line', { i, pad: 'x'.repeat(60) });
    const files = readdirSync(dir).sort();
    expect(files).toEqual(['cni.log', 'cni.log.1', 'cni.log.2']);
    for (const f of files) expect(statSync(join(dir, f)).size).toBeLessThanOrEqual(4096 + 4096 / 8 + 200);
    for (const f of files) expect(statSync(join(dir, f)).mode & 0o777).toBe(0o640);
    // What is kept is the newest lines, in order, without a gap.
    const kept = ['cni.log.2', 'cni.log.1', 'cni.log'].flatMap((f) =>
      readFileSync(join(dir, f), 'utf8')
        .split('\n')
        .filter(Boolean)
        .map((l) => (JSON.parse(l) as { i: number }).i),
    );
    expect(kept.at(-1)).toBe(399);
    expect(kept).toEqual(Array.from({ length: kept.length }, (_, k) => 400 - kept.length + k));
  });

  it('leaves a log under the bound alone, and a missing one too', () => {
    expect(rotateIfFull(file, { maxBytes: 4096, keepFiles: 3 })).toBe(false);
    const log = fileLogger({ logFile: file, logLevel: 'info', logMaxBytes: 4096, logKeepFiles: 3 });
    log.info('one line');
    expect(rotateIfFull(file, { maxBytes: 4096, keepFiles: 3 })).toBe(false);
    expect(readdirSync(dir)).toEqual(['cni.log']);
  });

  it('loses and repeats no line when eight processes write and rotate one log at once', async () => {
    // A small bound makes rotations overlap: before the shift lock this lost 1–14 % of the lines in every run.
    const writers = Array.from({ length: 8 }, (_, w) =>
      run(process.execPath, ['--import', 'tsx', WRITER, file, '2048', '200', `w${w}`, '150'], { timeout: 120_000 }),
    );
    await Promise.all(writers);
    const lines = allLines(dir);
    const seen = new Set(lines.map((l) => `${l.tag}:${l.i}`));
    expect(seen.size).toBe(lines.length);
    expect(lines.length).toBe(8 * 150);
    expect(readdirSync(dir).filter((f) => f.includes('rotating') || f.includes('lock'))).toEqual([]);
    expect(existsSync(join(dir, 'cni.log.2'))).toBe(true);
  }, 180_000);

  it('waits for a held shift lock, and moves the full log aside meanwhile without losing it', async () => {
    writeFileSync(file, `${JSON.stringify({ tag: 'old', i: 0 })}\n`.repeat(200));
    const lock = `${file}.shift-lock`;
    symlinkSync('holder', lock);
    const child = execFile(process.execPath, ['--import', 'tsx', WRITER, file, '2048', '3', 'new', '1']);
    let done = false;
    const exited = new Promise<number | null>((resolve) =>
      child.on('exit', (code) => {
        done = true;
        resolve(code);
      }),
    );
    // The rotation has claimed the full file and waits: the lines are under the claim's name, not yet in .1.
    await until(() => done || readdirSync(dir).some((f) => f.includes('rotating')));
    expect(done).toBe(false);
    expect(existsSync(`${file}.1`)).toBe(false);
    unlinkSync(lock);
    expect(await exited).toBe(0);
    expect(readdirSync(dir).sort()).toEqual(['cni.log', 'cni.log.1']);
    expect(allLines(dir).filter((l) => l.tag === 'old')).toHaveLength(200);
  }, 60_000);

  it('breaks a shift lock its holder left behind long ago', () => {
    writeFileSync(file, 'x'.repeat(5000));
    const lock = `${file}.shift-lock`;
    symlinkSync('dead-holder', lock);
    const longAgo = new Date(Date.now() - 60_000);
    lutimesSync(lock, longAgo, longAgo);
    expect(rotateIfFull(file, { maxBytes: 4096, keepFiles: 2 })).toBe(true);
    expect(readdirSync(dir).sort()).toEqual(['cni.log.1']);
  });
});

async function until(cond: () => boolean): Promise<void> {
  while (!cond()) await new Promise((r) => setTimeout(r, 5));
}
