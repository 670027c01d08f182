import { errorMessage } from '../../shared/errors.js';
import { VPC_LEASE_VERSION } from '../../shared/version.js';
import type { AgentExtensions, CommandEvent } from '../agent/observer.js';
import { parseNetconf } from '../config/netconf.js';
import { type CniMetricCommand, NodeMetrics } from './node-metrics.js';
import { type MetricsListen, type MetricsServer, metricsListenFromEnv, startMetricsServer } from './server.js';

/** Seconds a read of the node's leases serves scrapes (default 30): one partition Query per window. */
export const LEASES_MAX_AGE_ENV = 'VPC_LEASE_METRICS_LEASES_MAX_AGE_S';

/** How often an agent waiting for the metrics port tries it again. */
const METRICS_RETRY_MS = 500;

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
      let listen: MetricsListen | undefined;
      try {
        listen = metricsListenFromEnv(env);
      } catch (err) {
        log.error('metrics server failed to start', { error: errorMessage(err) });
        return [];
      }
      if (!listen) return [];
      const where = listen;
      let closed = false;
      let server: MetricsServer | undefined;
      let timer: NodeJS.Timeout | undefined;
      // A taken port is the agent this one supersedes (a surge rollout): it lets go once it sees the socket taken.
      const attempt = async (retries: number): Promise<void> => {
        try {
          const started = await startMetricsServer(metrics.registry, where, health);
          if (closed) return void (await started.close());
          server = started;
          log.info('metrics listening', { url: started.url, retries });
        } catch (err) {
          if (closed) return;
          // Pods come first: an agent without its metrics port still serves CNI calls.
          if ((err as NodeJS.ErrnoException).code !== 'EADDRINUSE')
            return log.error('metrics server failed to start', { error: errorMessage(err) });
          if (retries === 0) log.warn('metrics port taken; retrying until its holder lets go', { port: where.port });
          timer = setTimeout(() => void attempt(retries + 1), METRICS_RETRY_MS);
        }
      };
      await attempt(0);
      const stopSampling = metrics.sampleEventLoop();
      return [
        {
          close: async () => {
            closed = true;
            clearTimeout(timer);
            stopSampling();
            await server?.close();
          },
        },
      ];
    },
  };
  return { metrics, extensions };
}
