import type { Ec2Eni } from '../ec2/port.js';
import { VpcLeaseError } from '../errors.js';

/** The tags the AWS VPC CNI (aws-node) puts on every ENI it creates; EKS adds the owner tag. */
const VPC_CNI_INSTANCE_TAG = 'node.k8s.amazonaws.com/instance_id';
const EKS_ENI_OWNER_TAG = 'eks:eni:owner';

/** Whether an ENI was made by the AWS VPC CNI, which runs beside us only until aws-node is removed. */
export function isVpcCniEni(eni: Pick<Ec2Eni, 'tags'>): boolean {
  return eni.tags[VPC_CNI_INSTANCE_TAG] !== undefined || eni.tags[EKS_ENI_OWNER_TAG] === 'amazon-vpc-cni';
}

/**
 * The launch's failure reason when aws-node has attached ENIs to the instance. Planning around them would bring
 * the node up with two CNIs: aws-node's conflist sorts first (the runtime keeps using it) and it keeps attaching
 * ENIs at the device indexes and within the ENI and address limits we plan with. So the launch fails, naming them.
 */
export function vpcCniReason(instanceId: string, enis: readonly Ec2Eni[]): string {
  const named = enis.map((e) => `${e.eniId} at device index ${e.attachment?.deviceIndex ?? '?'}`).join(', ');
  return (
    `foreign-cni: the AWS VPC CNI (aws-node) attached ${named} to ${instanceId}; a node cannot run both CNIs. ` +
    'Remove it (`kubectl -n kube-system delete daemonset aws-node`, or create the cluster without the default ' +
    'networking add-ons) and replace this node'
  );
}

/** A device index the launch planned is held by an ENI it did not create: retrying the attach cannot help. */
export class ForeignEniError extends VpcLeaseError {
  constructor(
    readonly reason: string,
    options?: { cause?: unknown },
  ) {
    super(reason, options);
  }
}

/** Why an ENI's planned device index cannot be used: whose ENI holds it, and what to do. */
export function occupiedIndexReason(instanceId: string, deviceIndex: number, occupant: Ec2Eni): string {
  if (isVpcCniEni(occupant)) return vpcCniReason(instanceId, [occupant]);
  return (
    `foreign-eni: device index ${deviceIndex} of ${instanceId}, planned for a pod ENI, is held by ` +
    `${occupant.eniId}, which vpc-lease did not create; find what attached it (another CNI, a script) and ` +
    'remove it, then replace this node'
  );
}
