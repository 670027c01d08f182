import { parseArgs } from 'node:util';
import { errorMessage } from '../../shared/errors.js';
import { createLogger, type Logger } from '../../shared/log.js';
import { isTestMode } from '../config/overrides.js';
import { useIptables } from '../datapath/connmark.js';
import { loadNetnsAddon } from '../datapath/native.js';
import { agentHangAt } from '../datapath/test-hooks.js';
import { missingCapabilities } from './capabilities.js';
import { startHealthSocket } from './health-socket.js';
import { detectIptablesMode, hasImageIptables, IMAGE_IPTABLES_DIR, imageIptables } from './iptables-mode.js';
import { type AgentExtensions, type AgentSidecar, NO_EXTENSIONS } from './observer.js';
import { AGENT_SOCKET_PATH, type AgentRequest } from './protocol.js';
import { AgentServer } from './server.js';
import { WarmDeps } from './warm-deps.js';

/**
 * A call that spawns iptables: ADD, DEL and CHECK with the host veth (the default), whose connmark rules it sets,
 * removes or reads. An agent whose image has no iptables (one built without it) refuses those, and the shim runs
 * the plugin on the host, which has it.
 */
export function needsIptables(request: AgentRequest): boolean {
  if (!['ADD', 'DEL', 'CHECK'].includes(request.env['CNI_COMMAND'] ?? '')) return false;
  try {
    return (JSON.parse(request.stdin) as { hostVeth?: unknown }).hostVeth !== false;
  } catch {
    return false; // the plugin's own decode error answers it
  }
}

/**
 * Points connmark.ts at the image's iptables in the host's backend (iptables-mode.ts); false when the image has
 * none. `VPC_LEASE_IPTABLES_DIR` (the agent's own environment, never a request's) moves where it looks: tests.
 */
async function chooseIptables(env: NodeJS.ProcessEnv, log: Logger): Promise<boolean> {
  const dir = env['VPC_LEASE_IPTABLES_DIR'] ?? IMAGE_IPTABLES_DIR;
  if (!hasImageIptables(dir)) {
    log.warn('no iptables here: calls with the host veth are left to the plugin on the host', { dir });
    return false;
  }
  const { mode, reason } = await detectIptablesMode(dir);
  useIptables(imageIptables(dir, mode));
  log.info('iptables backend chosen', { mode, reason, dir });
  return true;
}

/** Inside the DaemonSet's terminationGracePeriodSeconds (30 s), leaving time to exit. */
const DRAIN_GRACE_MS = 20_000;

/**
 * `vpc-lease-cni agent [--socket PATH] [--health-socket PATH]`: the node agent, the DaemonSet's long-running
 * container. Serves the shim's requests until SIGTERM or SIGINT, then drains (node/README.md, "Agent"). Returns the
 * exit code.
 */
export async function runAgent(
  args: readonly string[],
  env: NodeJS.ProcessEnv,
  extensions: AgentExtensions = NO_EXTENSIONS,
): Promise<number> {
  const log = createLogger({ level: env['VPC_LEASE_AGENT_LOG_LEVEL'] === 'debug' ? 'debug' : 'info' });
  let socketPath: string;
  let healthSocket: string | undefined;
  try {
    const { values } = parseArgs({
      args: [...args],
      options: { socket: { type: 'string' }, 'health-socket': { type: 'string' } },
      strict: true,
    });
    socketPath = values.socket ?? AGENT_SOCKET_PATH;
    healthSocket = values['health-socket'];
    // Loaded now from beside the executable, before any request's environment could name another place.
    loadNetnsAddon(env);
  } catch (err) {
    process.stderr.write(`vpc-lease-cni agent: ${errorMessage(err)}\n`);
    return 2;
  }
  const missing = missingCapabilities();
  if (missing.length > 0) {
    // Before the socket: an agent that cannot do the work must not take calls from the shims (they fall back).
    log.error('agent lacks capabilities its securityContext must add', {
      missing: missing.map((c) => `${c.name}: ${c.why}`),
    });
    return 1;
  }
  const testMode = isTestMode(env);
  const hangAt = agentHangAt(env);
  // A test that removes the socket and asks the probe before the agent binds it again sets this long.
  const ownershipCheckMs = testMode ? Number(env['VPC_LEASE_TEST_OWNERSHIP_CHECK_MS'] ?? '') || undefined : undefined;
  const storeDelayMs = testMode ? Number(env['VPC_LEASE_TEST_STORE_DELAY_MS'] ?? '') || 0 : 0;
  const deps = new WarmDeps(log, Date.now, hangAt, extensions.depsHooks, storeDelayMs);
  let server: AgentServer | undefined;
  let sidecars: readonly AgentSidecar[] = [];
  let health: AgentSidecar | undefined;
  const healthOf = () => server!.health();
  // The metrics port follows the socket: an agent a newer one superseded lets it go (docs/DESIGN.md, handoff).
  let handoff = Promise.resolve();
  const onOwnership = (owner: boolean): void => {
    handoff = handoff.then(async () => {
      await Promise.allSettled(sidecars.map((s) => s.close()));
      sidecars = owner ? await extensions.start({ env, log, health: healthOf }) : [];
    });
  };
  try {
    const iptables = await chooseIptables(env, log);
    server = await AgentServer.start({
      socketPath,
      deps,
      observer: extensions.observer,
      log,
      onOwnership,
      ...(ownershipCheckMs ? { ownershipCheckMs } : {}),
      ...(iptables ? {} : { refuse: needsIptables }),
    });
    if (healthSocket) health = await startHealthSocket(healthSocket, healthOf);
    sidecars = await extensions.start({ env, log, health: healthOf });
  } catch (err) {
    log.error('agent failed to start', { error: errorMessage(err) });
    return 1;
  }
  const signal = await new Promise<NodeJS.Signals>((resolve) => {
    process.once('SIGTERM', () => resolve('SIGTERM'));
    process.once('SIGINT', () => resolve('SIGINT'));
  });
  log.info('agent stopping', { signal, inFlight: server.inFlight });
  await server.stop(DRAIN_GRACE_MS);
  await handoff;
  await Promise.allSettled([...sidecars, ...(health ? [health] : [])].map((s) => s.close()));
  deps.clear();
  return 0;
}
