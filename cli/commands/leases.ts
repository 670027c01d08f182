import { LEASE_STATES, type Lease, type LeaseState } from '../../shared/domain/lease.js';
import { isIpv4, parseIpv4 } from '../../shared/ipv4.js';
import { CliError, EXIT, UsageError } from '../errors.js';
import { table } from '../table.js';
import { type Command, checkInstanceId, findNode, isoOrDash, print } from './command.js';

function leaseJson(l: Lease): Record<string, unknown> {
  const instanceId = l.instanceArn.split('/').pop();
  return { ...l, instanceId };
}

function holderText(l: Lease): string {
  if (!l.holder) return '-';
  const pod = l.holder.podName ? `${l.holder.podNamespace ?? 'default'}/${l.holder.podName}` : l.holder.containerId;
  return `${pod} (${l.holder.ifName})`;
}

export const leasesCommand: Command = {
  name: 'leases',
  usage: 'vpc-lease leases [--instance i-…] [--state FREE|CLAIMED|COOLDOWN|RELEASING]',
  summary: 'leases of one node or of all, optionally in one state',
  options: ['instance', 'state'],
  positionals: [0, 0],
  async run(input) {
    const stateOpt = input.line.options.state;
    if (stateOpt !== undefined && !(LEASE_STATES as readonly unknown[]).includes(stateOpt))
      throw new UsageError(`--state: expected one of ${LEASE_STATES.join(', ')}, got ${JSON.stringify(stateOpt)}`);
    const state = stateOpt as LeaseState | undefined;
    const instance = input.line.options.instance;
    const ctx = input.ctx();
    const store = ctx.store();
    const nodes =
      typeof instance === 'string' ? [await findNode(ctx, checkInstanceId(instance))] : await store.listNodes();
    const leases: Lease[] = [];
    for (const node of nodes) {
      const mine = await store.listLeases(node.instanceArn, state ? { state } : undefined);
      leases.push(...mine.sort((a, b) => parseIpv4(a.ip) - parseIpv4(b.ip)));
    }
    print(input, leases.map(leaseJson), () =>
      leases.length === 0
        ? ['no leases']
        : table(
            ['IP', 'STATE', 'INSTANCE', 'ENI', 'DEV', 'HOLDER', 'CLAIMED', 'REUSABLE'],
            leases.map((l) => [
              l.ip,
              l.state,
              l.instanceArn.split('/').pop() ?? '',
              l.eniId,
              String(l.deviceIndex),
              holderText(l),
              l.state === 'CLAIMED' ? isoOrDash(l.claimedAtMs) : '-',
              l.state === 'COOLDOWN' || l.state === 'FREE' ? isoOrDash(l.reusableAtMs) : '-',
            ]),
          ),
    );
    return 0;
  },
};

export const leaseCommand: Command = {
  name: 'lease',
  usage: 'vpc-lease lease <ip>',
  summary: 'one lease by address, whichever node holds it',
  options: [],
  positionals: [1, 1],
  async run(input) {
    const ip = input.line.positionals[0] ?? '';
    if (!isIpv4(ip)) throw new UsageError(`lease: ${JSON.stringify(ip)} is not an IPv4 address`);
    const ctx = input.ctx();
    const store = ctx.store();
    // One GetItem per node (the address is the sort key, the node the partition): no Scan.
    for (const node of await store.listNodes()) {
      const lease = await store.getLease(node.instanceArn, ip);
      if (!lease) continue;
      print(input, leaseJson(lease), () => [
        `ip           ${lease.ip}`,
        `state        ${lease.state}`,
        `instance     ${node.instanceId} (${node.instanceType}, ${node.availabilityZone}, ${node.phase})`,
        `eni          ${lease.eniId} (device ${lease.deviceIndex}, mac ${lease.mac})`,
        `subnet       ${lease.subnetId} ${lease.subnetCidr}, gateway ${lease.gateway}`,
        ...(lease.prefix ? [`prefix       ${lease.prefix}`] : []),
        `holder       ${holderText(lease)}${lease.holder ? `, container ${lease.holder.containerId}, netns ${lease.holder.netns}` : ''}`,
        `created      ${isoOrDash(lease.createdAtMs)}`,
        `claimed      ${isoOrDash(lease.claimedAtMs)}`,
        `released     ${isoOrDash(lease.releasedAtMs)}`,
        `reusable     ${isoOrDash(lease.reusableAtMs)}`,
        `version      ${lease.version}`,
      ]);
      return 0;
    }
    throw new CliError(`no lease for ${ip} in table ${ctx.tableName}`, EXIT.negative);
  },
};
