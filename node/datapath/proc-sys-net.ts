import { existsSync } from 'node:fs';

/**
 * The agent's DaemonSet mounts the host's /proc/sys/net writable here: runc refuses a mount inside /proc, and the
 * runtime's own /proc/sys is read-only in an unprivileged container (Cilium mounts it the same way).
 */
export const HOST_PROC_SYS_NET = '/host/proc/sys/net';

let root: string | undefined;

/**
 * Where net sysctls are written: the writable mount in the agent's container, /proc/sys/net for a plugin run on
 * the host. A net sysctl file names the netns of the thread that opens it, so either reaches the caller's netns.
 */
export function procSysNet(): string {
  root ??= existsSync(HOST_PROC_SYS_NET) ? HOST_PROC_SYS_NET : '/proc/sys/net';
  return root;
}
