import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';

/**
 * Suites that need root, network namespaces or the VM skip with a printed reason where those are missing —
 * except in CI (CI=true), where a missing capability is a failure: a CI run in which they skipped is red.
 */
export type Capability = 'root' | 'netns' | 'vm' | 'go-plugins' | 'prometheus' | 'boto3' | 'strace';

function probe(cap: Capability): string | undefined {
  switch (cap) {
    case 'root':
      return process.getuid?.() === 0 ? undefined : 'not running as root';
    case 'netns':
      if (process.getuid?.() !== 0) return 'network namespaces need root';
      try {
        execFileSync('ip', ['netns', 'list'], { stdio: 'ignore' });
        return undefined;
      } catch {
        return 'iproute2 (ip) is missing';
      }
    case 'vm':
      return existsSync('/usr/bin/qemu-system-x86_64') ? undefined : 'qemu-system-x86 is not installed';
    case 'go-plugins':
      return existsSync('/usr/lib/cni/macvlan') ? undefined : 'containernetworking-plugins is not installed';
    case 'strace':
      return existsSync('/usr/bin/strace') ? undefined : 'strace is not installed';
    case 'prometheus':
      return existsSync('/usr/bin/prometheus') && existsSync('/usr/bin/promtool')
        ? undefined
        : 'prometheus (with promtool) is not installed';
    case 'boto3':
      try {
        execFileSync('/usr/bin/python3', ['-c', 'import boto3, jmespath'], { stdio: 'ignore' });
        return undefined;
      } catch {
        return "Debian's python3-boto3 is not installed";
      }
  }
}

/** Returns the reason the capabilities are missing (undefined when all are there). Throws in CI. */
export function missing(...caps: Capability[]): string | undefined {
  const reasons = caps.map(probe).filter((r): r is string => r !== undefined);
  if (reasons.length === 0) return undefined;
  const reason = reasons.join('; ');
  if (process.env['CI'] === 'true') throw new Error(`CI must run this suite, but: ${reason}`);
  process.stderr.write(`skipping: ${reason}\n`);
  return reason;
}
