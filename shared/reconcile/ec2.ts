import type { Ec2Port } from '../ec2/port.js';
import type { Metrics } from '../metrics.js';

/**
 * The part of the EC2 port the reconciler uses: tag-filtered DescribeNetworkInterfaces, DeleteNetworkInterface,
 * the two-pass mark's CreateTags/DeleteTags and bulk instance states. All of them live on the shared port
 * (shared/ec2/port.ts) and its SDK adapter, so call counting, error classification and the mutating-call
 * cap apply to them as to every other EC2 call.
 */
export type ReconcileEc2 = Pick<
  Ec2Port,
  'describeNetworkInterfaces' | 'deleteNetworkInterface' | 'createTags' | 'deleteTags' | 'describeInstanceStates'
>;

/**
 * @deprecated Pass the EC2 port (e.g. `SdkEc2`) itself; this delegating wrapper only keeps older callers
 * compiling. `metrics` is ignored: the port's adapter counts its own calls.
 */
export class SdkReconcileEc2 implements ReconcileEc2 {
  constructor(
    private readonly ec2: ReconcileEc2,
    _metrics?: Metrics,
  ) {}

  describeNetworkInterfaces: ReconcileEc2['describeNetworkInterfaces'] = (query) =>
    this.ec2.describeNetworkInterfaces(query);
  deleteNetworkInterface: ReconcileEc2['deleteNetworkInterface'] = (eniId) => this.ec2.deleteNetworkInterface(eniId);
  createTags: ReconcileEc2['createTags'] = (ids, tags) => this.ec2.createTags(ids, tags);
  deleteTags: ReconcileEc2['deleteTags'] = (ids, keys) => this.ec2.deleteTags(ids, keys);
  describeInstanceStates: ReconcileEc2['describeInstanceStates'] = (ids) => this.ec2.describeInstanceStates(ids);
}
