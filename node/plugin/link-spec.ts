import type { Lease } from '../../shared/domain/lease.js';
import { type PodLinkSpec, subnetPrefixLength } from '../datapath/port.js';
import type { CallContext } from './context.js';
import { podRouting } from './routing.js';

/** The pod's link as ADD builds it and CHECK verifies it: from the netconf and the pod's lease (a dual pod: both). */
export function podLinkSpec(ctx: CallContext, lease: Lease, v6: Lease | undefined): PodLinkSpec {
  const { request: req, config } = ctx;
  const routing = podRouting(config, req.containerId, lease.deviceIndex);
  return {
    netnsPath: req.netns,
    ifName: req.ifName,
    masterMac: lease.mac,
    deviceIndex: lease.deviceIndex,
    ip: lease.ip,
    prefixLength: subnetPrefixLength(lease.subnetCidr),
    gateway: lease.gateway,
    ...(v6 ? { ipv6: { ip: v6.ip, prefixLength: subnetPrefixLength(v6.subnetCidr), gateway: v6.gateway } } : {}),
    mtu: config.mtu,
    mode: config.mode,
    ...(routing ? { routing } : {}),
  };
}
