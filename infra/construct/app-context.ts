import { Duration, RemovalPolicy } from 'aws-cdk-lib';
import { ValidationError } from '../../shared/errors.js';
import type { VpcLeaseAllocatorProps } from './props.js';

/** What `infra/app.ts` reads from CDK context (`-c key=value`, cdk.json or cdk.context.json). */
export interface AppSettings {
  readonly stackName: string;
  /** Also synthesise the trial stack (VPC + Auto Scaling group + allocator). */
  readonly example: boolean;
  /** Names of existing instance roles the node policy is attached to. */
  readonly nodeRoleNames: readonly string[];
  readonly allocator: Omit<VpcLeaseAllocatorProps, 'vpc' | 'nodeRoles'> & { readonly vpc?: string };
}

/** Every context key the app understands (docs/DEPLOY.md lists them with their meaning). */
export const CONTEXT_KEYS = [
  'stackName',
  'example',
  'nodeRoleNames',
  'clusterName',
  'vpcId',
  'autoScalingGroups',
  'hooklessLaunches',
  'clusterTagKey',
  'podSubnetIds',
  'podSubnetTags',
  'securityGroupIds',
  'nodeImageUri',
  'prefixDelegation',
  'ipFamily',
  'prefixFallbackToAddresses',
  'minLeases',
  'warmLowLeases',
  'warmHighLeases',
  'maxPods',
  'reuseWaitS',
  'releaseDelayS',
  'heartbeatTimeoutS',
  'eniMinAgeForGcS',
  'maxConcurrency',
  'ec2Buckets',
  'removalPolicy',
  'tableName',
  'logLevel',
] as const;

type ContextKey = (typeof CONTEXT_KEYS)[number];

/**
 * Reads the app's settings from context. Values come as strings from `-c` and as JSON values from cdk.json, so
 * both are accepted; lists are comma-separated or arrays, tags `Key=Value,…` or an object. Every problem is
 * reported at once; the allocator then validates the values themselves.
 */
