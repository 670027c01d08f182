import { execFileSync } from 'node:child_process';
import type { GuestCase } from './runner.js';

function ip(...args: string[]): string {
  return execFileSync('ip', args, { encoding: 'utf8' });
}

/** The harness's own check: the guest kernel really has ipvlan in all three modes (the host kernel has none). */
export const kernelCases: GuestCase[] = (['l2', 'l3', 'l3s'] as const).map((mode) => ({
  name: `guest kernel creates an ipvlan link in mode ${mode}`,
  async run(): Promise<void> {
    ip('link', 'add', 'hk0', 'type', 'veth', 'peer', 'name', 'hk1');
    try {
      ip('link', 'add', 'link', 'hk0', 'name', 'hkipv', 'type', 'ipvlan', 'mode', mode);
      const shown = ip('-d', 'link', 'show', 'hkipv');
      if (!new RegExp(`ipvlan\\s+mode ${mode} `).test(shown)) throw new Error(`unexpected link details: ${shown}`);
    } finally {
      ip('link', 'del', 'hk0');
    }
  },
}));
