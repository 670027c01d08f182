import { Duration, RemovalPolicy, Token } from 'aws-cdk-lib';
import type * as autoscaling from 'aws-cdk-lib/aws-autoscaling';
import type * as cloudwatch from 'aws-cdk-lib/aws-cloudwatch';
import type * as ec2 from 'aws-cdk-lib/aws-ec2';
import type * as iam from 'aws-cdk-lib/aws-iam';
import * as logs from 'aws-cdk-lib/aws-logs';
import { parseImageReference } from '../../packaging/image/reference.js';
import { type ControlPlaneConfig, parseControlPlaneConfig } from '../../shared/config/control-plane.js';
import { type Ec2Buckets, lifecycleConcurrencyFor, validateEc2Buckets } from '../../shared/ec2/account-buckets.js';
import { errorMessage, ValidationError } from '../../shared/errors.js';

/** Everything a cluster chooses; every prop is optional except the VPC. */
export interface VpcLeaseAllocatorProps {
  /**
   * The VPC of the nodes. Scopes the node policy (`aws:SourceVpc`, so nodes must reach DynamoDB through a
   * gateway endpoint in it) and the Lambdas' rights on subnets and security groups (`ec2:Vpc`).
   */
  readonly vpc: ec2.IVpc | string;
  /**
   * Tags every ENI and scopes the Lambdas' EC2 rights; also names the lifecycle hooks.
   * @default 'vpc-lease'
   */
  readonly clusterName?: string;
  /**
   * Auto Scaling groups (objects or names) that get a launch and a terminate lifecycle hook. Instances of other
   * groups get no ENIs; an EC2 `terminated` event still cleans up after any instance the table knows.
   * @default [] (no hooks: a warning is added to the construct)
   */
  readonly autoScalingGroups?: readonly (autoscaling.IAutoScalingGroup | string)[];
  /**
   * Subnets for pod ENIs, by object or id. Give either these or `podSubnetTags`.
   * @default the subnet of the instance's boot ENI
   */
  readonly podSubnets?: readonly (ec2.ISubnet | string)[];
  /**
   * Pick pod subnets by tags (all must match), restricted to the instance's AZ.
   * @default the subnet of the instance's boot ENI
   */
  readonly podSubnetTags?: Readonly<Record<string, string>>;
  /**
   * Security groups for pod ENIs, by object or id.
   * @default the security groups of the instance's boot ENI
   */
  readonly securityGroups?: readonly (ec2.ISecurityGroup | string)[];
  /** Assign /28 prefixes instead of single addresses. @default false */
  readonly prefixDelegation?: boolean;
  /**
   * Pod address family: `ipv4`; `ipv6` (each pod ENI gets one /80, pods get addresses from it: the subnets need
   * an IPv6 /64 and the instance type Nitro); `dual` (every pod gets one IPv4 and one IPv6 address on the same
   * ENI). The node's netconf must say the same (`ipFamily` in the DaemonSet ConfigMap's config.json). @default 'ipv4'
   */
  readonly ipFamily?: 'ipv4' | 'ipv6' | 'dual';
  /**
   * With prefix delegation, take single addresses for a pod ENI when every candidate subnet refuses a /28
   * (`InsufficientCidrBlocks`: fragmented, addresses left). Off, such a launch is abandoned. @default true
   */
  readonly prefixFallbackToAddresses?: boolean;
  /** Leases a node has before its launch hook completes. @default 8 */
  readonly minLeases?: number;
  /** Top up when a node's claimable leases fall below this. @default 4 */
  readonly warmLowLeases?: number;
  /** Release excess above this many claimable leases. @default 16 */
  readonly warmHighLeases?: number;
  /**
   * Cap on each node's max-pods figure (`vpc-lease max-pods <type>`), which kubelet must be given and the pool
   * never leases past. @default 110
   */
  readonly maxPods?: number;
  /** Cooldown before a released address is reused. @default Duration.seconds(30) */
  readonly reuseWait?: Duration;
  /** A FREE lease this old may be released as excess. @default Duration.minutes(5) */
  readonly releaseDelay?: Duration;
  /** Lifecycle hook heartbeat timeout (30 s to 2 h). @default Duration.minutes(5) */
  readonly heartbeatTimeout?: Duration;
  /** An unattached ENI younger than this is never collected by the reconciler. @default Duration.minutes(10) */
  readonly eniMinAgeForGc?: Duration;
  /**
   * Most concurrent instance-lifecycle invocations (the SQS event source's MaximumConcurrency, 2 to 1000): how
   * many launch events are in hand at once. The EC2 call rate is the shared rate budget's to keep, not this
   * cap's; too low a cap leaves launch events unpicked past the hooks' heartbeat timeout in a mass scale-out
   * and, with raised EC2 buckets, launches late for their turns (docs/PERFORMANCE.md). Mind the account's
   * Lambda concurrency quota.
   * @default 4 × the Attach bucket's refill per second, at least 20 (20 at AWS's published buckets, 40 at a doubled Attach)
   */
  readonly maxConcurrency?: number;
  /**
   * The account's EC2 request token buckets where AWS raised them (bucket size and refill per second, by
   * action), so the shared rate budget spends what the account has; every other action keeps AWS's published
   * figure. `{ AttachNetworkInterface: { bucket: 100, refillPerSecond: 10 } }`. @default AWS's published values
   */
  readonly ec2Buckets?: Readonly<Record<string, { readonly bucket: number; readonly refillPerSecond: number }>>;
  /** What happens to the lease table when the stack is deleted. @default RemovalPolicy.RETAIN */
  readonly removalPolicy?: RemovalPolicy;
  /** @default a name CloudFormation generates */
  readonly tableName?: string;
  /** @default logs.RetentionDays.ONE_MONTH */
  readonly logRetention?: logs.RetentionDays;
  /** @default 'info' */
  readonly logLevel?: 'debug' | 'info' | 'warn' | 'error';
  /** How often the pool-manager sweeps every node (the stream covers claims in between). @default 1 minute */
  readonly poolInterval?: Duration;
  /** How often the reconciler runs (leaked ENIs go after two runs). @default 5 minutes */
  readonly reconcileInterval?: Duration;
  /**
   * Also provision instances launched without a lifecycle hook (Karpenter, EC2 Fleet, plain RunInstances, managed
   * node groups without our hook): EC2's `pending`/`running` state changes go into the lifecycle queue, and an
   * instance carrying the `clusterTagKey` tag gets its ENIs and leases; the node's CNI STATUS keeps it NotReady
   * until then. The Lambdas may then attach ENIs to any instance with that tag.
   * @default false
   */
  readonly hooklessLaunches?: boolean;
  /**
   * The instance tag (any value) that marks an instance launched without a hook as a node of this cluster.
   * @default `kubernetes.io/cluster/<clusterName>` (EKS and Karpenter set it to `owned`)
   */
  readonly clusterTagKey?: string;
  /** Instance roles of the cluster's nodes; the node policy is attached to each. @default none */
  readonly nodeRoles?: readonly iam.IRole[];
  /** Actions for every alarm (an SNS topic, say). @default none */
  readonly alarmActions?: readonly cloudwatch.IAlarmAction[];
  /**
   * The node installer image as `npm run -s push-image` printed it (`registry/repository@sha256:…`, or `:tag`).
   * Nothing is published at deploy (no Docker anywhere): it becomes the stack output NodeImageUri, which
   * `npm run -s daemonset -- <uri>` renders into the DaemonSet. @default none
   */
  readonly nodeImageUri?: string;
}

