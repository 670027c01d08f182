import { parseCidr } from '../../shared/ipv4.js';
import { parseIpv6Cidr } from '../../shared/ipv6.js';
import type { EniLinkState } from './eni-link.js';
import type { PodRouting } from './pod-routing.js';

/**
 * The node's datapath port: what ADD, DEL and CHECK need from the kernel. One real adapter
 * (`netlink-datapath.ts`, rtnetlink through the `netlink` package). Beside the ipvlan link, `setup` builds what
 * `PodLinkSpec.routing` asks for (pod-routing.ts): the L3/L3S per-ENI table and the pod's rule, and the host
 * veth; `inspectRouting` is CHECK's half of it. DEL's half (routing-teardown.ts) works on raw rtnetlink
 * messages, like the link deletion in teardown.ts.
 */
export type IpvlanMode = 'l2' | 'l3' | 'l3s';

/**
 * The instance metadata service. Its route stays in the pod's namespace after DEL (it names no device, and a
 * second attachment may share it); the namespace goes with the pod.
 */
export const IMDS_ADDRESS = '169.254.169.254';
/** IMDS on IPv6 (Nitro instances): kept from pods the same way. */
export const IMDS_ADDRESS_IPV6 = 'fd00:ec2::254';

export interface PodLinkSpec {
  /** CNI_NETNS: a path to the pod's network namespace (a bind-mounted nsfs file). */
  readonly netnsPath: string;
  /** CNI_IFNAME: the name the link gets inside the pod. */
  readonly ifName: string;
  /** The ENI's MAC: the host interface is found by it, never by a guessed name. */
  readonly masterMac: string;
  /** The ENI's device index (from the lease): 0 is the boot ENI, which setup refuses and never reconfigures. */
  readonly deviceIndex: number;
  /** The pod's address (IPv4, or IPv6 on an `ipv6` node), its subnet's prefix length and the VPC router. */
  readonly ip: string;
  readonly prefixLength: number;
  readonly gateway: string;
  /** A dual-stack pod's IPv6 address beside the IPv4 one above (same ENI, same link). */
  readonly ipv6?: PodAddress;
  /** 0 = the master's MTU (EC2_ENI_MTU once setup brought a down ENI up). */
  readonly mtu: number;
  readonly mode: IpvlanMode;
  /** Tables, rules and the host veth; absent: the ipvlan link alone (L2 without a host veth). */
  readonly routing?: PodRouting;
  /**
   * Other live attachments on the same ENI (from the journal). ipvlan's mode belongs to the master: a link made
   * in another mode would silently re-mode them, so setup reads the mode off the first one that still exists and
   * refuses a different one.
   */
  readonly peers?: readonly { readonly netnsPath: string; readonly ifName: string }[];
}

export interface PodAddress {
  readonly ip: string;
  readonly prefixLength: number;
  readonly gateway: string;
}

/**
 * The prefix length a pod's address gets: its subnet's, in both families (an IPv6 pod takes the subnet's /64,
 * as the VPC delivers the whole /64 on-link to every ENI in it, and as an IPv4 pod takes its subnet's mask).
 */
export function subnetPrefixLength(subnetCidr: string): number {
  return subnetCidr.includes(':') ? parseIpv6Cidr(subnetCidr).prefixLength : parseCidr(subnetCidr).prefixLength;
}

/** Every address the pod's link carries, the spec's first. */
export function podAddresses(spec: PodLinkSpec): PodAddress[] {
  return [{ ip: spec.ip, prefixLength: spec.prefixLength, gateway: spec.gateway }, ...(spec.ipv6 ? [spec.ipv6] : [])];
}

export interface PodLink {
  readonly ifName: string;
  readonly mac: string;
  readonly mtu: number;
  readonly sandbox: string;
}

/** What CHECK compares against the lease and the prevResult. */
export interface PodLinkState {
  readonly ifName: string;
  readonly kind?: string;
  readonly mac: string;
  readonly mtu: number;
  readonly up: boolean;
  /** CIDR notation, both families, global scope only (not the kernel's own fe80:: link-local address). */
  readonly addresses: readonly string[];
  /** Gateway of the main table's IPv4 default route through this link, if any. */
  readonly defaultGateway?: string;
  /** Gateway of the main table's IPv6 default route through this link, if any. */
  readonly defaultGateway6?: string;
}

export interface Datapath {
  /**
   * Builds the pod's link. First brings the ENI's interface up at EC2's MTU when it is down (idempotent, never
   * undone: other pods may use it by then). Then either completes or leaves nothing behind: every step pushes
   * its undo, and a failure runs the stack before rethrowing.
   */
  setup(spec: PodLinkSpec): Promise<PodLink>;
  /** Removes the pod's link; a missing netns or link is success ('absent'). */
  teardown(netnsPath: string, ifName: string): Promise<'removed' | 'absent'>;
  /** CHECK: what is missing or wrong in what `spec.routing` asked for (empty: all as ADD left it). */
  inspectRouting(spec: PodLinkSpec): Promise<string[]>;
  /** The link as the kernel sees it now; undefined when the netns or the link is missing. */
  inspect(netnsPath: string, ifName: string): Promise<PodLinkState | undefined>;
  /** The ENI's interface in the host namespace, found by MAC; undefined when none has it (CHECK, repeated ADD). */
  eniLink(mac: string): Promise<EniLinkState | undefined>;
  close(): void;
}
