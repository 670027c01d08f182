import { execFileSync } from 'node:child_process';
import { closeSync, openSync } from 'node:fs';
import { loadNetnsAddon } from '../../../node/datapath/native.js';

export function ip(...args: string[]): string {
  return execFileSync('ip', args, { encoding: 'utf8' });
}

/** One ping (busybox's ping6 for an IPv6 target) from a netns, by name or path, or from here; true when answered. */
export function ping(netns: string | undefined, target: string, ...extra: string[]): boolean {
  const args = ['busybox', target.includes(':') ? 'ping6' : 'ping', '-c', '1', '-W', '2', ...extra, target];
  try {
    if (netns) execFileSync('ip', ['netns', 'exec', netns.split('/').pop()!, ...args], { stdio: 'ignore' });
    else execFileSync(args[0]!, args.slice(1), { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
}

/**
 * The test file's main thread moved into a fresh netns standing in for the node's host namespace, so the rules,
 * tables and links it makes, and every process it spawns, never touch this machine's own.
 */
export class PrivateHost {
  private selfFd = -1;
  private hostFd = -1;

  private constructor(readonly name: string) {}

  static enter(name: string, options: { readonly ipForward?: boolean } = {}): PrivateHost {
    ip('netns', 'add', name);
    const host = new PrivateHost(name);
    try {
      host.selfFd = openSync('/proc/thread-self/ns/net', 'r');
      host.hostFd = openSync(`/var/run/netns/${name}`, 'r');
      loadNetnsAddon().setns(host.hostFd);
      ip('link', 'set', 'lo', 'up');
      // As on a Kubernetes node; without it `ip route get … iif` answers for forwarded packets with EHOSTUNREACH.
      if (options.ipForward) execFileSync('sysctl', ['-qw', 'net.ipv4.ip_forward=1']);
    } catch (err) {
      host.leave();
      throw err;
    }
    return host;
  }

  /** Back to this machine's namespace; deletes `others` (the test's pod or peer namespaces) and the host. */
  leave(others: readonly string[] = []): void {
    if (this.selfFd >= 0) loadNetnsAddon().setns(this.selfFd);
    for (const ns of [...others, this.name]) execFileSync('ip', ['netns', 'del', ns], { stdio: 'ignore' });
    if (this.hostFd >= 0) closeSync(this.hostFd);
    if (this.selfFd >= 0) closeSync(this.selfFd);
  }
}
