/**
 * The cluster on the fabric: per node a mount namespace of its own for the CNI directories (so the installer and
 * the plugin run with their shipped default paths), the real installer, the plugin called as a runtime calls it
 * (from inside the node's network namespace, reaching IMDS and DynamoDB over the fabric), kube-proxy's rules,
 * and the pods' workloads.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { IamEndpoint } from '../../../local-cloud/iam/endpoint.js';
import type { SynthesizedNodePolicy } from '../../../local-cloud/iam/node-policy.js';
import { instanceArn } from '../../../shared/domain/arn.js';
import type { NewLease } from '../../../shared/domain/lease.js';
import { LightDynamoClient } from '../../../shared/dynamo/light-client.js';
import type { AwsCredentials } from '../../../shared/dynamo/sigv4.js';
import { DynamoLeaseStore } from '../../../shared/lease-store/dynamo-lease-store.js';
import { type DynaliteHandle, startDynalite } from '../../support/dynalite.js';
import { callAsKubelet } from '../../support/kubelet-retry.js';
import type { PluginRun } from '../../support/plugin-process.js';
import { createTable } from '../../vm/guest/guest-node.js';
import type { PluginRetry } from '../results.js';
import { type Eni, type FabricNode, SUBNET_BOOT } from '../topology.js';
import { DYNAMO_PORT } from './agent.js';
import { countExecs, exec, ip } from './net.js';

export const ROOT = '/tmp/fabric';
/** The host paths each node sees at its own copy (the shipped defaults of the installer and the ConfigMap). */
const NODE_DIRS = ['opt/cni/bin', 'etc/cni/net.d', 'var/lib/cni', 'var/log/vpc-lease'];
/** Binds the node's directories over the defaults, then enters its network namespace. Arguments, never text. */
const NODE_SCRIPT =
  'r=$1; n=$2; shift 2; for d in ' +
  NODE_DIRS.join(' ') +
  '; do mkdir -p "/$d" && mount --bind "$r/$d" "/$d" || exit 126; done; exec ip netns exec "$n" "$@"';
const TABLE = 'vpc-lease';
/** Keys only the control plane (this harness) signs with: the endpoint passes them unevaluated. */
const CONTROL_PLANE = { accessKeyId: 'fabric-control-plane', secretAccessKey: 'fabric-control-plane' };
const FABRIC_VPC_ID = 'vpc-0fab41c0fab41c0fa';
const HARNESS_STORE_TIMEOUT_MS = 60_000;

/**
 * A command on a node, in a mount namespace of its own per call: nsenter into one kept per node would start 9
 * programs fewer, but it resets the root to the namespace's, which in the VM is the initramfs outside the chroot.
 */
export function nodeExec(
  node: string,
  argv: readonly string[],
  env: Record<string, string>,
  stdin = '',
): Promise<PluginRun> {
  const wrapper = ['unshare', '--mount', '--propagation', 'private', '--', 'sh', '-c', NODE_SCRIPT, 'sh'];
  // What the script starts after unshare (which exec() counts): sh, a mkdir and a mount per directory, ip, argv.
  for (const program of ['sh', ...NODE_DIRS.flatMap(() => ['mkdir', 'mount']), 'ip', argv[0]!]) countExecs([program]);
  return exec(undefined, [...wrapper, join(ROOT, node), node, ...argv], env, stdin);
}

/** The ConfigMap's config.json out of node/deploy/daemonset.yaml, as the DaemonSet hands it to the installer. */
export function shippedConfig(): string {
  const yaml = readFileSync('node/deploy/daemonset.yaml', 'utf8');
  const m = /config\.json: \|\n((?: {4}.*\n)+)/.exec(yaml);
  if (!m) throw new Error('no config.json in node/deploy/daemonset.yaml');
  return m[1]!.replace(/^ {4}/gm, '');
}

export class Cluster {
  private dynalite?: DynaliteHandle;
  private iam?: IamEndpoint;
  private api?: LightDynamoClient;
  private store?: DynamoLeaseStore;
  /** Per configuration (stopped by stopWorkloads) and for the whole run (stopped by close). */
  private readonly children: ChildProcess[] = [];
  private readonly lasting: ChildProcess[] = [];
  /** kube-proxy's jumps from the built-in chains are ensured once per node. */
  readonly jumpsApplied = new Set<string>();
  /** Every answer retried in this run (code 11, or a failed DEL), in order. */
  readonly retries: PluginRetry[] = [];
  /** The ipvlan mode and family (`l2 ipv4`) the installer last wrote on every node (undefined: none, or unsure). */
  installed: string | undefined;

