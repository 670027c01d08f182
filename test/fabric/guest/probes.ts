/** What the fabric's cells share: the pods they run in, the cell shape, and the small probes (HTTP GET, ping). */
import { type Eni, IMDS_IP, IMDS_IP6, TRAP_IP, TRAP_IP6, UNASSIGNED_SOURCE, UNASSIGNED_SOURCE6 } from '../topology.js';
import { exec, type IpVersion } from './net.js';

export interface Pod {
  readonly ns: string;
  readonly id: string;
  /** Its VPC IPv4 address; an `ipv6` pod's IPv6 address (it has no VPC IPv4). */
  readonly ip: string;
  /** Its VPC IPv6 address (`ipv6` and `dual` pods). */
  readonly ip6?: string;
  readonly eni: Eni;
  readonly name: string;
}

export interface NodePods {
  readonly client: Pod;
  readonly same: Pod;
  readonly other: Pod;
  readonly noVeth: Pod;
}

export interface Cell {
  readonly name: string;
  run(): Promise<string | undefined>;
}

export function short(text: string): string {
  return text.replace(/\s+/g, ' ').trim().slice(0, 240);
}

/** HTTP GET from a namespace; the body, or undefined with why. */
export async function get(ns: string | undefined, url: string, seconds = 12): Promise<{ body?: string; why: string }> {
  const r = await exec(ns, ['timeout', String(seconds), 'busybox', 'wget', '-q', '-O', '-', url]);
  return r.code === 0
    ? { body: r.stdout, why: '' }
    : { why: r.code === 124 ? 'timed out' : short(r.stderr) || `exit ${r.code}` };
}

/** Three echoes, any answer counts: a lone first packet lost to neighbour resolution is not a dead path. */
export async function ping(ns: string | undefined, target: string, extra: readonly string[] = []): Promise<boolean> {
  const r = await exec(ns, [
    'busybox',
    target.includes(':') ? 'ping6' : 'ping',
    '-c',
    '3',
    '-W',
    '8',
    ...extra,
    target,
  ]);
  return r.code === 0;
}

/** What a cell needs to know of the IP version it checks: its tools' names, masks and the fabric's addresses. */
export interface Family {
  readonly v: IpVersion;
  /** Appended to a cell's name when the configuration checks both versions. */
  readonly label: string;
  readonly hostMask: string;
  readonly icmp: string;
  readonly imds: string;
  readonly trap: string;
  readonly unassigned: string;
}

export const V4: Family = {
  v: 4,
  label: '',
  hostMask: '32',
  icmp: 'icmp',
  imds: IMDS_IP,
  trap: TRAP_IP,
  unassigned: UNASSIGNED_SOURCE,
};
export const V6: Family = {
  v: 6,
  label: ' (IPv6)',
  hostMask: '128',
  icmp: 'ipv6-icmp',
  imds: IMDS_IP6,
  trap: TRAP_IP6,
  unassigned: UNASSIGNED_SOURCE6,
};

/** A pod's VPC address of a version (an IPv4 cell never runs on an `ipv6` pod). */
export function addressOf(pod: Pod, f: Family): string {
  if (f.v === 4) return pod.ip;
  if (!pod.ip6) throw new Error(`${pod.name} has no IPv6 address`);
  return pod.ip6;
}

/** An address as a URL's host. */
export function urlHost(address: string): string {
  return address.includes(':') ? `[${address}]` : address;
}
