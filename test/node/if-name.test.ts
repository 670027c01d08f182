import { describe, expect, it } from 'vitest';
import { installPodMarks, removePodMarks } from '../../node/datapath/pod-marks.js';
import { assertIfName } from '../../node/datapath/rp-filter.js';
import { AF_INET } from '../../node/datapath/rtnl.js';

/** One interface-name rule guards both the /proc/sys paths (rp-filter.ts) and the pod's nf_tables rules (pod-marks.ts). */
describe('assertIfName', () => {
  it.each(['eth0', 'vh-eth0', 'eth0.100', 'vlh0123456789ab', 'veth@if3'])('accepts %s', (name) => {
    expect(() => assertIfName(name)).not.toThrow();
  });

  it.each(['', 'a-name-of-16-chr', '../all', 'eth 0', 'eth0/x', 'x;y', '-j DROP'])('refuses %j', (name) => {
    expect(() => assertIfName(name)).toThrow(RangeError);
  });

  it('guards the pod connmark rules before anything runs (no netns needed to refuse)', () => {
    expect(() => installPodMarks(-1, 'vh-x -j ACCEPT', [AF_INET])).toThrow(/bad interface name/);
    expect(() => removePodMarks(-1, '../../x', [AF_INET])).toThrow(/bad interface name/);
  });
});
