import { spawn } from 'node:child_process';
import { chmodSync, copyFileSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PLUGIN_EXECUTABLE } from '../../node/installer/install.js';
import { buildShim } from '../../packaging/shim.js';

/**
 * The shim is what `vpc-lease-cni` is on a node, so operators and kubelet's helpers call it with subcommands
 * (`max-pods`, `install`): those go to the full executable untouched, without waiting for stdin or asking
 * the agent. A stand-in plugin beside it prints what it was given.
 */
describe('the shim with a subcommand', () => {
  let dir: string;
  let shim: string;
  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), 'vpc-lease-shim-'));
    shim = join(dir, 'vpc-lease-cni');
    copyFileSync(buildShim(join(dir, 'build')), shim);
    chmodSync(shim, 0o755);
    const plugin = join(dir, PLUGIN_EXECUTABLE);
    writeFileSync(plugin, '#!/bin/sh\necho "args:$*"\n');
    chmodSync(plugin, 0o755);
  }, 120_000);
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('hands the arguments on with stdin left open, and exits with the plugin', async () => {
    // stdin is a pipe nobody closes, as with execFile: a shim that read it first would wait forever.
    const child = spawn(shim, ['max-pods', '--conflist', '/x'], {
      stdio: ['pipe', 'pipe', 'pipe'],
      env: { PATH: '/usr/bin:/bin', VPC_LEASE_TEST_MODE: '1', VPC_LEASE_AGENT_SOCKET: join(dir, 'no-agent.sock') },
    });
    let out = '';
    child.stdout.on('data', (d: Buffer) => {
      out += d.toString();
    });
    const code = await new Promise<number | null>((resolve) => child.on('exit', resolve));
    child.stdin.destroy();
    expect(code).toBe(0);
    expect(out.trim()).toBe('args:max-pods --conflist /x');
  }, 30_000);
});
