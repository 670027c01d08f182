import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { errorMessage, ValidationError } from '../../shared/errors.js';
import { type IpFamilySetting, type MaxPodsBreakdown, maxPodsBreakdown } from '../../shared/planner/max-pods.js';
import { CniError } from '../cni/errors.js';
import { type PluginConfig, parseNetconf } from '../config/netconf.js';
import { checkOverrides } from '../config/overrides.js';
import { DEFAULT_IMDS_ENDPOINT, ImdsClient } from '../identity/imds.js';
import { PLUGIN_TYPE } from '../installer/install.js';
import { shippedInstanceLimits } from './instance-types.js';
import { compareMaxPods, kubeletMaxPods, type MaxPodsComparison, NODEADM_KUBELET_CONFIG } from './kubelet.js';

/** Where the installer writes its conflist by default (its --conf-dir / VPC_LEASE_CNI_CONF_DIR and --conf-name). */
export function defaultConflistPath(env: NodeJS.ProcessEnv): string {
  return join(env['VPC_LEASE_CNI_CONF_DIR'] ?? '/etc/cni/net.d', '10-vpc-lease.conflist');
}

/** Where the plugin's configuration is read from: the installer's JSON, or an installed conflist. */
export interface ConfigSource {
  /** The installer's --config JSON (or VPC_LEASE_CNI_CONFIG), already parsed. */
  readonly pluginConfig?: Readonly<Record<string, unknown>>;
  readonly conflistPath?: string;
}

function validated(netconf: Record<string, unknown>, where: string): PluginConfig {
  try {
    return parseNetconf(netconf);
  } catch (err) {
    const details = err instanceof CniError && err.details ? ` (${err.details})` : '';
    throw new ValidationError(`${where}: ${errorMessage(err)}${details}`);
  }
}

/** The plugin's configuration, validated exactly as ADD validates it. */
export function installedPluginConfig(source: ConfigSource, env: NodeJS.ProcessEnv): PluginConfig {
  if (source.pluginConfig)
    return validated({ cniVersion: '1.0.0', name: 'vpc-lease', ...source.pluginConfig, type: PLUGIN_TYPE }, 'config');
  const path = source.conflistPath ?? defaultConflistPath(env);
  if (!existsSync(path))
    throw new ValidationError(`no conflist at ${path}: pass --conflist, or --config with the installer's JSON`);
  let conf: { cniVersion?: unknown; name?: unknown; plugins?: unknown };
  try {
    conf = JSON.parse(readFileSync(path, 'utf8')) as typeof conf;
  } catch (err) {
    throw new ValidationError(`cannot read the conflist ${path}: ${errorMessage(err)}`);
  }
  const entry = Array.isArray(conf.plugins)
    ? (conf.plugins as Record<string, unknown>[]).find((p) => p?.['type'] === PLUGIN_TYPE)
    : undefined;
  if (!entry) throw new ValidationError(`the conflist ${path} has no ${PLUGIN_TYPE} plugin`);
  return validated({ cniVersion: conf.cniVersion, name: conf.name, ...entry }, path);
}

/** This instance's type, from the same IMDS the plugin reads its identity from (with the same override rules). */
export async function instanceTypeFromImds(config: PluginConfig, env: NodeJS.ProcessEnv): Promise<string> {
  checkOverrides(env, config);
  const endpoint = config.imdsEndpoint ?? env['AWS_EC2_METADATA_SERVICE_ENDPOINT'] ?? DEFAULT_IMDS_ENDPOINT;
  return new ImdsClient(endpoint, config.imdsTimeoutMs).instanceType();
}

/** The planner's figure for this type under this configuration: what the control plane records for the node. */
export function nodeMaxPods(
  instanceType: string,
  config: Pick<PluginConfig, 'prefixDelegation' | 'maxPodsCap'> & { readonly ipFamily?: IpFamilySetting },
): MaxPodsBreakdown {
  const limits = shippedInstanceLimits(instanceType);
  if (!limits) throw new ValidationError(`unknown instance type ${instanceType} in the shipped instance-type table`);
  // ipFamily: the conflist key v6node's plugin config carries; kubelet must get the control plane's figure.
  return maxPodsBreakdown(limits, {
    prefixDelegation: config.prefixDelegation,
    capPods: config.maxPodsCap,
    ...(config.ipFamily ? { ipFamily: config.ipFamily } : {}),
  });
}

export interface KubeletCheckOptions extends ConfigSource {
  readonly env: NodeJS.ProcessEnv;
  /** Default: nodeadm's /etc/kubernetes/kubelet/config.json (and its `.d` drop-ins). */
  readonly kubeletConfigPath?: string;
  /** A file with kubelet's flags (nodeadm's /etc/eks/kubelet/environment, AL2's KUBELET_EXTRA_ARGS drop-in). */
  readonly kubeletArgsPath?: string;
  /** Known already (skips IMDS). */
  readonly instanceType?: string;
}

export interface KubeletCheck extends MaxPodsComparison {
  readonly breakdown: MaxPodsBreakdown;
}

/**
 * Whether kubelet admits more pods than vpc-lease gives this node addresses for. For the installer: it
 * throws only when a figure cannot be had (ValidationError, ImdsError); `exceeds` carries the verdict.
 */
export async function checkKubeletMaxPods(options: KubeletCheckOptions): Promise<KubeletCheck> {
  const config = installedPluginConfig(options, options.env);
  const instanceType = options.instanceType ?? (await instanceTypeFromImds(config, options.env));
  const breakdown = nodeMaxPods(instanceType, config);
  const kubelet = kubeletMaxPods({
    configPath: options.kubeletConfigPath ?? NODEADM_KUBELET_CONFIG,
    ...(options.kubeletArgsPath ? { argsPath: options.kubeletArgsPath } : {}),
  });
  return { ...compareMaxPods(breakdown.maxPods, kubelet), breakdown };
}
