import type { SubnetRefusal } from '../../shared/domain/node.js';
import { ENI_TAGS } from '../../shared/ec2/tags.js';
import { freePrefixBlocks } from '../../shared/planner/subnet-room.js';
import { CliError, EXIT } from '../errors.js';
import { table } from '../table.js';
import { type Command, isoOrDash, print } from './command.js';

const SUBNET_ID = /^subnet-[0-9a-f]{8}([0-9a-f]{9})?$/;

interface SubnetRow {
  readonly subnetId: string;
  readonly availabilityZone: string;
  readonly cidr: string;
  /** EC2's AvailableIpAddressCount. */
  readonly availableIpCount: number;
  /** Aligned /28 blocks with no address used: prefixes EC2 could still delegate. */
  readonly freePrefixBlocks: number;
  /** ENIs in the subnet, all owners, and those tagged for this cluster. */
  readonly enis: number;
  readonly clusterEnis: number;
  /** The latest refusal any node item records for the subnet. */
  readonly lastRefusal?: SubnetRefusal & { readonly instanceId: string };
}

/**
 * Room per pod subnet, with only the rights an operator has (DescribeSubnets, DescribeNetworkInterfaces, table
 * reads): free addresses as EC2 counts them, and free aligned /28s counted from every ENI's addresses and
 * prefixes in the subnet — the figure that decides `InsufficientCidrBlocks` and that EC2 does not report.
 */
export const subnetsCommand: Command = {
  name: 'subnets',
  usage: 'vpc-lease subnets [--subnet subnet-…,subnet-…]',
  summary: 'free addresses and free aligned /28s per pod subnet, and the last refusal a node recorded',
  options: ['subnet'],
  positionals: [0, 0],
  async run(input) {
    const ctx = input.ctx();
    const nodes = await ctx.store().listNodes();
    const refusals = new Map<string, SubnetRow['lastRefusal']>();
    for (const node of nodes)
      for (const r of node.subnetRefusals ?? []) {
        const seen = refusals.get(r.subnetId);
        if (!seen || seen.atMs < r.atMs) refusals.set(r.subnetId, { ...r, instanceId: node.instanceId });
      }
    const ec2 = ctx.ec2();
    const given = input.line.options.subnet;
    const ids =
      typeof given === 'string'
        ? checkSubnetIds(given)
        : [
            ...new Set([
              ...nodes.flatMap((n) => [...n.podSubnetIds, ...n.enis.map((e) => e.subnetId)]),
              ...refusals.keys(),
              ...(await ec2.describeNetworkInterfaces({ tags: { [ENI_TAGS.cluster]: ctx.clusterName } })).map(
                (e) => e.subnetId,
              ),
            ]),
          ];
    const subnets = ids.length === 0 ? [] : await ec2.describeSubnets({ subnetIds: ids });
    const enis = subnets.length === 0 ? [] : await ec2.describeNetworkInterfaces({ subnetIds: ids });
    const rows: SubnetRow[] = subnets
      .map((s) => {
        const inSubnet = enis.filter((e) => e.subnetId === s.subnetId);
        const lastRefusal = refusals.get(s.subnetId);
        return {
          subnetId: s.subnetId,
          availabilityZone: s.availabilityZone,
          cidr: s.cidr,
          availableIpCount: s.availableIpCount,
          freePrefixBlocks: freePrefixBlocks(s.cidr, inSubnet),
          enis: inSubnet.length,
          clusterEnis: inSubnet.filter((e) => e.tags[ENI_TAGS.cluster] === ctx.clusterName).length,
          ...(lastRefusal ? { lastRefusal } : {}),
        };
      })
      .sort((a, b) => a.availabilityZone.localeCompare(b.availabilityZone) || a.subnetId.localeCompare(b.subnetId));
    print(input, rows, () =>
      rows.length === 0
        ? ['no pod subnets: no node items or ENIs of this cluster (name some with --subnet)']
        : table(
            ['SUBNET', 'AZ', 'CIDR', 'FREE-ADDRESSES', 'FREE-/28', 'ENIS', 'CLUSTER-ENIS', 'LAST-REFUSAL'],
            rows.map((r) => [
              r.subnetId,
              r.availabilityZone,
              r.cidr,
              String(r.availableIpCount),
              String(r.freePrefixBlocks),
              String(r.enis),
              String(r.clusterEnis),
              r.lastRefusal
                ? `${r.lastRefusal.code} ${isoOrDash(r.lastRefusal.atMs)} (${r.lastRefusal.instanceId})`
                : '-',
            ]),
          ),
    );
    return 0;
  },
};

function checkSubnetIds(value: string): string[] {
  const ids = value.split(',').map((s) => s.trim());
  const bad = ids.find((id) => !SUBNET_ID.test(id));
  if (bad !== undefined)
    throw new CliError(`--subnet: ${JSON.stringify(bad)} is not a subnet id (subnet-…)`, EXIT.usage);
  return ids;
}
