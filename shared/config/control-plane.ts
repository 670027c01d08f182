import { ValidationError } from '../errors.js';
import { type ConfigOf, validate } from './schema.js';

const SUBNET_ID = /^subnet-[0-9a-f]{8}([0-9a-f]{9})?$/;
const SG_ID = /^sg-[0-9a-f]{8}([0-9a-f]{9})?$/;

/**
 * The control plane's configuration (Lambdas read it from their environment; the CDK construct writes it).
 * Units are in the names; every field has a default.
 */
export const controlPlaneSchema = {
  clusterName: {
    kind: 'string',
    default: 'vpc-lease',
    pattern: /^[A-Za-z0-9][A-Za-z0-9_.-]{0,99}$/,
    patternHint: 'a cluster name (letters, digits, _ . -, at most 100)',
    doc: 'Tags every ENI; scopes the Lambdas’ EC2 rights.',
  },
  tableName: {
    kind: 'string',
    default: 'vpc-lease',
    pattern: /^[A-Za-z0-9_.-]{3,255}$/,
    patternHint: 'a DynamoDB table name',
    doc: 'The lease table.',
  },
  prefixDelegation: { kind: 'bool', default: false, doc: 'Assign /28 prefixes instead of single addresses.' },
  ipFamily: {
    kind: 'enum',
    default: 'ipv4',
    values: ['ipv4', 'ipv6', 'dual'],
    doc: 'Pod addresses: ipv4; ipv6 (one /80 per pod ENI); dual (an IPv6 lease beside every IPv4 lease, same ENI).',
  },
  prefixFallbackToAddresses: {
    kind: 'bool',
    default: true,
    doc: 'With prefixDelegation, take single addresses where every candidate subnet refuses a /28 (fragmented).',
  },
  podSubnetIds: {
    kind: 'stringList',
    default: [],
    itemPattern: SUBNET_ID,
    itemHint: 'a subnet id',
    doc: 'Subnets for pod ENIs; empty means the boot ENI’s subnet.',
  },
  podSubnetTags: { kind: 'stringMap', default: {}, doc: 'Pick pod subnets by tags (all must match).' },
  securityGroupIds: {
    kind: 'stringList',
    default: [],
    itemPattern: SG_ID,
    itemHint: 'a security group id',
    doc: 'Security groups for pod ENIs; empty means the boot ENI’s.',
  },
  minLeases: { kind: 'int', default: 8, min: 0, max: 4096, doc: 'Leases a node has before its launch completes.' },
  warmLowLeases: { kind: 'int', default: 4, min: 0, max: 4096, doc: 'Top up when claimable leases fall below.' },
  warmHighLeases: { kind: 'int', default: 16, min: 1, max: 4096, doc: 'Release excess above this many claimable.' },
  maxPods: {
    kind: 'int',
    default: 110,
    min: 1,
    max: 4096,
    doc: 'Cap on each node’s max-pods figure, which kubelet is given and the pool never leases past.',
  },
  reuseWaitMs: {
    kind: 'int',
    default: 30_000,
    min: 0,
    max: 3_600_000,
    doc: 'Cooldown before a released address is reused.',
  },
  releaseDelayMs: {
    kind: 'int',
    default: 300_000,
    min: 0,
    max: 86_400_000,
    doc: 'A FREE lease this old may be released.',
  },
  clusterTagKey: {
    kind: 'optionalString',
    pattern: /^(?!aws:)[\p{L}\p{Z}\p{N}_.:/=+\-@]{1,128}$/u,
    patternHint: 'an EC2 tag key (at most 128 characters, not starting with aws:)',
    doc: 'Instances with this tag get ENIs without a lifecycle hook; default kubernetes.io/cluster/<clusterName>.',
  },
  heartbeatTimeoutS: { kind: 'int', default: 300, min: 30, max: 7200, doc: 'Lifecycle hook heartbeat timeout.' },
  eniMinAgeForGcMs: {
    kind: 'int',
    default: 600_000,
    min: 0,
    max: 86_400_000,
    doc: 'An unattached ENI younger than this is never collected.',
  },
  logLevel: { kind: 'enum', default: 'info', values: ['debug', 'info', 'warn', 'error'], doc: 'Log threshold.' },
} as const;

export type ControlPlaneConfig = ConfigOf<typeof controlPlaneSchema>;

export function parseControlPlaneConfig(input: unknown): ControlPlaneConfig {
  const config = validate(controlPlaneSchema, input, { subject: 'control-plane configuration', rejectUnknown: true });
  const problems: string[] = [];
  if (config.warmLowLeases > config.warmHighLeases)
    problems.push(`warmLowLeases: ${config.warmLowLeases} is above warmHighLeases ${config.warmHighLeases}`);
  if (config.minLeases > config.maxPods)
    problems.push(`minLeases: ${config.minLeases} is above maxPods ${config.maxPods}`);
  if (config.podSubnetIds.length > 0 && Object.keys(config.podSubnetTags).length > 0)
    problems.push('podSubnetIds: give pod subnets by ids or by tags, not both');
  if (problems.length > 0)
    throw new ValidationError(`invalid control-plane configuration: ${problems.join('; ')}`, problems);
  return config;
}

/**
 * Reads the configuration from `VPC_LEASE_*` environment variables (JSON for lists and maps), the form the
 * CDK construct writes into each Lambda.
 */
export function controlPlaneConfigFromEnv(env: NodeJS.ProcessEnv = process.env): ControlPlaneConfig {
  const input: Record<string, unknown> = {};
  const problems: string[] = [];
  for (const [name, spec] of Object.entries(controlPlaneSchema)) {
    const key = `VPC_LEASE_${name.replace(/[A-Z]/g, (c) => `_${c}`).toUpperCase()}`;
    const raw = env[key];
    if (raw === undefined || raw === '') continue;
    if (spec.kind === 'int') input[name] = /^-?\d+$/.test(raw) ? Number(raw) : raw;
    else if (spec.kind === 'bool') input[name] = raw === 'true' ? true : raw === 'false' ? false : raw;
    else if (spec.kind === 'stringList' || spec.kind === 'stringMap') {
      try {
        input[name] = JSON.parse(raw);
      } catch {
        problems.push(`${name}: ${key} is not JSON`);
      }
    } else input[name] = raw;
  }
  if (problems.length > 0)
    throw new ValidationError(`invalid control-plane configuration: ${problems.join('; ')}`, problems);
  return parseControlPlaneConfig(input);
}

/** The inverse of controlPlaneConfigFromEnv, for the CDK construct and the local cloud. */
export function controlPlaneConfigToEnv(config: Partial<ControlPlaneConfig>): Record<string, string> {
  const env: Record<string, string> = {};
  for (const [name, value] of Object.entries(config)) {
    if (value === undefined) continue;
    const key = `VPC_LEASE_${name.replace(/[A-Z]/g, (c) => `_${c}`).toUpperCase()}`;
    env[key] = typeof value === 'string' ? value : JSON.stringify(value);
  }
  return env;
}
