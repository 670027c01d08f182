import { describe, expect, it } from 'vitest';
import { removePodConnmark, startInstallPodConnmark } from '../../node/datapath/connmark.js';
import { assertIfName } from '../../node/datapath/rp-filter.js';

/** One interface-name rule guards both the /proc/sys paths (rp-filter.ts) and the iptables rules (connmark.ts). */
describe('assertIfName', () => {
  it.each(['eth0', 'vh-eth0', 'eth0.100', 'vlh0123456789ab', 'veth@if3'])('accepts %s', (name) => {
    expect(() => assertIfName(name)).not.toThrow();
  });

  it.each(['', 'a-name-of-16-chr', '../all', 'eth 0', 'eth0/x', 'x;y', '-j DROP'])('refuses %j', (name) => {
    expect(() => assertIfName(name)).toThrow(RangeError);
  });

  it('guards the pod connmark rules before anything runs (no netns needed to refuse)', () => {
    expect(() => startInstallPodConnmark(-1, 'vh-x -j ACCEPT')).toThrow(/bad interface name/);
    expect(() => removePodConnmark(-1, '../../x')).toThrow(/bad interface name/);
  });
});