  constructor(
    readonly nodes: readonly FabricNode[],
    readonly cni: string,
  ) {
    for (const n of nodes) for (const d of NODE_DIRS) mkdirSync(join(ROOT, n.name, d), { recursive: true });
  }

  /** `vpc-lease-cni install` with the ConfigMap's config (mode replaced) and the DaemonSet's other flags. */
  install(node: string, config: string, extraArgs: readonly string[] = []): Promise<PluginRun> {
    return nodeExec(
      node,
      [this.cni, 'install', '--no-wait-ready', '--cni-version', '1.0.0', '--chain', 'portmap', ...extraArgs],
      {
        VPC_LEASE_CNI_CONFIG: config,
      },
    );
  }

  conflist(node: string): Record<string, unknown> {
    return JSON.parse(readFileSync(join(ROOT, node, 'etc/cni/net.d/10-vpc-lease.conflist'), 'utf8')) as Record<
      string,
      unknown
    >;
  }

  /**
   * The lease table behind the IAM-enforcing endpoint, for the whole run: the nodes reach the endpoint over the
   * fabric and sign with the role session their IMDS hands out (`sessionFor`), so each plugin request is judged
   * by the node policy synthesized from the construct. Seeding and clearing go with control-plane keys.
   */
  async startStore(policy: SynthesizedNodePolicy): Promise<void> {
    this.dynalite = await startDynalite();
    await createTable(this.dynalite.endpoint, TABLE);
    this.iam = new IamEndpoint({
      target: this.dynalite.endpoint,
      region: 'us-east-1',
      accountId: '123456789012',
      policy,
      tableName: TABLE,
      controlPlaneKeys: [CONTROL_PLANE.accessKeyId],
    });
    await this.iam.start(DYNAMO_PORT, SUBNET_BOOT.gateway);
    // The harness's own seeding waits as long as it takes: dynalite shares this emulated guest's slow cores, and
    // the client's 2 s default failed whole configurations at a load of 40.
    this.api = new LightDynamoClient({
      endpoint: this.dynalite.endpoint,
      region: 'us-east-1',
      credentials: async () => CONTROL_PLANE,
      timeoutMs: HARNESS_STORE_TIMEOUT_MS,
    });
    this.store = new DynamoLeaseStore({ api: this.api, tableName: TABLE });
  }

  /** The instance's role session, stable for the run (the plugin caches it on disk). */
  sessionFor(instanceId: string): Required<AwsCredentials> {
    if (!this.iam) throw new Error('failed to issue a role session: the store is not started');
    return this.iam.issue(instanceId, FABRIC_VPC_ID, 'vpc-lease-node').credentials;
  }

  /** What the node policy decided on the nodes' requests so far. */
  iamDecisions(): { allowed: number; denied: readonly string[] } {
    const iam = this.iam;
    if (!iam) return { allowed: 0, denied: [] };
    return {
      allowed: iam.counts.allowed,
      denied: iam.denials.map((d) => `${d.principal} ${d.operation} ${d.action} ${d.resource}`),
    };
  }

  /** A fresh lease set for one configuration: every item removed, then the given addresses FREE on their ENIs. */
  async resetLeases(leases: readonly { eni: Eni; ip: string }[]): Promise<void> {
    const api = this.api!;
    let start: Record<string, unknown> | undefined;
    do {
      const page = await api.scan({ TableName: TABLE, ...(start ? { ExclusiveStartKey: start as never } : {}) });
      for (const item of page.Items ?? [])
        await api.deleteItem({ TableName: TABLE, Key: { pk: item['pk']!, sk: item['sk']! } });
      start = page.LastEvaluatedKey;
    } while (start);
    await this.addLeases(leases);
  }

