export { QUEUE_URL_ENV, VpcLeaseAllocator } from './allocator.js';
export { ASG_NAME_TAG_KEY, CLUSTER_TAG_KEY } from './eni-tags.js';
export {
  type PodEniLaunchTemplateData,
  type PodEniLaunchTemplateOptions,
  podEniLaunchTemplateData,
} from './launch-template.js';
export { hookNames } from './lifecycle-events.js';
export { CLUSTER_DIMENSION, METRIC_NAMES, METRIC_NAMESPACE } from './metrics.js';
export { VpcLeaseNodeImage, type VpcLeaseNodeImageProps } from './node-image.js';
export { NODE_TABLE_ACTIONS } from './node-policy.js';
export { AllocatorPropsError, type VpcLeaseAllocatorProps } from './props.js';
export { VpcLeaseStack, type VpcLeaseStackProps } from './stack.js';
