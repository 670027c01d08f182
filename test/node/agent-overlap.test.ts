import { randomBytes } from 'node:crypto';
import { chmodSync, closeSync, mkdirSync, mkdtempSync, openSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { IMAGE_IPTABLES_DIR, type IptablesMode, imageIptables } from '../../node/agent/iptables-mode.js';
import { mangleRules, useIptables } from '../../node/datapath/connmark.js';
import { podVethName } from '../../node/datapath/host-veth.js';
import { missing } from '../support/capabilities.js';
import { type AgentProcess, loggedLine, loggedPids, shimBeside, startAgent } from './support/agent-process.js';
import { NodeFixture } from './support/node-fixture.js';

/**
 * The agent runs independent pods' ADDs side by side, and each pod's connmark rules are in place when its ADD
 * answers. The agent's iptables is a wrapper (VPC_LEASE_IPTABLES_DIR) around the real multi binaries whose pod
 * installs wait at a barrier until `pods` of them have started: it opens only when that many installs are in
 * flight at once, so an agent that runs them one at a time never gets past the first.
 */
const skip = missing('root', 'netns', 'go-plugins');

/** How long an install waits at the barrier before it fails the ADD (the failure this test exists to show). */
const BARRIER_WAIT_S = 20;
/** Container ids of this run: a failed run's pods (host veths named after them) never collide with the next's. */
const RUN = randomBytes(3).toString('hex');

/** Writes the wrapper multi binaries into `dir`; installs report to and wait on `gate`. */
function wrapperIptables(dir: string, gate: string, pods: number): void {
  mkdirSync(gate, { recursive: true });
  const script = [
    '#!/bin/sh',
    'real=/usr/sbin/$(basename "$0")',
    'if [ "$1" = iptables-restore ]; then',
    '  input=$(cat)',
    '  case "$input" in',
    '  *"-A PREROUTING -i"*)',
    `    : > "${gate}/started.$$"`,
    '    tries=0',
    '    while :; do',
    '      n=0',
    `      for f in "${gate}"/started.*; do [ -e "$f" ] && n=$((n + 1)); done`,
    `      [ "$n" -ge ${pods} ] && break`,
    '      tries=$((tries + 1))',
    `      if [ "$tries" -gt ${BARRIER_WAIT_S * 50} ]; then echo "barrier: $n of ${pods} installs in flight" >&2; exit 3; fi`,
    '      sleep 0.02',
    '    done',
    `    if [ -e "${gate}/fail" ]; then echo "injected install failure" >&2; exit 4; fi ;;`,
    '  esac',
    `  printf '%s\\n' "$input" | exec "$real" "$@"`,
    'fi',
    'exec "$real" "$@"',
    '',
  ].join('\n');
  mkdirSync(dir, { recursive: true });
  for (const name of ['xtables-nft-multi', 'xtables-legacy-multi']) {
    writeFileSync(join(dir, name), script);
    chmodSync(join(dir, name), 0o755);
  }
}

describe.skipIf(skip)('the node agent overlaps independent ADDs', () => {
  let f: NodeFixture;
  let agent: AgentProcess | undefined;
  beforeAll(async () => {
    f = await NodeFixture.start();
    await f.seed(16);
  });
  afterEach(async () => {
    useIptables(undefined);
    if (agent && agent.child.exitCode === null) await agent.kill();
    agent = undefined;
  });
  afterAll(async () => {
    await f?.close();
  });

  /** An agent whose iptables is the barrier wrapper; the test reads rules in the backend it chose. */
  const start = async (pods: number): Promise<{ socket: string; gate: string }> => {
    const root = mkdtempSync(join(f.dir, 'overlap-'));
    const gate = join(root, 'gate');
    wrapperIptables(join(root, 'sbin'), gate, pods);
    const socket = join(root, 'run', 'agent.sock');
    agent = await startAgent(f.cni, socket, { ...f.baseEnv(), VPC_LEASE_IPTABLES_DIR: join(root, 'sbin') });
    const mode = (await loggedLine(agent, 'iptables backend chosen'))['mode'] as IptablesMode;
    useIptables(imageIptables(IMAGE_IPTABLES_DIR, mode));
    return { socket, gate };
  };
  const viaShim = (socket: string) => ({ executable: shimBeside(f.cni), env: { VPC_LEASE_AGENT_SOCKET: socket } });
  const podMarks = (netns: string): string[] => {
    const fd = openSync(netns, 'r');
    try {
      return mangleRules(fd);
    } finally {
      closeSync(fd);
    }
  };
  const claimedBy = async (containerId: string) =>
    (await f.store.listLeases(f.arn, { state: 'CLAIMED' })).filter((l) => l.holder?.containerId === containerId);

  it('runs N pods’ installs at once, each on its own lease, each rule present when its ADD returns', async () => {
    const pods = 4;
    const { socket } = await start(pods);
    const conf = f.netconf('1.0.0', { storeTimeoutMs: 60_000 });
    const netnses = Array.from({ length: pods }, () => f.addNetns());
    const results = await Promise.all(
      netnses.map(async (netns, i) => {
        const containerId = `overlap-${RUN}-${i}`;
        const add = await f.run('ADD', { netns, containerId, ...viaShim(socket) }, conf);
        // Read at once, before any other pod's answer: what this ADD promised must already hold.
        return { containerId, netns, add, marks: add.code === 0 ? podMarks(netns) : [] };
      }),
    );
    for (const r of results) {
      expect(r.add.code, r.add.stdout).toBe(0);
      expect(loggedPids(f.logFile, 'added', r.containerId)).toEqual([agent!.pid]);
      expect(r.marks).toEqual([
        `-A PREROUTING -i ${podVethName('eth0')} -j CONNMARK --set-xmark 0x80/0x80`,
        '-A OUTPUT -m connmark --mark 0x80/0x80 -j MARK --set-xmark 0x80/0x80',
      ]);
      expect((await claimedBy(r.containerId)).map((l) => `${l.ip}/24`)).toEqual([
        (r.add.json as { ips: { address: string }[] }).ips[0]!.address,
      ]);
    }
    const ips = results.map((r) => (r.add.json as { ips: { address: string }[] }).ips[0]!.address);
    expect(new Set(ips).size).toBe(pods);
    for (const r of results)
      expect((await f.run('DEL', { netns: r.netns, containerId: r.containerId, ...viaShim(socket) }, conf)).code).toBe(
        0,
      );
  }, 180_000);

  it('fails the ADD when its install fails, and leaves no lease, link or rule behind', async () => {
    const { socket, gate } = await start(1);
    writeFileSync(join(gate, 'fail'), '');
    const netns = f.addNetns();
    const containerId = `overlap-${RUN}-fail`;
    const add = await f.run('ADD', { netns, containerId, ...viaShim(socket) }, f.netconf('1.0.0'));
    expect(add.code, add.stdout).toBe(1);
    expect(add.stdout).toMatch(/injected install failure/);
    expect(await claimedBy(containerId)).toEqual([]);
    expect(f.podLinks(netns)).toEqual([]);
    expect(podMarks(netns)).toEqual([]);
  }, 120_000);
});