/** The props after validation, in the shapes the builders take. */
export interface ResolvedAllocatorProps {
  /** Validated with the Lambdas' own parser; `tableName`, subnet and group ids may be placeholders here. */
  readonly config: ControlPlaneConfig;
  readonly vpcId: string;
  /** May contain tokens (ids of subnets and groups defined in the same app). */
  readonly podSubnetIds: readonly string[];
  readonly securityGroupIds: readonly string[];
  readonly autoScalingGroups: readonly (autoscaling.IAutoScalingGroup | string)[];
  readonly hooklessLaunches: boolean;
  readonly maxConcurrency: number;
  /** The account's raised EC2 buckets (empty: AWS's published figures). */
  readonly ec2Buckets: Ec2Buckets;
  readonly removalPolicy: RemovalPolicy;
  readonly tableName: string | undefined;
  readonly logRetention: logs.RetentionDays;
  readonly poolInterval: Duration;
  readonly reconcileInterval: Duration;
}

/** Bad props: the message names every problem, prefixed by the construct. */
export class AllocatorPropsError extends ValidationError {}

// Stand-ins that pass the shared parser's patterns where the real value is only known at deploy time.
const PLACEHOLDER_SUBNET = 'subnet-00000000';
const PLACEHOLDER_SG = 'sg-00000000';
const PLACEHOLDER_TABLE = 'vpc-lease';