export function appSettingsFromContext(tryGet: (key: string) => unknown): AppSettings {
  const problems: string[] = [];
  const get = (key: ContextKey): unknown => {
    const v = tryGet(key);
    return v === '' ? undefined : v;
  };
  const str = (key: ContextKey): string | undefined => {
    const v = get(key);
    if (v === undefined || typeof v === 'string') return v;
    problems.push(`${key}: must be a string`);
    return undefined;
  };
  const list = (key: ContextKey): string[] | undefined => {
    const v = get(key);
    if (v === undefined) return undefined;
    if (typeof v === 'string')
      return v
        .split(',')
        .map((s) => s.trim())
        .filter((s) => s.length > 0);
    if (Array.isArray(v) && v.every((s) => typeof s === 'string')) return v;
    problems.push(`${key}: must be a comma-separated string or a list of strings`);
    return undefined;
  };
  const int = (key: ContextKey): number | undefined => {
    const v = get(key);
    if (v === undefined) return undefined;
    if (typeof v === 'number' && Number.isInteger(v)) return v;
    if (typeof v === 'string' && /^\d+$/.test(v)) return Number(v);
    problems.push(`${key}: must be a whole number, got ${JSON.stringify(v)}`);
    return undefined;
  };
  const bool = (key: ContextKey): boolean | undefined => {
    const v = get(key);
    if (v === undefined || typeof v === 'boolean') return v;
    if (v === 'true' || v === 'false') return v === 'true';
    problems.push(`${key}: must be true or false, got ${JSON.stringify(v)}`);
    return undefined;
  };
  const seconds = (key: ContextKey): Duration | undefined => {
    const n = int(key);
    return n === undefined ? undefined : Duration.seconds(n);
  };
  const tags = (key: ContextKey): Record<string, string> | undefined => {
    const v = get(key);
    if (v === undefined) return undefined;
    if (
      typeof v === 'object' &&
      v !== null &&
      !Array.isArray(v) &&
      Object.values(v).every((s) => typeof s === 'string')
    )
      return v as Record<string, string>;
    if (typeof v === 'string') {
      const out: Record<string, string> = {};
      for (const pair of v.split(',')) {
        const at = pair.indexOf('=');
        if (at <= 0) {
          problems.push(`${key}: ${JSON.stringify(pair)} is not Key=Value`);
          continue;
        }
        out[pair.slice(0, at).trim()] = pair.slice(at + 1).trim();
      }
      return out;
    }
    problems.push(`${key}: must be Key=Value,… or an object of strings`);
    return undefined;
  };
  // JSON from `-c ec2Buckets='{"AttachNetworkInterface":{"bucket":100,"refillPerSecond":10}}'`, an object from
  // cdk.json; the construct checks the figures themselves (validateEc2Buckets).
  const json = (key: ContextKey): unknown => {
    const v = get(key);
    if (typeof v !== 'string') return v;
    try {
      return JSON.parse(v) as unknown;
    } catch {
      problems.push(`${key}: must be JSON, got ${JSON.stringify(v)}`);
      return undefined;
    }
  };
  const oneOf = <T extends string>(key: ContextKey, values: readonly T[]): T | undefined => {
    const v = str(key);
    if (v === undefined || (values as readonly string[]).includes(v)) return v as T | undefined;
    problems.push(`${key}: must be one of ${values.join(', ')}, got ${JSON.stringify(v)}`);
    return undefined;
  };

  // The ipvlan mode is the node's (the DaemonSet's config.json `mode`); the control plane never had a use for it.
  if (tryGet('ipvlanMode') !== undefined)
    problems.push('ipvlanMode: not a stack setting; set "mode" in the DaemonSet ConfigMap\'s config.json');
  const removal = oneOf('removalPolicy', ['retain', 'destroy', 'snapshot'] as const);
  const settings: AppSettings = {
    stackName: str('stackName') ?? 'VpcLease',
    example: bool('example') ?? false,
    nodeRoleNames: list('nodeRoleNames') ?? [],
    allocator: {
      clusterName: str('clusterName'),
      vpc: str('vpcId'),
      autoScalingGroups: list('autoScalingGroups'),
      hooklessLaunches: bool('hooklessLaunches'),
      clusterTagKey: str('clusterTagKey'),
      podSubnets: list('podSubnetIds'),
      podSubnetTags: tags('podSubnetTags'),
      securityGroups: list('securityGroupIds'),
      nodeImageUri: str('nodeImageUri'),
      prefixDelegation: bool('prefixDelegation'),
      // The value is checked with the rest of the configuration (an enum), so a typo is a clear error.
      ipFamily: str('ipFamily') as VpcLeaseAllocatorProps['ipFamily'],
      prefixFallbackToAddresses: bool('prefixFallbackToAddresses'),
      minLeases: int('minLeases'),
      warmLowLeases: int('warmLowLeases'),
      warmHighLeases: int('warmHighLeases'),
      maxPods: int('maxPods'),
      reuseWait: seconds('reuseWaitS'),
      releaseDelay: seconds('releaseDelayS'),
      heartbeatTimeout: seconds('heartbeatTimeoutS'),
      eniMinAgeForGc: seconds('eniMinAgeForGcS'),
      maxConcurrency: int('maxConcurrency'),
      ec2Buckets: json('ec2Buckets') as VpcLeaseAllocatorProps['ec2Buckets'],
      removalPolicy:
        removal === undefined
          ? undefined
          : { retain: RemovalPolicy.RETAIN, destroy: RemovalPolicy.DESTROY, snapshot: RemovalPolicy.SNAPSHOT }[removal],
      tableName: str('tableName'),
      logLevel: oneOf('logLevel', ['debug', 'info', 'warn', 'error'] as const),
    },
  };
  if (problems.length > 0) throw new ValidationError(`invalid vpc-lease context: ${problems.join('; ')}`, problems);
  return settings;
}
