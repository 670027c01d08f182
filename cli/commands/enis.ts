import { ENI_TAGS } from '../../shared/ec2/tags.js';
import { table } from '../table.js';
import { type Command, checkInstanceId, print } from './command.js';

export const enisCommand: Command = {
  name: 'enis',
  usage: 'vpc-lease enis [--instance i-…] [--cluster NAME]',
  summary: "the cluster's ENIs as EC2 reports them (tag vpc-lease:cluster)",
  options: ['instance'],
  positionals: [0, 0],
  async run(input) {
    const ctx = input.ctx();
    const instance = input.line.options.instance;
    const tags: Record<string, string> = { [ENI_TAGS.cluster]: ctx.clusterName };
    if (typeof instance === 'string') tags[ENI_TAGS.instance] = checkInstanceId(instance);
    const enis = (await ctx.ec2().describeNetworkInterfaces({ tags })).sort(
      (a, b) =>
        (a.tags[ENI_TAGS.instance] ?? '').localeCompare(b.tags[ENI_TAGS.instance] ?? '') ||
        (a.attachment?.deviceIndex ?? 99) - (b.attachment?.deviceIndex ?? 99),
    );
    print(input, enis, () =>
      enis.length === 0
        ? [`no ENIs tagged ${ENI_TAGS.cluster}=${ctx.clusterName}`]
        : table(
            ['ENI', 'INSTANCE', 'DEV', 'STATUS', 'DOT', 'SUBNET', 'MAC', 'ADDRESSES', 'PREFIXES'],
            enis.map((e) => [
              e.eniId,
              e.attachment?.instanceId || e.tags[ENI_TAGS.instance] || '-',
              e.attachment ? String(e.attachment.deviceIndex) : '-',
              e.attachment ? `${e.status}/${e.attachment.status}` : e.status,
              e.attachment ? (e.attachment.deleteOnTermination ? 'yes' : 'NO') : '-',
              e.subnetId,
              e.mac,
              String(e.secondaryIps.length),
              e.prefixes.join(',') || '-',
            ]),
          ),
    );
    return 0;
  },
};
