import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { RtNetlinkSocket } from 'netlink/dist/rt/rt.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EGRESS_CHAIN, EGRESS_GUARD_PRIORITY, ensureNodeEgress, hasEgressRule } from '../../node/datapath/egress4.js';
import { hostVethName } from '../../node/datapath/host-veth.js';
import { loadCreateRtNetlink } from '../../node/datapath/rtnl.js';
import { missing } from '../support/capabilities.js';
import { PrivateHost } from './support/private-host.js';

const RUN = process.pid.toString(36);

function iptables(...args: string[]): string[] {
  return execFileSync('iptables', ['-w', '5', ...args], { encoding: 'utf8' })
    .split('\n')
    .filter((l) => l.startsWith('-A '));
}

/** The node-wide IPv4 egress of `ipv6` pods (egress4.ts) in a private host netns (iptables as root). */
describe.skipIf(missing('root', 'netns'))('IPv4 egress, node-wide (egress4.ts)', () => {
  let host: PrivateHost | undefined;
  let socket: RtNetlinkSocket;
  beforeAll(async () => {
    host = PrivateHost.enter(`vl9e-${RUN}`);
    socket = (await loadCreateRtNetlink())();
  });
  afterAll(() => {
    socket?.socket.close();
    host?.leave();
  });

  it('installs the chains and the guard once for concurrent first ADDs, and a rule for each address held before', async () => {
    // An address claimed under an agent that kept per-pod iptables rules: the install gives it its fib rule.
    const dir = join(mkdtempSync(join(tmpdir(), 'vl-egress-')), 'egress4');
    mkdirSync(dir);
    writeFileSync(join(dir, '169.254.172.9'), 'c-old/eth0');

    await Promise.all([ensureNodeEgress(socket, dir), ensureNodeEgress(socket, dir)]);
    await ensureNodeEgress(socket, dir);

    expect(iptables('-S', EGRESS_CHAIN)).toEqual([
      `-A ${EGRESS_CHAIN} -s 169.254.172.0/22 -d 169.254.0.0/16 -i vlh+ -j DROP`,
      `-A ${EGRESS_CHAIN} -s 169.254.172.0/22 -i vlh+ -j ACCEPT`,
    ]);
    expect(iptables('-t', 'nat', '-S', EGRESS_CHAIN)).toEqual([
      `-A ${EGRESS_CHAIN} -s 169.254.172.0/22 ! -d 224.0.0.0/4 ! -o vlh+ -j MASQUERADE`,
    ]);
    expect(iptables('-S', 'FORWARD')).toEqual([`-A FORWARD -j ${EGRESS_CHAIN}`]);
    const guard = execFileSync('ip', ['rule', 'show', 'pref', String(EGRESS_GUARD_PRIORITY)], { encoding: 'utf8' });
    expect(guard.trim().split('\n')).toEqual([`${EGRESS_GUARD_PRIORITY}:\tfrom 169.254.172.0/22 unreachable`]);
    expect(await hasEgressRule(socket, hostVethName('c-old', 'eth0'), '169.254.172.9')).toBe(true);
  });
});
