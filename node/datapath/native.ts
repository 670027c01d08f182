import { closeSync, existsSync, openSync, realpathSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { VpcLeaseError } from '../../shared/errors.js';

/** The setns(2) addon (node/native/netns.c), with flock(2) and SO_PEERCRED, which Node lacks. */
export interface NetnsAddon {
  setns(fd: number): void;
  /** flock(fd, LOCK_EX | LOCK_NB): false when another open file description holds the lock. */
  tryLock(fd: number): boolean;
  /** The uid of a connected unix socket's peer (SO_PEERCRED). */
  peerUid(fd: number): number;
}

export const NETNS_ADDON_FILE = 'vpc_lease_netns.node';

export class NativeAddonMissingError extends VpcLeaseError {}

/** Where the addon may be: beside the executable (dist/, /opt/cni/bin), or the dev build under node/native/. */
function candidates(env: NodeJS.ProcessEnv): string[] {
  const out: string[] = [];
  const override = env['VPC_LEASE_NATIVE_DIR'];
  if (override) out.push(join(override, NETNS_ADDON_FILE));
  const main = process.argv[1];
  if (main) {
    try {
      out.push(join(dirname(realpathSync(main)), NETNS_ADDON_FILE));
    } catch {
      // not a file (node -e): the other places remain
    }
  }
  try {
    // In the esbuild bundle import.meta is empty and this throws; the executable's directory was tried above.
    const here = dirname(fileURLToPath(import.meta.url));
    out.push(join(here, '..', 'native', 'build', 'Release', NETNS_ADDON_FILE));
  } catch {
    // bundled
  }
  return out;
}

let loaded: NetnsAddon | undefined;

export function loadNetnsAddon(env: NodeJS.ProcessEnv = process.env): NetnsAddon {
  if (loaded) return loaded;
  const tried = candidates(env);
  const found = tried.find((p) => existsSync(p));
  if (!found)
    throw new NativeAddonMissingError(
      `the setns addon ${NETNS_ADDON_FILE} is missing (looked in ${tried.join(', ')}); run npm run build`,
    );
  loaded = createRequire(found)(found) as NetnsAddon;
  return loaded;
}

/**
 * Runs `fn` with this thread inside the network namespace `nsFd`, then returns the thread to its own namespace.
 * A netlink socket belongs to the netns of the thread that opened it, and a synchronous spawn forks from this
 * thread, so opening a socket or running iptables here lands in the pod. CLONE_NEWNET is per-thread and `fn`
 * must be synchronous: libuv's workers never notice, and nothing else runs meanwhile. The only place vpc-lease
 * switches namespaces — a thread left in the pod's netns would misdirect everything after it.
 */
export function inNetns<T>(nsFd: number, fn: () => T): T {
  const addon = loadNetnsAddon();
  const self = openSync('/proc/thread-self/ns/net', 'r');
  try {
    addon.setns(nsFd);
    try {
      return fn();
    } finally {
      addon.setns(self);
    }
  } finally {
    closeSync(self);
  }
}
