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

/**
 * How many controls a configuration runs without their defence (guest/defences.ts, defendedControls): the source
 * check, delivery to the owning ENI and IMDS from both kinds of pod for each IP version of its pods, the
 * egress-only gateway with IPv6, and IMDS over an `ipv6` pod's IPv4 egress. The guest refuses a list of another
 * length, so the schedule below cannot drift from what the guest has.
 */
export function controlCount(family: PodFamily): number {
  return (hasV4(family) ? 4 : 0) + (hasV6(family) ? 5 : 0) + (family === 'ipv6' ? 1 : 0);
}

/**
 * The controls a run lifts the defence of, in one configuration: the whole list, or one share of it (`part` of
 * `parts`: the controls at index part, part + parts, ...), so a share mixes the slow ping controls and the quick
 * IMDS ones. Written `l2/boot` (all) or `l2/boot#1of2` in FABRIC_CONTROLS.
 */
export interface ControlShare {
  readonly config: string;
  readonly part: number;
  readonly parts: number;
}

export const allControls = (config: string): ControlShare => ({ config, part: 0, parts: 1 });

export function formatShare(s: ControlShare): string {
  return s.parts === 1 ? s.config : `${s.config}#${s.part + 1}of${s.parts}`;
}

export function parseShare(text: string): ControlShare {
  const m = /^([^#]+)(?:#(\d+)of(\d+))?$/.exec(text);
  const part = Number(m?.[2] ?? 1) - 1;
  const parts = Number(m?.[3] ?? 1);
  if (!m || part < 0 || part >= parts) throw new Error(`not a share of the controls: ${JSON.stringify(text)}`);
  return { config: configNamed(m[1]!).name, part, parts };
}

/** The share's items of a configuration's controls, in their order. */
export function shareOf<T>(items: readonly T[], s: Pick<ControlShare, 'part' | 'parts'>): T[] {
  return items.filter((_, i) => i % s.parts === s.part);
}
