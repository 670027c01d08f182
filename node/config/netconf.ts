import { controlPlaneSchema } from '../../shared/config/control-plane.js';
import { type ConfigOf, validate } from '../../shared/config/schema.js';
import { errorMessage, ValidationError } from '../../shared/errors.js';
import { parseCidr } from '../../shared/ipv4.js';
import { formatIpv6Cidr, parseIpv6Cidr } from '../../shared/ipv6.js';
import { CniCode, CniError } from '../cni/errors.js';
import { storeEndpointProblem } from './overrides.js';

/**
 * The plugin's own netconf fields (beside the CNI's well-known ones). Units are in the names; every field has a
 * default so the shortest valid conflist entry is `{"type": "vpc-lease-cni"}`.
 */
export const netconfSchema = {
  mode: {
    kind: 'enum',
    default: 'l2',
    values: ['l2', 'l3', 'l3s'],
    doc: 'ipvlan mode of the pod links; l3/l3s route through one table per ENI and one rule per pod.',
  },
  ipFamily: {
    ...controlPlaneSchema.ipFamily,
    doc: 'What a pod gets: an IPv4 lease, an IPv6 lease, or one of each on the same ENI (dual); as the control plane’s ipFamily.',
  },
  hostVeth: {
    kind: 'bool',
    default: true,
    doc: 'An unnumbered veth to the host (ipvlan cannot reach its master): host and service traffic, NodePort replies.',
  },
  serviceCidrs: {
    kind: 'stringList',
    default: [],
    itemPattern: /^(\d{1,3}(\.\d{1,3}){3}\/\d{1,2}|[0-9a-f:]*:[0-9a-f:]*\/\d{1,3})$/,
    itemHint: 'an IPv4 or IPv6 CIDR',
    doc: 'Routed from the pod through the host veth (the cluster’s service ranges), each to the pods of its family.',
  },
  routeTableBase: {
    kind: 'int',
    default: 1_000,
    min: 256,
    max: 2_000_000_000,
    doc: 'L3/L3S: the ENI with device index N routes through table routeTableBase + N.',
  },
  mtu: { kind: 'int', default: 0, min: 0, max: 9216, doc: 'Pod link MTU; 0 takes the MTU of the ENI.' },
  tableName: controlPlaneSchema.tableName,
  region: {
    kind: 'optionalString',
    pattern: /^[a-z]{2}(-[a-z]+)+-\d$/,
    patternHint: 'an AWS region',
    doc: 'Region of the table; default: the instance’s.',
  },
  dynamoEndpoint: {
    kind: 'optionalString',
    pattern: /^https?:\/\/[^\s/]+(\/.*)?$/,
    patternHint: 'an http(s) URL',
    doc: 'DynamoDB endpoint override (a FIPS or VPC endpoint, local runs): https, or http to loopback only; default: AWS_ENDPOINT_URL_DYNAMODB or the regional one.',
  },
  imdsEndpoint: {
    kind: 'optionalString',
    pattern: /^https?:\/\/[^\s/]+\/?$/,
    patternHint: 'an http(s) URL without a path',
    doc: 'IMDS endpoint override, honoured only in test mode (VPC_LEASE_TEST_MODE=1) unless it names the instance’s own IMDS; default: http://169.254.169.254.',
  },
  reuseWaitMs: {
    kind: 'int',
    default: 30_000,
    min: 0,
    max: 3_600_000,
    doc: 'Cooldown before a released address may be claimed again (conntrack and ARP caches drain).',
  },
  gcGraceMs: {
    kind: 'int',
    default: 60_000,
    min: 0,
    max: 86_400_000,
    doc: 'GC never releases a lease claimed more recently than this: an ADD in flight is not yet in the runtime’s list.',
  },
  gcUnnamedLeases: {
    kind: 'bool',
    default: false,
    doc: 'GC may also release leases claimed before holders recorded their network (no hnw): set it only where one vpc-lease network runs on the node.',
  },
  attachmentLockWaitMs: {
    kind: 'int',
    default: 10_000,
    min: 0,
    max: 600_000,
    doc: 'How long an ADD or DEL waits for another call of the same attachment to finish before failing with code 11.',
  },
  statusStoreGraceMs: {
    kind: 'int',
    default: 120_000,
    min: 0,
    max: 3_600_000,
    doc: 'Ignored: STATUS never fails for the store once the node was READY in this boot. Accepted so configurations that set it still load.',
  },
  dataDir: {
    kind: 'string',
    default: '/var/lib/cni/vpc-lease',
    pattern: /^\//,
    patternHint: 'an absolute path',
    doc: 'Journal of attachments and the identity cache.',
  },
  logFile: {
    kind: 'string',
    default: '/var/log/vpc-lease/cni.log',
    pattern: /^\//,
    patternHint: 'an absolute path',
    doc: 'JSON-lines log (stdout carries only the result).',
  },
  logLevel: { kind: 'enum', default: 'info', values: ['debug', 'info', 'warn', 'error'], doc: 'Log threshold.' },
  logMaxBytes: {
    kind: 'int',
    default: 10 * 2 ** 20,
    min: 4096,
    max: 2 ** 30,
    doc: 'The log is rotated to `<logFile>.1` once it reaches this size.',
  },
  logKeepFiles: { kind: 'int', default: 3, min: 0, max: 20, doc: 'Rotated logs kept (`.1` newest); 0 keeps none.' },
  storeTimeoutMs: { kind: 'int', default: 3_000, min: 100, max: 60_000, doc: 'Per DynamoDB request.' },
  imdsTimeoutMs: { kind: 'int', default: 1_000, min: 100, max: 30_000, doc: 'Per IMDS request.' },
  prefixDelegation: {
    ...controlPlaneSchema.prefixDelegation,
    doc: 'The control plane’s prefixDelegation, so `vpc-lease-cni max-pods` prints the figure the pool works to.',
  },
  maxPodsCap: {
    ...controlPlaneSchema.maxPods,
    doc: 'The control plane’s maxPods cap, so `vpc-lease-cni max-pods` prints the figure the pool works to.',
  },
  identityCacheTtlS: {
    kind: 'int',
    default: 300,
    min: 0,
    max: 86_400,
    doc: 'How long the instance identity read from IMDS is reused from disk.',
  },
} as const;

