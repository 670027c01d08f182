/**
 * The results file the fabric guest writes (after every configuration, so a guest that dies still reports) and
 * the host reads: every cell, every plugin answer the harness retried (code 11, or a failed DEL), and each
 * configuration's wall time.
 */
export interface CellResult {
  readonly config: string;
  readonly cell: string;
  readonly ok: boolean;
  readonly detail: string;
  readonly ms: number;
}

/** One answer the fabric retried as kubelet would (code 11, or a failed DEL): the call, its attempt, the answer. */
export interface PluginRetry {
  readonly node: string;
  readonly command: string;
  readonly containerId: string;
  readonly attempt: number;
  readonly msg: string;
  readonly details: string;
}

export interface FabricResults {
  readonly cells: CellResult[];
  readonly retries: PluginRetry[];
  /** Seconds each configuration took in the guest, setup and DELs included. */
  readonly configSeconds: Record<string, number>;
  /** Programs the guest started, by name: the run's work, which seconds on a shared machine do not show. */
  readonly execs?: Record<string, number>;
}

/**
 * Retried plugin calls a whole run may need before it fails. Kubelet retries a sandbox and its teardown, so one
 * transient refusal is not a datapath bug; a run that keeps needing them is hiding one (a leaked lease shows as code 11 too). With the
 * plugin's timeouts sized for the emulated guest (main.ts), runs need none.
 */
export const RETRY_BUDGET = 2;
