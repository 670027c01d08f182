import { isEc2Error } from '../ec2/errors.js';
import { ENI_TAGS } from '../ec2/tags.js';
import type { LifecycleDeps } from './deps.js';

export interface SweepResult {
  readonly deleted: readonly string[];
  readonly markedDeleteOnTermination: readonly string[];
  /** ENIs still detaching: delete them on a later pass. */
  readonly pending: readonly string[];
}

/**
 * Leaves no pod ENI of an instance behind (DESIGN.md invariant 3): an ENI still attached to it gets
 * DeleteOnTermination, so EC2 removes it with the instance (an attached ENI cannot be deleted); an unattached
 * one (created but never attached, or detached by the instance's termination) is deleted now. Found by tags,
 * not only from the node item, so an ENI whose create was never recorded (crash right after the call) is
 * caught too.
 */
export async function sweepInstanceEnis(deps: LifecycleDeps, instanceId: string): Promise<SweepResult> {
  const enis = await deps.ec2.describeNetworkInterfaces({
    tags: { [ENI_TAGS.cluster]: deps.config.clusterName, [ENI_TAGS.instance]: instanceId },
  });
  const deleted: string[] = [];
  const marked: string[] = [];
  const pending: string[] = [];
  for (const eni of enis) {
    const att = eni.attachment;
    if (att && att.instanceId === instanceId && (att.status === 'attaching' || att.status === 'attached')) {
      if (!att.deleteOnTermination) {
        await deps.ec2.setDeleteOnTermination(eni.eniId, att.attachmentId, true);
        marked.push(eni.eniId);
      }
    } else if (!att || att.status === 'detached') {
      try {
        await deps.ec2.deleteNetworkInterface(eni.eniId);
      } catch (err) {
        if (!(isEc2Error(err) && err.code.startsWith('InvalidNetworkInterfaceID'))) throw err;
      }
      deleted.push(eni.eniId);
    } else {
      pending.push(eni.eniId);
    }
  }
  return { deleted, markedDeleteOnTermination: marked, pending };
}
