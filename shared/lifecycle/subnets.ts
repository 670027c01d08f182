import type { ControlPlaneConfig } from '../config/control-plane.js';
import type { Ec2Instance, Ec2Port, Ec2Subnet } from '../ec2/port.js';

/**
 * The candidate pod subnets of an instance: the configured `podSubnetIds`, or the subnets carrying
 * every `podSubnetTags` tag in the instance's VPC, or by default the boot ENI's own subnet. The planner keeps
 * those in the instance's AZ.
 */
export async function candidateSubnets(
  ec2: Ec2Port,
  config: ControlPlaneConfig,
  instance: Ec2Instance,
): Promise<Ec2Subnet[]> {
  if (config.podSubnetIds.length > 0) return ec2.describeSubnets({ subnetIds: config.podSubnetIds });
  if (Object.keys(config.podSubnetTags).length > 0)
    return ec2.describeSubnets({ tags: config.podSubnetTags, vpcId: instance.vpcId });
  const boot = instance.interfaces.find((i) => i.attachment?.deviceIndex === 0);
  return ec2.describeSubnets({ subnetIds: [boot?.subnetId ?? instance.subnetId] });
}

/** Security groups for pod ENIs: the configured ones, else the boot ENI's (pods then look like the node). */
export function podSecurityGroups(config: ControlPlaneConfig, instance: Ec2Instance): readonly string[] {
  if (config.securityGroupIds.length > 0) return config.securityGroupIds;
  return instance.interfaces.find((i) => i.attachment?.deviceIndex === 0)?.securityGroupIds ?? [];
}