  async addLeases(leases: readonly { eni: Eni; ip: string }[]): Promise<void> {
    const rows: NewLease[] = leases.map(({ eni, ip: address }) => {
      // An IPv6 lease names the subnet's /64, its router and the ENI's /80, as the control plane writes it.
      const v6 = address.includes(':');
      return {
        instanceArn: instanceArn(
          'us-east-1',
          '123456789012',
          this.nodes.find((n) => n.name === eni.node)!.instanceId,
          'aws',
        ),
        ip: address,
        eniId: eni.id,
        deviceIndex: eni.deviceIndex,
        mac: eni.mac,
        subnetId: eni.subnet.id,
        subnetCidr: v6 ? eni.subnet.cidr6 : eni.subnet.cidr,
        gateway: v6 ? eni.subnet.gateway6 : eni.subnet.gateway,
        ...(v6 && eni.prefix6 ? { prefix: eni.prefix6 } : {}),
      };
    });
    await this.store!.putLeases(rows, Date.now() - 60_000);
  }

  /**
   * One plugin call the way containerd's libcni makes it, with the node's installed conflist, retried as kubelet
   * would (callAsKubelet: code 11, or a DEL that failed). Every retry is recorded in `retries`: a retry is a failure
   * the run survived, and the run fails when it needed more than RETRY_BUDGET.
   */
  async plugin(
    node: string,
    command: 'ADD' | 'DEL' | 'CHECK',
    containerId: string,
    netns: string,
    override: Record<string, unknown> = {},
  ): Promise<PluginRun> {
    const list = this.conflist(node);
    const [ours] = list['plugins'] as Record<string, unknown>[];
    const netconf = JSON.stringify({ cniVersion: list['cniVersion'], name: list['name'], ...ours, ...override });
    const env = {
      CNI_COMMAND: command,
      CNI_CONTAINERID: containerId,
      CNI_NETNS: `/var/run/netns/${netns}`,
      CNI_IFNAME: 'eth0',
      CNI_PATH: '/opt/cni/bin',
      AWS_ENDPOINT_URL_DYNAMODB: `http://127.0.0.1:${DYNAMO_PORT}`,
    };
    return callAsKubelet(
      command,
      () => nodeExec(node, ['/opt/cni/bin/vpc-lease-cni'], env, netconf),
      (r, attempt) => {
        const error = r.json as { msg?: unknown; details?: unknown } | undefined;
        const msg = String(error?.msg ?? (r.stdout + r.stderr).slice(0, 300));
        this.retries.push({ node, command, containerId, attempt, msg, details: String(error?.details) });
      },
    );
  }

  track(child: ChildProcess, lasting = false): void {
    (lasting ? this.lasting : this.children).push(child);
  }

  /** A long-running workload in a namespace, stopped by `stopWorkloads`. */
  spawnIn(ns: string, argv: readonly string[], lasting = false): ChildProcess {
    countExecs(['ip', 'netns', 'exec', ns, ...argv]);
    const child = spawn('ip', ['netns', 'exec', ns, ...argv], { stdio: 'ignore', detached: false });
    this.track(child, lasting);
    return child;
  }

  /** busybox httpd on :port answering `/cgi-bin/who` with "<name> <client address>". */
  web(ns: string, name: string, port = 8080, lasting = false): void {
    const dir = join(ROOT, 'www', `${name}-${port}`);
    mkdirSync(join(dir, 'cgi-bin'), { recursive: true });
    writeFileSync(join(dir, 'index.html'), `${name}\n`);
    writeFileSync(
      join(dir, 'cgi-bin', 'who'),
      `#!/bin/sh\nprintf 'Content-Type: text/plain\\r\\n\\r\\n%s %s\\n' '${name}' "$REMOTE_ADDR"\n`,
      { mode: 0o755 },
    );
    this.spawnIn(ns, ['busybox', 'httpd', '-f', '-p', String(port), '-h', dir], lasting);
  }

  stopWorkloads(): void {
    for (const c of this.children.splice(0)) c.kill('SIGKILL');
  }

  async close(): Promise<void> {
    this.stopWorkloads();
    for (const c of this.lasting.splice(0)) c.kill('SIGKILL');
    await this.iam?.close();
    await this.dynalite?.close();
  }
}

/**
 * A pod's netns. The VM's root namespace is the fabric, so pods would inherit its sysctls; a real pod inherits
 * the node's (Amazon Linux: strict rp_filter), which is what the plugin must cope with.
 */
export function addPodNetns(name: string): void {
  ip('netns', 'add', name);
  ip('-n', name, 'link', 'set', 'lo', 'up');
  ip('netns', 'exec', name, 'sysctl', '-qw', 'net.ipv4.conf.all.rp_filter=1', 'net.ipv4.conf.default.rp_filter=1');
}
