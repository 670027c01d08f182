import { errorMessage, ValidationError } from '../../shared/errors.js';
import { describeMaxPods } from '../../shared/planner/max-pods.js';
import { installedPluginConfig, instanceTypeFromImds, nodeMaxPods } from './figure.js';
import { compareMaxPods, kubeletMaxPods } from './kubelet.js';

export const MAX_PODS_USAGE =
  'vpc-lease-cni max-pods [--conflist PATH | --config JSON] [--kubelet-config PATH] [--kubelet-args PATH] [--json]';

/** Exit codes: the figure printed; kubelet's max-pods exceeds it; no figure could be had. */
export const MAX_PODS_EXIT = { ok: 0, kubeletExceeds: 1, error: 2 } as const;

const VALUED = new Set(['conflist', 'config', 'kubelet-config', 'kubelet-args']);

function parseArgs(args: readonly string[]): { flags: Map<string, string>; json: boolean } {
  const flags = new Map<string, string>();
  let json = false;
  for (let i = 0; i < args.length; i++) {
    const arg = args[i]!;
    if (arg === '--json') {
      json = true;
      continue;
    }
    const [name, inline] = arg.startsWith('--') ? arg.slice(2).split(/=(.*)/s, 2) : [undefined, undefined];
    if (!name || !VALUED.has(name)) throw new ValidationError(`unknown argument ${arg}; usage: ${MAX_PODS_USAGE}`);
    const value = inline ?? args[++i];
    if (value === undefined) throw new ValidationError(`--${name} needs a value; usage: ${MAX_PODS_USAGE}`);
    flags.set(name, value);
  }
  if (flags.has('config') && flags.has('conflist')) throw new ValidationError('give --config or --conflist, not both');
  return { flags, json };
}

function pluginConfigJson(text: string): Record<string, unknown> {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    throw new ValidationError('--config (or VPC_LEASE_CNI_CONFIG) is not JSON');
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value))
    throw new ValidationError('--config (or VPC_LEASE_CNI_CONFIG) is not a JSON object');
  return value as Record<string, unknown>;
}

export interface MaxPodsIo {
  readonly out: (text: string) => void;
  readonly err: (text: string) => void;
}

/**
 * `vpc-lease-cni max-pods`: this node's max-pods, from its instance type (IMDS) and the plugin's configuration
 * as the installer takes it (--config / VPC_LEASE_CNI_CONFIG) or as installed (the conflist); the same figure
 * as `vpc-lease max-pods <type>` and the node item. With --kubelet-config or --kubelet-args it also checks
 * kubelet's configured max-pods against it.
 */
export async function runMaxPods(args: readonly string[], env: NodeJS.ProcessEnv, io: MaxPodsIo): Promise<number> {
  try {
    const { flags, json } = parseArgs(args);
    const configText = flags.get('config') ?? (flags.has('conflist') ? undefined : env['VPC_LEASE_CNI_CONFIG']);
    const conflist = flags.get('conflist');
    const config = installedPluginConfig(
      configText !== undefined
        ? { pluginConfig: pluginConfigJson(configText) }
        : conflist
          ? { conflistPath: conflist }
          : {},
      env,
    );
    const breakdown = nodeMaxPods(await instanceTypeFromImds(config, env), config);
    const configPath = flags.get('kubelet-config');
    const argsPath = flags.get('kubelet-args');
    const check =
      configPath || argsPath
        ? compareMaxPods(
            breakdown.maxPods,
            kubeletMaxPods({ ...(configPath ? { configPath } : {}), ...(argsPath ? { argsPath } : {}) }),
          )
        : undefined;
    if (json)
      io.out(
        `${JSON.stringify(check ? { ...breakdown, kubelet: check.kubelet, exceeds: check.exceeds } : breakdown)}\n`,
      );
    else io.out(`${describeMaxPods(breakdown).join('\n')}\n`);
    if (!check) return MAX_PODS_EXIT.ok;
    io.err(`vpc-lease-cni max-pods: ${check.exceeds ? 'warning: ' : ''}${check.message}\n`);
    return check.exceeds ? MAX_PODS_EXIT.kubeletExceeds : MAX_PODS_EXIT.ok;
  } catch (err) {
    io.err(`vpc-lease-cni max-pods: ${errorMessage(err)}\n`);
    return MAX_PODS_EXIT.error;
  }
}