export function resolveAllocatorProps(props: VpcLeaseAllocatorProps): ResolvedAllocatorProps {
  const problems: string[] = [];
  const podSubnetIds = idsOf('podSubnets', props.podSubnets, (s) => s.subnetId, problems);
  const securityGroupIds = idsOf('securityGroups', props.securityGroups, (g) => g.securityGroupId, problems);
  const vpcId = typeof props.vpc === 'string' ? props.vpc : props.vpc.vpcId;
  if (!Token.isUnresolved(vpcId) && !/^vpc-[0-9a-f]{8}([0-9a-f]{9})?$/.test(vpcId))
    problems.push(`vpc: ${JSON.stringify(vpcId)} is not a VPC id`);
  if (props.clusterName !== undefined && Token.isUnresolved(props.clusterName))
    problems.push('clusterName: must be a literal (it names hooks and scopes IAM conditions)');
  if (props.clusterTagKey !== undefined && Token.isUnresolved(props.clusterTagKey))
    problems.push('clusterTagKey: must be a literal (it names an IAM condition key)');
  if (props.clusterTagKey !== undefined && props.hooklessLaunches !== true)
    problems.push('clusterTagKey: only hooklessLaunches uses it; set hooklessLaunches: true or leave it out');
  if (props.nodeImageUri !== undefined && !Token.isUnresolved(props.nodeImageUri)) {
    try {
      parseImageReference(props.nodeImageUri);
    } catch (err) {
      problems.push(`nodeImageUri: ${errorMessage(err)}`);
    }
  }
  let ec2Buckets: Ec2Buckets = {};
  try {
    ec2Buckets = validateEc2Buckets(props.ec2Buckets ?? {}, 'ec2Buckets');
  } catch (err) {
    if (!(err instanceof ValidationError)) throw err;
    problems.push(...err.problems);
  }
  const maxConcurrency = props.maxConcurrency ?? lifecycleConcurrencyFor(ec2Buckets);
  // SQS event sources accept MaximumConcurrency 2..1000.
  if (!Number.isInteger(maxConcurrency) || maxConcurrency < 2 || maxConcurrency > 1000)
    problems.push(`maxConcurrency: must be an integer between 2 and 1000, got ${maxConcurrency}`);
  const groups = props.autoScalingGroups ?? [];
  const literalNames = groups.map((g) => (typeof g === 'string' ? g : g.autoScalingGroupName));
  const seen = new Set<string>();
  for (const name of literalNames) {
    if (Token.isUnresolved(name)) continue;
    if (name.length === 0) problems.push('autoScalingGroups: a name is empty');
    else if (seen.has(name)) problems.push(`autoScalingGroups: ${JSON.stringify(name)} is given twice`);
    seen.add(name);
  }
  const heartbeatTimeoutS = wholeSeconds('heartbeatTimeout', props.heartbeatTimeout, problems);
  const poolInterval = props.poolInterval ?? Duration.minutes(1);
  const reconcileInterval = props.reconcileInterval ?? Duration.minutes(5);
  // EventBridge schedules have a one-minute resolution.
  for (const [name, d] of [
    ['poolInterval', poolInterval],
    ['reconcileInterval', reconcileInterval],
  ] as const) {
    if (d.toSeconds() < 60 || d.toSeconds() % 60 !== 0) problems.push(`${name}: must be whole minutes, at least 1`);
  }
  const tableName = props.tableName;

  let config: ControlPlaneConfig | undefined;
  try {
    config = parseControlPlaneConfig(
      withoutUndefined({
        clusterName: props.clusterName,
        tableName: tableName === undefined || Token.isUnresolved(tableName) ? PLACEHOLDER_TABLE : tableName,
        prefixDelegation: props.prefixDelegation,
        ipFamily: props.ipFamily,
        prefixFallbackToAddresses: props.prefixFallbackToAddresses,
        podSubnetIds: podSubnetIds.map((id) => (Token.isUnresolved(id) ? PLACEHOLDER_SUBNET : id)),
        podSubnetTags: props.podSubnetTags,
        securityGroupIds: securityGroupIds.map((id) => (Token.isUnresolved(id) ? PLACEHOLDER_SG : id)),
        minLeases: props.minLeases,
        warmLowLeases: props.warmLowLeases,
        warmHighLeases: props.warmHighLeases,
        maxPods: props.maxPods,
        reuseWaitMs: props.reuseWait?.toMilliseconds(),
        releaseDelayMs: props.releaseDelay?.toMilliseconds(),
        heartbeatTimeoutS,
        eniMinAgeForGcMs: props.eniMinAgeForGc?.toMilliseconds(),
        logLevel: props.logLevel,
        clusterTagKey: props.clusterTagKey,
      }),
    );
  } catch (err) {
    if (!(err instanceof ValidationError)) throw err;
    problems.push(...err.problems);
  }
  if (problems.length > 0 || config === undefined)
    throw new AllocatorPropsError(`VpcLeaseAllocator: invalid props: ${problems.join('; ')}`, problems);
  return {
    config,
    vpcId,
    podSubnetIds,
    securityGroupIds,
    autoScalingGroups: groups,
    hooklessLaunches: props.hooklessLaunches ?? false,
    maxConcurrency,
    ec2Buckets,
    removalPolicy: props.removalPolicy ?? RemovalPolicy.RETAIN,
    tableName,
    logRetention: props.logRetention ?? logs.RetentionDays.ONE_MONTH,
    poolInterval,
    reconcileInterval,
  };
}

function idsOf<T>(
  name: string,
  items: readonly (T | string)[] | undefined,
  idOf: (item: T) => string,
  problems: string[],
): string[] {
  if (items === undefined) return [];
  // A list token (a CommaDelimitedList parameter, say) cannot be checked or written as JSON item by item.
  if (Token.isUnresolved(items)) {
    problems.push(`${name}: must be a list of ids or objects, not a list token`);
    return [];
  }
  return items.map((item) => (typeof item === 'string' ? item : idOf(item)));
}

function wholeSeconds(name: string, d: Duration | undefined, problems: string[]): number | undefined {
  if (d === undefined) return undefined;
  const ms = d.toMilliseconds();
  if (ms % 1000 !== 0) {
    problems.push(`${name}: must be whole seconds`);
    return undefined;
  }
  return ms / 1000;
}

function withoutUndefined(o: Record<string, unknown>): Record<string, unknown> {
  return Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined));
}
