import { execFileSync } from 'node:child_process';
import { closeSync, openSync } from 'node:fs';
import { loadNetnsAddon } from '../../../node/datapath/native.js';

/**
 * Moves this thread into a new named netns with loopback up, so what a test starts afterwards (fixtures, plugin
 * and agent processes) and the node-wide rules they install live there, never in this machine's host namespace.
 * `leave` moves the thread back and deletes the namespace.
 */
export function enterPrivateHost(name: string): { leave(): void } {
  execFileSync('ip', ['netns', 'add', name]);
  const selfFd = openSync('/proc/thread-self/ns/net', 'r');
  const hostFd = openSync(`/var/run/netns/${name}`, 'r');
  loadNetnsAddon().setns(hostFd);
  execFileSync('ip', ['link', 'set', 'lo', 'up']);
  return {
    leave(): void {
      loadNetnsAddon().setns(selfFd);
      execFileSync('ip', ['netns', 'del', name], { stdio: 'ignore' });
      closeSync(hostFd);
      closeSync(selfFd);
    },
  };
}
