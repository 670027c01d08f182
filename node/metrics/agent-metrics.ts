import { errorMessage } from '../../shared/errors.js';
import { VPC_LEASE_VERSION } from '../../shared/version.js';
import type { AgentExtensions, CommandEvent } from '../agent/observer.js';
import { parseNetconf } from '../config/netconf.js';
import { type CniMetricCommand, NodeMetrics } from './node-metrics.js';
import { metricsListenFromEnv, startMetricsServer } from './server.js';

/** Seconds a read of the node's leases serves scrapes (default 30): one partition Query per window. */
export const LEASES_MAX_AGE_ENV = 'VPC_LEASE_METRICS_LEASES_MAX_AGE_S';

const COMMANDS = new Set<string>(['ADD', 'DEL', 'CHECK', 'GC', 'STATUS', 'VERSION']);

/** The netconf's default dataDir: where fallback records land before any request tells the agent otherwise. */
const DEFAULT_DATA_DIR = parseNetconf({ cniVersion: '1.0.0', name: 'vpc-lease', type: 'vpc-lease-cni' }).dataDir;

/**
 * The agent's metrics: its observer counts and times each command, its hooks time store requests, count
 * credential refreshes and find the node's leases, and its sidecar serves /metrics (and /healthz) where
 * VPC_LEASE_METRICS_ADDRESS says (loopback:61680 by default; `off` serves nothing).
 */
export function agentMetrics(
  env: NodeJS.ProcessEnv,
  nowMs: () => number = Date.now,
): { metrics: NodeMetrics; extensions: AgentExtensions } {
  const maxAgeS = Number(env[LEASES_MAX_AGE_ENV]);
  const metrics = new NodeMetrics({
    version: VPC_LEASE_VERSION,
    nowMs,
    fallbackDataDir: DEFAULT_DATA_DIR,
    ...(env[LEASES_MAX_AGE_ENV] && Number.isFinite(maxAgeS) && maxAgeS >= 0 ? { leasesMaxAgeMs: maxAgeS * 1000 } : {}),
  });
  const extensions: AgentExtensions = {
    observer: {
      commandFinished(event: CommandEvent) {
        const command = (COMMANDS.has(event.command) ? event.command : 'unknown') as CniMetricCommand;
        const code = event.ok ? 0 : (event.cniCode ?? 999);
        metrics.observeCommand({ command, path: event.path, code, durationS: event.durationMs / 1000 });
      },
    },
    depsHooks: {
      observeStore: metrics.observeStoreRequest,
      onIdentityFetch: (ok) => metrics.observeCredentialRefresh(ok),
      onStoreOpened: (store, identity, config) => {
        metrics.setLeaseSource(() => store.listLeases(identity.instanceArn));
        metrics.setFallbackDataDir(config.dataDir);
      },
    },
    async start({ env, log, health }) {
      try {
        const listen = metricsListenFromEnv(env);
        if (!listen) return [];
        const server = await startMetricsServer(metrics.registry, listen, health);
        log.info('metrics listening', { url: server.url });
        const stopSampling = metrics.sampleEventLoop();
        return [server, { close: async () => stopSampling() }];
      } catch (err) {
        // Pods come first: an agent whose metrics port is taken still serves CNI calls.
        log.error('metrics server failed to start', { error: errorMessage(err) });
        return [];
      }
    },
  };
  return { metrics, extensions };
}
