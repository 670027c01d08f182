import { parseControlPlaneConfig } from '../../shared/config/control-plane.js';
import { loadInstanceTypes } from '../../shared/data/catalog.js';
import { INSTANCE_TYPE_PATTERN } from '../../shared/domain/instance-types.js';
import type { InstanceLimits } from '../../shared/domain/limits.js';
import { describeMaxPods, type IpFamilySetting, maxPodsBreakdown, podEniSlots } from '../../shared/planner/max-pods.js';
import { CliError, EXIT, UsageError } from '../errors.js';
import type { CommandInput } from './command.js';
import { type Command, print } from './command.js';

/**
 * Limits come from the instance-type table the project ships (shared/data, DescribeInstanceTypes across
 * regions), so these two commands need no credentials; `--from-ec2` asks EC2 instead, through the same cached
 * DescribeInstanceTypes call the control plane makes.
 */
async function limitsOf(input: CommandInput, instanceType: string): Promise<InstanceLimits> {
  if (!INSTANCE_TYPE_PATTERN.test(instanceType))
    throw new UsageError(`${JSON.stringify(instanceType)} is not an instance type (like m5.large)`);
  if (input.line.options['from-ec2']) return input.ctx().ec2().describeInstanceLimits(instanceType);
  const limits = loadInstanceTypes().get(instanceType);
  if (!limits)
    throw new CliError(
      `unknown instance type ${instanceType} in the shipped table (shared/data/ec2-instance-types.json); --from-ec2 asks EC2`,
      EXIT.negative,
    );
  return limits;
}

export const limitsCommand: Command = {
  name: 'limits',
  usage: 'vpc-lease limits <instance-type> [--from-ec2]',
  summary: 'network limits of an instance type: ENIs (per card), addresses per ENI',
  options: ['from-ec2'],
  positionals: [1, 1],
  async run(input) {
    const limits = await limitsOf(input, input.line.positionals[0] ?? '');
    const slots = podEniSlots(limits);
    print(input, { ...limits, podEniSlots: slots }, () => [
      `${limits.instanceType}${limits.hypervisor ? ` (${limits.hypervisor}${limits.bareMetal ? ', metal' : ''})` : ''}`,
      `  ENIs               ${limits.maxEnis} (${slots} for pods: the boot ENI is never used)`,
      `  IPv4 per ENI       ${limits.ipv4PerEni} (primary included)`,
      `  network cards      ${limits.networkCards.map((c) => `#${c.networkCardIndex}: ${c.maxEnis} ENIs`).join(', ')}`,
      `  default card       ${limits.defaultNetworkCardIndex}`,
    ]);
    return 0;
  },
};

export const maxPodsCommand: Command = {
  name: 'max-pods',
  usage:
    'vpc-lease max-pods <instance-type> [--prefix-delegation] [--ip-family ipv4|ipv6|dual] [--max-pods-cap N] [--from-ec2]',
  summary: "kubelet's --max-pods for vpc-lease pods on an instance type",
  options: ['prefix-delegation', 'ip-family', 'max-pods-cap', 'from-ec2'],
  positionals: [1, 1],
  async run(input) {
    const limits = await limitsOf(input, input.line.positionals[0] ?? '');
    const prefixDelegation = input.line.options['prefix-delegation'] === true;
    const capRaw = input.line.options['max-pods-cap'];
    // The same bounds and default as the control plane's `maxPods` setting.
    let capPods: number;
    try {
      capPods = parseControlPlaneConfig(
        capRaw === undefined ? {} : { minLeases: 0, maxPods: /^\d+$/.test(String(capRaw)) ? Number(capRaw) : capRaw },
      ).maxPods;
    } catch (err) {
      throw new UsageError(`--max-pods-cap: ${(err as Error).message}`);
    }
    const familyRaw = input.line.options['ip-family'];
    let ipFamily: IpFamilySetting;
    try {
      // The same values and default as the control plane's `ipFamily` setting.
      ipFamily = parseControlPlaneConfig(familyRaw === undefined ? {} : { ipFamily: familyRaw }).ipFamily;
    } catch (err) {
      throw new UsageError(`--ip-family: ${(err as Error).message}`);
    }
    const breakdown = maxPodsBreakdown(limits, { prefixDelegation, capPods, ipFamily });
    print(input, breakdown, () => describeMaxPods(breakdown));
    return 0;
  },
};
