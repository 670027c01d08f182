import { resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { loadInstanceTypes } from '../../shared/data/catalog.js';
import { IP_FAMILY_SETTINGS, type IpFamilySetting } from '../../shared/domain/node.js';
import { ValidationError } from '../../shared/errors.js';

/** `npm start -- [options]`: the size and shape of the local scenario. Defaults finish in about a minute. */
export interface ScenarioOptions {
  readonly nodes: number;
  readonly pods: number;
  readonly instanceType: string;
  readonly prefixDelegation: boolean;
  /** The control plane's ipFamily; ipv6 and dual pods claim on the lease store (the local datapath is IPv4). */
  readonly ipFamily: IpFamilySetting;
  /** A CIDR inside 10.0.0.0/16 for a dedicated pod subnet (tagged, chosen by tags); default: the boot subnet. */
  readonly podSubnet?: string;
  /** Pod ADDs/DELs in flight at once (a kubelet starts pods in parallel). */
  readonly parallel: number;
  /** Rounds of pod churn (delete half, start more). */
  readonly churnRounds: number;
  /** Real ms per simulated ms for the whole local cloud. */
  readonly timeScale: number;
  /** Skip the CNI datapath even as root. */
  readonly controlPlaneOnly: boolean;
  /** Leave the local cloud running after the report, for the CLI (`vpc-lease --local …`). */
  readonly keep: boolean;
  readonly json: boolean;
  /** Project-local folder for DynamoDB data, CNI build, node data and the state file. */
  readonly localDir: string;
  /** Fraction of SQS deliveries duplicated (at-least-once delivery, invariant 5). */
  readonly duplicateRate: number;
  /** Nodes from RunInstances with the cluster tag and no Auto Scaling group (no lifecycle hook). */
  readonly hookless: boolean;
}

export const USAGE = `usage: npm start -- [options]

  --nodes N               nodes the Auto Scaling group scales out to (default 3)
  --pods N                pods started across the nodes (default 24)
  --instance-type TYPE    node instance type (default m5.large)
  --prefix-delegation     lease addresses from /28 prefixes instead of secondary addresses
  --ip-family FAMILY      ipv4 (default), ipv6 (one /80 per pod ENI) or dual; ipv6/dual pods claim on the store
  --pod-subnet CIDR       put pod ENIs in a dedicated subnet (e.g. 10.0.64.0/20), picked by tag
  --hookless              launch nodes with RunInstances and the cluster tag, no Auto Scaling group or hook
  --churn N               rounds of pod churn (default 2)
  --parallel N            CNI calls in flight at once (default 2)
  --time-scale X          real ms per simulated ms of the local cloud (default 0.05: 20x AWS's pace)
  --control-plane-only    no CNI datapath, even as root (pods are claimed on the lease store)
  --keep                  leave the local cloud running after the report, for \`vpc-lease --local\`
  --json                  print the report as one JSON object on stdout (progress stays on stderr)
  --local-dir DIR         where data, builds and the state file go (default .local)
  -h, --help              this text`;

function int(name: string, raw: string | undefined, fallback: number, min: number, max: number): number {
  if (raw === undefined) return fallback;
  const n = Number(raw);
  if (!Number.isInteger(n) || n < min || n > max)
    throw new ValidationError(`--${name}: expected an integer from ${min} to ${max}, got ${JSON.stringify(raw)}`);
  return n;
}

/** @throws ValidationError with a message naming the bad option. */
export function parseScenarioArgs(argv: readonly string[], projectRoot: string): ScenarioOptions | 'help' {
  let parsed: ReturnType<typeof parse>;
  try {
    parsed = parse(argv);
  } catch (err) {
    throw new ValidationError((err as Error).message);
  }
  const v = parsed.values;
  if (v.help) return 'help';
  const instanceType = v['instance-type'] ?? 'm5.large';
  if (!loadInstanceTypes().has(instanceType))
    throw new ValidationError(`--instance-type: unknown instance type ${JSON.stringify(instanceType)}`);
  const podSubnet = v['pod-subnet'];
  if (podSubnet !== undefined) {
    const m = /^10\.0\.(\d{1,3})\.(\d{1,3})\/(\d{1,2})$/.exec(podSubnet);
    const bits = Number(m?.[3]);
    if (!m || Number(m[1]) < 48 || Number(m[1]) > 255 || bits < 20 || bits > 28)
      throw new ValidationError(
        `--pod-subnet: expected a /20../28 CIDR in 10.0.48.0–10.0.255.255 (the VPC is 10.0.0.0/16; its node subnets are the /20s from 10.0.0.0 to 10.0.32.0), got ${JSON.stringify(podSubnet)}`,
      );
  }
  const ipFamily = v['ip-family'] ?? 'ipv4';
  if (!(IP_FAMILY_SETTINGS as readonly string[]).includes(ipFamily))
    throw new ValidationError(
      `--ip-family: expected one of ${IP_FAMILY_SETTINGS.join(', ')}, got ${JSON.stringify(ipFamily)}`,
    );
  const timeScale = v['time-scale'] === undefined ? 0.05 : Number(v['time-scale']);
  if (!(timeScale > 0 && timeScale <= 1))
    throw new ValidationError(`--time-scale: expected a number in (0, 1], got ${JSON.stringify(v['time-scale'])}`);
  return {
    nodes: int('nodes', v.nodes, 3, 1, 20),
    pods: int('pods', v.pods, 24, 0, 1000),
    instanceType,
    prefixDelegation: v['prefix-delegation'] ?? false,
    ipFamily: ipFamily as IpFamilySetting,
    ...(podSubnet ? { podSubnet } : {}),
    churnRounds: int('churn', v.churn, 2, 0, 20),
    parallel: int('parallel', v.parallel, 2, 1, 64),
    timeScale,
    controlPlaneOnly: v['control-plane-only'] ?? false,
    keep: v.keep ?? false,
    json: v.json ?? false,
    localDir: resolve(projectRoot, v['local-dir'] ?? '.local'),
    duplicateRate: 0.1,
    hookless: v.hookless ?? false,
  };
}

function parse(argv: readonly string[]) {
  return parseArgs({
    args: [...argv],
    strict: true,
    allowPositionals: false,
    options: {
      nodes: { type: 'string' },
      pods: { type: 'string' },
      'instance-type': { type: 'string' },
      'prefix-delegation': { type: 'boolean' },
      'ip-family': { type: 'string' },
      'pod-subnet': { type: 'string' },
      hookless: { type: 'boolean' },
      churn: { type: 'string' },
      parallel: { type: 'string' },
      'time-scale': { type: 'string' },
      'control-plane-only': { type: 'boolean' },
      keep: { type: 'boolean' },
      json: { type: 'boolean' },
      'local-dir': { type: 'string' },
      help: { type: 'boolean', short: 'h' },
    },
  });
}