export type PluginConfig = ConfigOf<typeof netconfSchema> & {
  /** The CNI network name. */
  readonly name: string;
};

/** Fields the CNI spec or runtimes put in every netconf; ours must not reject them. */
const WELL_KNOWN = new Set([
  'cniVersion',
  'name',
  'type',
  'args',
  'ipMasq',
  'ipam',
  'dns',
  'prevResult',
  'runtimeConfig',
  'capabilities',
  'disableCheck',
  'disableGC',
]);

const NETWORK_NAME = /^[A-Za-z0-9][A-Za-z0-9_.-]*$/;

/** Service CIDRs must be network addresses (the kernel refuses a route with host bits) and need the veth. */
function serviceCidrProblems(cidrs: unknown, hostVeth: unknown): string[] {
  if (!Array.isArray(cidrs)) return [];
  const problems: string[] = [];
  for (const cidr of cidrs) {
    if (typeof cidr !== 'string') continue; // reported above
    try {
      if (/^\d{1,3}(\.\d{1,3}){3}\/\d{1,2}$/.test(cidr)) parseCidr(cidr);
      else if (cidr.includes(':')) {
        // The kernel prints routes in RFC 5952 form, which CHECK compares against: another spelling never matches.
        const canonical = formatIpv6Cidr(parseIpv6Cidr(cidr));
        if (canonical !== cidr) problems.push(`serviceCidrs: write ${cidr} as ${canonical}`);
      }
    } catch (err) {
      problems.push(`serviceCidrs: ${errorMessage(err)}`);
    }
  }
  if (cidrs.length > 0 && hostVeth === false) problems.push('serviceCidrs: need hostVeth (they are routed through it)');
  return problems;
}

/**
 * Validates a netconf. Unknown fields are refused with code 2 (the spec lets a plugin refuse them, and a typo
 * like `mtU` silently ignored is worse); bad values of known fields with code 7, every problem at once.
 */
export function parseNetconf(netconf: Readonly<Record<string, unknown>>): PluginConfig {
  const unknown = Object.keys(netconf).filter(
    (k) => !WELL_KNOWN.has(k) && !k.startsWith('cni.dev/') && !(k in netconfSchema),
  );
  if (unknown.length > 0)
    throw new CniError(
      CniCode.unsupportedField,
      `unsupported field${unknown.length > 1 ? 's' : ''} in the network configuration: ${unknown.join(', ')}`,
    );
  const problems: string[] = [];
  const name = netconf['name'];
  if (typeof name !== 'string' || !NETWORK_NAME.test(name)) problems.push('name: must be a valid network name');
  let config: ConfigOf<typeof netconfSchema> | undefined;
  try {
    config = validate(netconfSchema, netconf, { subject: 'network configuration' });
  } catch (err) {
    if (!(err instanceof ValidationError)) throw err;
    problems.push(...err.problems);
  }
  // Cross-field and gap checks read the raw input, so they are reported even when another field is bad.
  const mtu = netconf['mtu'];
  if (typeof mtu === 'number' && mtu > 0 && mtu < 68) problems.push(`mtu: must be 0 or at least 68, got ${mtu}`);
  problems.push(...serviceCidrProblems(netconf['serviceCidrs'], netconf['hostVeth']));
  const dynamoEndpoint = netconf['dynamoEndpoint'];
  const endpointProblem = typeof dynamoEndpoint === 'string' ? storeEndpointProblem(dynamoEndpoint) : undefined;
  if (endpointProblem) problems.push(`dynamoEndpoint: ${endpointProblem}`);
  // Refused rather than ignored: pod traffic leaves through the pod's own ENI with its VPC address, never
  // through the host's netfilter in L2/L3, so a masquerade rule would silently do nothing there.
  if (netconf['ipMasq'] === true)
    problems.push('ipMasq: not supported (pods leave through their own ENI; use a NAT gateway for the internet)');
  if (problems.length > 0 || !config)
    throw new CniError(CniCode.invalidConfig, 'invalid network configuration', problems.join('; '));
  return { ...config, name: name as string };
}
