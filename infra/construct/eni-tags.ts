import { ENI_TAGS } from '../../shared/ec2/tags.js';

/**
 * The tag that scopes the Lambdas' EC2 rights to this cluster's ENIs: CreateNetworkInterface is allowed only
 * with `aws:RequestTag/<key> = clusterName`, and attach/assign/unassign/modify/detach/delete only on ENIs whose
 * `ec2:ResourceTag/<key>` is the cluster. The control plane must tag every ENI it creates with exactly this key
 * (on create, in the same call), or EC2 answers UnauthorizedOperation: the key is shared/ec2/tags.ts's, the one
 * the Lambdas write.
 */
export const CLUSTER_TAG_KEY: string = ENI_TAGS.cluster;

/** Auto Scaling tags every instance it launches with this key; it scopes which instances may receive ENIs. */
export const ASG_NAME_TAG_KEY = 'aws:autoscaling:groupName';
