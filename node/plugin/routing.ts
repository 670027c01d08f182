import { egressStateDir } from '../datapath/egress4.js';
import type { PodRouting } from '../datapath/pod-routing.js';
import type { IpvlanMode } from '../datapath/port.js';
import type { TeardownSpec } from '../datapath/routing-teardown.js';

/**
 * From the netconf and the lease to what the datapath builds beside the ipvlan link: the ENI's table
 * and the pod's rule in L3/L3S, the host veth when enabled. Undefined when there is nothing to build or remove
 * (L2 without a host veth), so those calls never load netlink for it.
 */
export interface RoutingConfig {
  readonly mode: IpvlanMode;
  readonly hostVeth: boolean;
  readonly serviceCidrs: readonly string[];
  readonly routeTableBase: number;
  /** `ipv6` pods with a host veth get IPv4 egress, from addresses claimed under dataDir. */
  readonly ipFamily?: 'ipv4' | 'ipv6' | 'dual';
  readonly dataDir?: string;
}

function hostVethEgress(config: RoutingConfig): { egress4Dir: string } | Record<string, never> {
  return config.ipFamily === 'ipv6' && config.dataDir ? { egress4Dir: egressStateDir(config.dataDir) } : {};
}

export function hasRouting(config: RoutingConfig): boolean {
  return config.mode !== 'l2' || config.hostVeth;
}

export function podRouting(config: RoutingConfig, containerId: string, deviceIndex: number): PodRouting | undefined {
  if (!hasRouting(config)) return undefined;
  return {
    deviceIndex,
    tableBase: config.routeTableBase,
    ...(config.hostVeth
      ? { hostVeth: { containerId, serviceCidrs: config.serviceCidrs, ...hostVethEgress(config) } }
      : {}),
  };
}

/** What DEL (and ADD's undo) removes; the address and device index may be unknown (no journal record). */
export function routingTeardown(
  config: RoutingConfig,
  attachment: { readonly containerId: string; readonly ifName: string },
  placement: { readonly ip?: string; readonly deviceIndex?: number; readonly ipv6?: string },
): TeardownSpec | undefined {
  if (!hasRouting(config)) return undefined;
  return {
    mode: config.mode,
    ifName: attachment.ifName,
    tableBase: config.routeTableBase,
    ...(placement.ip !== undefined ? { podIp: placement.ip } : {}),
    ...(placement.ipv6 !== undefined ? { podIpv6: placement.ipv6 } : {}),
    ...(placement.deviceIndex !== undefined ? { deviceIndex: placement.deviceIndex } : {}),
    ...(config.hostVeth ? { hostVeth: { containerId: attachment.containerId, ...hostVethEgress(config) } } : {}),
  };
}
