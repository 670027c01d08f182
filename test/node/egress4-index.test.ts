import { execFile } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import {
  claimEgressAddress,
  egressSearchStart,
  findEgressAddress,
  releaseEgressAddress,
} from '../../node/datapath/egress4.js';

// Spied (passing through): what the lookups read is part of what this file tests.
vi.mock('node:fs', async (importOriginal) => {
  const fs = await importOriginal<typeof import('node:fs')>();
  return { ...fs, readFileSync: vi.fn(fs.readFileSync), readdirSync: vi.fn(fs.readdirSync) };
});

const run = promisify(execFile);
const CLAIMER = join(import.meta.dirname, 'support', 'egress-claimer.ts');

/**
 * The IPv6-only pods' IPv4 egress addresses (egress4.ts) on disk: one exclusive file per address and one index
 * file per attachment, so an ADD finds its own address with one read, a crashed ADD's address is reused rather
 * than leaked, and concurrent plugin processes never hand one address to two attachments.
 */
describe('egress4: the per-attachment index over the address files', () => {
  let root: string;
  let dir: string;
  beforeEach(() => {
    root = mkdtempSync(join(tmpdir(), 'vpc-lease-egress4-'));
    dir = join(root, 'egress4');
  });
  afterEach(() => {
    rmSync(root, { recursive: true, force: true });
  });

  const addresses = () => readdirSync(dir).sort();
  const indexes = () => readdirSync(`${dir}-index`).sort();

  it('claims, finds with its index, reclaims the same address, and releases both files', () => {
    const ip = claimEgressAddress(dir, 'c1', 'eth0');
    expect(ip).toMatch(/^169\.254\.17[2-5]\.\d+$/);
    expect(addresses()).toEqual([ip]);
    expect(readFileSync(join(dir, ip), 'utf8')).toBe('c1/eth0');
    expect(indexes()).toEqual(['c1~eth0']);
    expect(findEgressAddress(dir, 'c1', 'eth0')).toBe(ip);
    expect(findEgressAddress(dir, 'c2', 'eth0')).toBeUndefined();
    expect(claimEgressAddress(dir, 'c1', 'eth0')).toBe(ip);
    releaseEgressAddress(dir, 'c1', 'eth0');
    expect([addresses(), indexes()]).toEqual([[], []]);
    releaseEgressAddress(dir, 'c1', 'eth0'); // DEL again: nothing left, no error
  });

  it('finds its own address by reading its index and that one file, never the others', () => {
    const ip = claimEgressAddress(dir, 'c1', 'eth0');
    for (let i = 0; i < 50; i++) claimEgressAddress(dir, `other${i}`, 'eth0');
    vi.mocked(readFileSync).mockClear();
    vi.mocked(readdirSync).mockClear();
    expect(findEgressAddress(dir, 'c1', 'eth0')).toBe(ip);
    expect(claimEgressAddress(dir, 'c1', 'eth0')).toBe(ip);
    expect(readdirSync).not.toHaveBeenCalled();
    const read = vi.mocked(readFileSync).mock.calls.map((c) => String(c[0]));
    expect(read).toEqual([
      join(`${dir}-index`, 'c1~eth0'),
      join(dir, ip),
      join(`${dir}-index`, 'c1~eth0'),
      join(dir, ip),
    ]);
  });

  it.each([300, 4000])(
    'serves a %i-byte container id (the spec bounds none) under an index of one file name',
    (bytes) => {
      const containerId = `long${'0123456789abcdef'.repeat(bytes / 16)}`.slice(0, bytes);
      const sibling = `${containerId}-2`;
      const ip = claimEgressAddress(dir, containerId, 'eth0');
      const other = claimEgressAddress(dir, sibling, 'eth0');
      expect(other).not.toBe(ip);
      expect(readFileSync(join(dir, ip), 'utf8')).toBe(`${containerId}/eth0`);
      expect(indexes()).toHaveLength(2);
      expect(findEgressAddress(dir, containerId, 'eth0')).toBe(ip);
      expect(claimEgressAddress(dir, containerId, 'eth0')).toBe(ip);
      releaseEgressAddress(dir, containerId, 'eth0');
      releaseEgressAddress(dir, sibling, 'eth0');
      expect([addresses(), indexes()]).toEqual([[], []]);
    },
  );

  it('reuses what an ADD that crashed after its claim left (address and index), leaking nothing', () => {
    const ip = claimEgressAddress(dir, 'crashed', 'eth0');
    // The ADD died here: no rules, no link, no release. Its retry must take the same address, not a second one.
    expect(claimEgressAddress(dir, 'crashed', 'eth0')).toBe(ip);
    expect(addresses()).toEqual([ip]);
    releaseEgressAddress(dir, 'crashed', 'eth0');
    expect(addresses()).toEqual([]);
  });

  it('an index left by an ADD that crashed before its address file names an address another may take', () => {
    // The state between writing the index and creating the address file, and another attachment then taking it.
    const crashBeforeClaim = (containerId: string): string => {
      const ip = claimEgressAddress(dir, containerId, 'eth0');
      rmSync(join(dir, ip));
      writeFileSync(join(dir, ip), `other-${containerId}/eth0`);
      return ip;
    };
    const delAfter = crashBeforeClaim('del-after');
    expect(findEgressAddress(dir, 'del-after', 'eth0')).toBeUndefined();
    releaseEgressAddress(dir, 'del-after', 'eth0'); // DEL must not free the other's address
    expect(readFileSync(join(dir, delAfter), 'utf8')).toBe('other-del-after/eth0');
    const addAfter = crashBeforeClaim('add-after');
    const retried = claimEgressAddress(dir, 'add-after', 'eth0'); // the retry must not share it
    expect(retried).not.toBe(addAfter);
    expect(readFileSync(join(dir, addAfter), 'utf8')).toBe('other-add-after/eth0');
    releaseEgressAddress(dir, 'add-after', 'eth0');
    expect(addresses()).toEqual([delAfter, addAfter].sort());
    expect(indexes()).toEqual([]);
  });

  it('never gives one address to two attachments, with four processes racing down the same search', async () => {
    // Container ids whose searches all start at one slot, so every claim probes the files the others probe.
    const start = egressSearchStart('race-0', 'eth0');
    const ids: string[] = [];
    for (let i = 0; ids.length < 4 * 20; i++)
      if (egressSearchStart(`race-${i}`, 'eth0') === start) ids.push(`race-${i}`);
    const outputs = await Promise.all(
      [0, 1, 2, 3].map((p) =>
        run(process.execPath, ['--import', 'tsx', CLAIMER, dir, ids.filter((_, i) => i % 4 === p).join(',')], {
          timeout: 120_000,
        }),
      ),
    );
    const claimed = Object.assign({}, ...outputs.map((o) => JSON.parse(o.stdout))) as Record<string, string>;
    const ips = Object.values(claimed);
    expect(ips).toHaveLength(ids.length);
    expect(new Set(ips).size).toBe(ips.length);
    for (const [id, ip] of Object.entries(claimed)) {
      expect(readFileSync(join(dir, ip), 'utf8')).toBe(`${id}/eth0`);
      expect(findEgressAddress(dir, id, 'eth0')).toBe(ip);
    }
    expect(addresses()).toEqual([...ips].sort());
  }, 180_000);
});
