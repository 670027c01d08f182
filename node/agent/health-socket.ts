import { chmodSync, unlinkSync } from 'node:fs';
import { createServer } from 'node:net';
import type { AgentHealth, AgentSidecar } from './observer.js';

/**
 * The agent's own health, on a unix socket in its container's private directory (an emptyDir), so the probe reaches
 * this process and no other agent on the node. It writes one line and closes: `ready <reason>` (serving the shims'
 * socket), `live <reason>` (standing by or draining) or `down <reason>`. The DaemonSet's exec probes read it with
 * the static shim (`vpc-lease-cni-shim health PATH ready|live`), which costs a fork and no JavaScript runtime.
 */
export async function startHealthSocket(path: string, health: () => Promise<AgentHealth>): Promise<AgentSidecar> {
  try {
    unlinkSync(path);
  } catch {
    // none left
  }
  const server = createServer((socket) => {
    socket.on('error', () => undefined);
    void health().then(({ ok, live, reason }) => socket.end(`${ok ? 'ready' : live ? 'live' : 'down'} ${reason}\n`));
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(path, () => {
      server.off('error', reject);
      resolve();
    });
  });
  chmodSync(path, 0o600);
  return { close: () => new Promise<void>((resolve) => server.close(() => resolve())) };
}
