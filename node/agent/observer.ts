import type { Logger } from '../../shared/log.js';
import type { WarmDepsHooks } from './warm-deps.js';

/** Which process ran a command: the resident agent, or the full plugin the shim executed instead. */
export type CommandPath = 'agent' | 'fallback';

/** One CNI command as the agent saw it finish (after its answer went to the shim). */
export interface CommandEvent {
  readonly command: string;
  readonly ok: boolean;
  /** The CNI error code when not ok (11 try again, 100 netlink, ...). */
  readonly cniCode?: number;
  readonly durationMs: number;
  readonly path: CommandPath;
}

/**
 * The seam for metrics (node/metrics/ implements it): the agent calls it around every command. Calls are
 * synchronous and must not throw; an observer that needs I/O queues it.
 */
export interface AgentObserver {
  commandStarted?(command: string): void;
  commandFinished(event: CommandEvent): void;
}

export const NO_OBSERVER: AgentObserver = { commandFinished: () => undefined };

/** Whether the agent serves its socket: what the DaemonSet's probes ask (node/metrics/server.ts, /healthz). */
export interface AgentHealth {
  /** Ready: this process serves the socket path. */
  readonly ok: boolean;
  /** Alive: serving, standing by after a newer agent took the path, or draining; false when broken. */
  readonly live: boolean;
  readonly reason: string;
}

/** Something the agent runs beside its socket (the metrics HTTP server) and stops on shutdown. */
export interface AgentSidecar {
  close(): Promise<void>;
}

export interface AgentExtensions {
  readonly observer: AgentObserver;
  /** Hooks into the warm identity and stores (metrics: store latency, credential refreshes, the node's leases). */
  readonly depsHooks?: WarmDepsHooks;
  /**
   * Called once the socket listens: the place to start an HTTP server (metrics). `env` is the agent's own
   * environment; `health` checks the socket; the returned sidecars are closed when the agent stops.
   */
  start(context: {
    readonly env: NodeJS.ProcessEnv;
    readonly log: Logger;
    readonly health: () => Promise<AgentHealth>;
  }): Promise<readonly AgentSidecar[]>;
}

export const NO_EXTENSIONS: AgentExtensions = { observer: NO_OBSERVER, start: async () => [] };
