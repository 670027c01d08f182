import { execFileSync } from 'node:child_process';
import { closeSync, existsSync, mkdirSync, mkdtempSync, openSync, readFileSync, rmSync, symlinkSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { chooseIptablesMode, type IptablesMode } from '../../node/agent/iptables-mode.js';
import { expectedPodMarkRules, podMarkRules } from '../../node/datapath/pod-marks.js';
import { AF_INET } from '../../node/datapath/rtnl.js';
import { fallbackRecordsPath } from '../../node/metrics/fallback-records.js';
import { buildSea } from '../../packaging/build.js';
import { hostArch } from '../../packaging/cross.js';
import { installerFiles } from '../../packaging/image/build-image.js';
import { tar } from '../../packaging/image/oci.js';
import { type AgentProcess, loggedPids, shimBeside, startAgent } from '../node/support/agent-process.js';
import { NodeFixture } from '../node/support/node-fixture.js';
import { missing } from '../support/capabilities.js';

/**
 * The agent as the DaemonSet runs it on a real node: from the installer image's own root (the layer unpacked,
 * chrooted into, with the host's /proc, /sys, /dev and /run/netns, and host network), so the only iptables it can
 * run are the ones the image carries. ADD and DEL with the host veth (the default) must be answered by it, not by
 * the shim's fallback, and its rules must land in the backend the host's own iptables uses.
 */
const skip = missing('root', 'netns', 'go-plugins');

/** In a mount namespace that still receives the host's mounts (new pod netns, as the DaemonSet's HostToContainer): the host's kernel views bind-mounted into the root, then exec chroot. */
const CHROOT_SCRIPT = [
  'set -e',
  'root=$1; shared=$2; shift 2',
  'for d in proc sys dev run/netns; do mkdir -p "$root/$d"; mount --rbind "/$d" "$root/$d"; done',
  'mkdir -p "$root$shared"; mount --bind "$shared" "$root$shared"',
  'exec chroot "$root" "$@"',
].join('\n');

describe.skipIf(skip)('the agent in the installer image’s root', () => {
  let f: NodeFixture;
  let sea: string;
  let agent: AgentProcess | undefined;
  beforeAll(async () => {
    f = await NodeFixture.start();
    await f.seed(8);
    sea = join(f.dir, 'sea');
    await buildSea(sea, { reuse: true });
  }, 600_000);
  afterEach(async () => {
    if (agent && agent.child.exitCode === null) await agent.kill();
    agent = undefined;
  });
  afterAll(async () => {
    await f?.close();
  });

  /** The image's layer unpacked into a fresh root (CNI_NETNS names /var/run/netns: a link to /run, as on hosts). */
  function rootfs(iptables: boolean): string {
    const root = mkdtempSync(join(f.dir, 'rootfs-'));
    const layer = join(f.dir, 'layer.tar');
    execFileSync('dd', [`of=${layer}`, 'status=none'], { input: tar(installerFiles(sea, hostArch(), iptables)) });
    execFileSync('tar', ['-xf', layer, '-C', root]);
    rmSync(layer);
    mkdirSync(join(root, 'var'));
    symlinkSync('../run', join(root, 'var', 'run'));
    return root;
  }

  function startInRoot(root: string, socket: string): Promise<AgentProcess> {
    const wrap = ['unshare', '--mount', '--propagation', 'slave', 'sh', '-c', CHROOT_SCRIPT, 'sh', root, f.dir];
    return startAgent('/app/vpc-lease-cni', socket, f.baseEnv(), wrap);
  }

  const viaShim = (socket: string) => ({ executable: shimBeside(f.cni), env: { VPC_LEASE_AGENT_SOCKET: socket } });
  const fallbacks = (): number => {
    const file = fallbackRecordsPath(f.dataDir);
    return existsSync(file)
      ? readFileSync(file, 'utf8')
          .split('\n')
          .filter((l) => l.includes('"ADD"')).length
      : 0;
  };
  /** The host's own iptables (not the image's) in one backend. */
  const hostIptables = (mode: IptablesMode, args: string[]): string =>
    execFileSync(`iptables-${mode}`, ['-w', '5', ...args], { encoding: 'utf8' });
  /** What the agent should choose here, from the host's own listings. */
  const expectedMode = (): IptablesMode => {
    const save = (cmd: string, args: string[]): string => {
      try {
        return execFileSync(cmd, args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] });
      } catch {
        return '';
      }
    };
    return chooseIptablesMode({
      nft: save('iptables-nft-save', ['-t', 'mangle']) + save('ip6tables-nft-save', ['-t', 'mangle']),
      legacy: save('iptables-legacy-save', []) + save('ip6tables-legacy-save', []),
    }).mode;
  };

  it('serves ADD and DEL with the host veth from the image’s iptables, in the host’s backend', async () => {
    const mode = expectedMode();
    const socket = join(f.dir, 'agent.sock');
    agent = await startInRoot(rootfs(true), socket);
    expect(agent.stderr()).toContain(`"iptables backend chosen"`);
    expect(agent.stderr()).toContain(`"mode":"${mode}"`);
    const netns = f.addNetns();
    const containerId = 'image-agent';
    const conf = f.netconf('1.0.0');
    const before = fallbacks();
    const add = await f.run('ADD', { netns, containerId, ...viaShim(socket) }, conf);
    expect(add.code, add.stdout).toBe(0);
    expect(loggedPids(f.logFile, 'added', containerId)).toEqual([agent.pid]);
    expect(fallbacks()).toBe(before);
    // The pod's mark rules: nf_tables over netlink, whatever the backend.
    const fd = openSync(netns, 'r');
    try {
      expect(await podMarkRules(fd, 'vh-eth0', AF_INET)).toEqual(expectedPodMarkRules('vh-eth0'));
    } finally {
      closeSync(fd);
    }
    // The node-wide chains are in the host's backend (another test may have put them there first: they are
    // installed once per node).
    expect(hostIptables(mode, ['-t', 'mangle', '-S', 'VPC-LEASE-NODEPORT'])).toContain('--set-xmark 0x80/0x80');
    expect(hostIptables(mode, ['-t', 'nat', '-S', 'VPC-LEASE-SNAT'])).toContain('MASQUERADE');

    const del = await f.run('DEL', { netns, containerId, ...viaShim(socket) }, conf);
    expect(del.code, del.stdout).toBe(0);
    expect(loggedPids(f.logFile, 'deleted', containerId)).toEqual([agent.pid]);
    expect(f.podLinks(netns)).toEqual([]);
    expect(fallbacks()).toBe(before);
  }, 120_000);

  it('control: an image without iptables leaves the same ADD to the fallback plugin', async () => {
    const socket = join(f.dir, 'agent-bare.sock');
    agent = await startInRoot(rootfs(false), socket);
    expect(agent.stderr()).toContain('no iptables here');
    const netns = f.addNetns();
    const containerId = 'image-agent-bare';
    const conf = f.netconf('1.0.0');
    const before = fallbacks();
    const add = await f.run('ADD', { netns, containerId, ...viaShim(socket) }, conf);
    expect(add.code, add.stdout).toBe(0);
    const pids = loggedPids(f.logFile, 'added', containerId);
    expect(pids).toHaveLength(1);
    expect(pids).not.toContain(agent.pid);
    expect(fallbacks()).toBe(before + 1);
    const del = await f.run('DEL', { netns, containerId, ...viaShim(socket) }, conf);
    expect(del.code, del.stdout).toBe(0);
    expect(loggedPids(f.logFile, 'deleted', containerId)).not.toContain(agent.pid);
  }, 120_000);
});
