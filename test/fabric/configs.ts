/**
 * The fabric's configurations: an ipvlan mode, the subnet its pod ENIs sit in, and what a pod gets (`ipFamily`).
 * The six IPv4 ones cross every mode with both subnet kinds; the two IPv6 ones each take one mode and kind, so the
 * IPv6 datapath is seen in L3S (the node's own netfilter and per-ENI tables) and in L2 (the pods' neighbour
 * discovery straight on the ENI), and both subnets carry IPv6 pods.
 */
export type Mode = 'l2' | 'l3' | 'l3s';
export type SubnetKind = 'boot' | 'pod';
export type PodFamily = 'ipv4' | 'ipv6' | 'dual';

export interface FabricConfig {
  readonly name: string;
  readonly mode: Mode;
  readonly kind: SubnetKind;
  readonly family: PodFamily;
}

const ipv4 = (mode: Mode, kind: SubnetKind): FabricConfig => ({ name: `${mode}/${kind}`, mode, kind, family: 'ipv4' });

export const CONFIGS: readonly FabricConfig[] = [
  ipv4('l2', 'boot'),
  ipv4('l2', 'pod'),
  ipv4('l3', 'boot'),
  ipv4('l3', 'pod'),
  ipv4('l3s', 'boot'),
  ipv4('l3s', 'pod'),
  { name: 'ipv6/l3s', mode: 'l3s', kind: 'pod', family: 'ipv6' },
  { name: 'dual/l2', mode: 'l2', kind: 'boot', family: 'dual' },
];

export function configNamed(name: string): FabricConfig {
  const c = CONFIGS.find((x) => x.name === name);
  if (!c) throw new Error(`no fabric configuration ${name}`);
  return c;
}

/** Whether pods of the family have a VPC address of that IP version. */
export const hasV4 = (family: PodFamily): boolean => family !== 'ipv6';
export const hasV6 = (family: PodFamily): boolean => family !== 'ipv4';
