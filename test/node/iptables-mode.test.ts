import { execFileSync } from 'node:child_process';
import { closeSync, openSync } from 'node:fs';
import { afterEach, describe, expect, it } from 'vitest';
import { chooseIptablesMode, detectIptablesMode, hasImageIptables } from '../../node/agent/iptables-mode.js';
import { inNetns } from '../../node/datapath/native.js';
import { missing } from '../support/capabilities.js';

const HINT = ':KUBE-IPTABLES-HINT - [0:0]\n';
const CANARY = ':KUBE-KUBELET-CANARY - [0:0]\n';
const OWN = ':VPC-LEASE-NODEPORT - [0:0]\n';

describe('chooseIptablesMode: the backend of the host’s own rules (iptables-wrappers’ rule)', () => {
  it('follows kubelet’s chains, nft first, then legacy', () => {
    expect(chooseIptablesMode({ nft: HINT, legacy: '' }).mode).toBe('nft');
    expect(chooseIptablesMode({ nft: '', legacy: CANARY }).mode).toBe('legacy');
    expect(chooseIptablesMode({ nft: CANARY, legacy: HINT }).mode).toBe('nft');
    // A chain whose name only starts like kubelet's is not kubelet's.
    expect(chooseIptablesMode({ nft: '', legacy: ':KUBE-IPTABLES-HINTS - [0:0]\n' }).mode).toBe('nft');
  });

  it('without kubelet, follows where the fallback plugin put our chains; else nft', () => {
    expect(chooseIptablesMode({ nft: '', legacy: OWN })).toEqual({
      mode: 'legacy',
      reason: 'VPC-LEASE chains in legacy only',
    });
    expect(chooseIptablesMode({ nft: OWN, legacy: OWN }).mode).toBe('nft');
    expect(chooseIptablesMode({ nft: '', legacy: '' }).mode).toBe('nft');
    // kubelet's choice wins over ours.
    expect(chooseIptablesMode({ nft: HINT, legacy: OWN }).mode).toBe('nft');
  });
});

/** The real saves, in a fresh netns whose tables this test writes with the host's iptables. */
const skip = missing('root', 'netns') ?? (hasImageIptables('/usr/sbin') ? undefined : 'no xtables multi binaries');

describe.skipIf(skip)('detectIptablesMode against real iptables', () => {
  const name = `vl-ipt-${process.pid}`;
  afterEach(() => {
    execFileSync('ip', ['netns', 'del', name], { stdio: 'ignore' });
  });
  const detectIn = async (setup: string[][]): Promise<string> => {
    execFileSync('ip', ['netns', 'add', name]);
    for (const argv of setup) execFileSync('ip', ['netns', 'exec', name, ...argv]);
    const fd = openSync(`/var/run/netns/${name}`, 'r');
    try {
      // The four saves are forked before the first await: they run in the pod's netns.
      const detecting = inNetns(fd, () => detectIptablesMode('/usr/sbin'));
      return (await detecting).mode;
    } finally {
      closeSync(fd);
    }
  };

  it('finds kubelet’s hint in legacy, and in nft', async () => {
    expect(await detectIn([['iptables-legacy', '-t', 'mangle', '-N', 'KUBE-IPTABLES-HINT']])).toBe('legacy');
    execFileSync('ip', ['netns', 'del', name]);
    expect(await detectIn([['iptables-nft', '-t', 'mangle', '-N', 'KUBE-IPTABLES-HINT']])).toBe('nft');
  });

  it('control: an empty netns gets the default, nft', async () => {
    expect(await detectIn([])).toBe('nft');
  });
});
