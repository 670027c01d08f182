import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CreateTableCommand, DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { IamEndpoint } from '../../../local-cloud/iam/endpoint.js';
import { synthesizedNodePolicy } from '../../../local-cloud/iam/synthesize-node-policy.js';
import { buildCni } from '../../../packaging/build.js';
import { instanceArn } from '../../../shared/domain/arn.js';
import type { NewLease } from '../../../shared/domain/lease.js';
import type { NodePhase, NodeRecord } from '../../../shared/domain/node.js';
import { createSdkDynamoApi } from '../../../shared/dynamo/sdk-client.js';
import { DynamoLeaseStore } from '../../../shared/lease-store/dynamo-lease-store.js';
import type { LeaseStore } from '../../../shared/lease-store/port.js';
import { createTableInput } from '../../../shared/lease-store/table.js';
import { type DynaliteHandle, startDynalite } from '../../support/dynalite.js';
import { type PluginRun, runPluginProcess } from '../../support/plugin-process.js';
import { type FakeImds, startFakeImds } from './fake-imds.js';

const FIXTURE_VPC_ID = 'vpc-0f1x7f1x7f1x7f1x7';

/**
 * One simulated node for the plugin: a dynalite table, an IMDS for its instance, a host "ENI" (a veth carrying
 * the ENI's MAC, arriving down as EC2 hot-plugs it — the kernel here has no ipvlan, so pods get macvlan links on
 * it through the same netlink path),
 * a private build of the binary, and helpers to run the plugin exactly as a runtime does.
 * Every name carries a per-run id so parallel runs never collide; `close` removes all of it.
 */

export interface RunOptions {
  readonly containerId?: string;
  readonly ifName?: string;
  readonly netns?: string;
  readonly stdin?: string;
  /** Replaces CNI_* / test variables (undefined removes one). */
  readonly env?: Record<string, string | undefined>;
  readonly args?: string;
  /** What the runtime executes (default: the plugin itself; the agent suites run the shim). */
  readonly executable?: string;
}

export const SUBNET_CIDR = '10.77.0.0/24';
export const GATEWAY = '10.77.0.1';
/** The ENI's IPv6 subnet and its /80, from which seedIpv6 writes leases. */
export const V6_SUBNET_CIDR = '2600:1f18:77:1::/64';
export const V6_GATEWAY = '2600:1f18:77:1::1';
export const V6_PREFIX = '2600:1f18:77:1:1::/80';

function hex(bytes: number): string {
  return randomBytes(bytes).toString('hex');
}

export class NodeFixture {
  readonly runId = hex(3);
  readonly arn: string;
  readonly masterName = `vm${this.runId}`;
  readonly peerName = `vp${this.runId}`;
  readonly masterMac = `02:77:${hex(4).match(/../g)!.join(':')}`;
  readonly eniId = `eni-${hex(4)}`;
  readonly dir = mkdtempSync(join(tmpdir(), 'vpc-lease-cni-'));
  readonly dataDir = join(this.dir, 'data');
  readonly logFile = join(this.dir, 'cni.log');
  readonly namespaces: string[] = [];
  private nsCounter = 0;

  private constructor(
    readonly cni: string,
    readonly dynalite: DynaliteHandle,
    /** The IAM-enforcing endpoint in front of dynalite: the plugin's requests are judged by the node policy. */
    readonly iam: IamEndpoint,
    readonly imds: FakeImds,
    readonly store: LeaseStore,
    readonly tableName: string,
    private readonly binDir: string,
  ) {
    this.arn = instanceArn('us-east-1', '123456789012', imds.instanceId, 'aws');
  }

  static async start(): Promise<NodeFixture> {
    const binDir = mkdtempSync(join(tmpdir(), 'vpc-lease-cni-bin-'));
    const cni = await buildCni(binDir);
    const dynalite = await startDynalite();
    const instanceId = `i-${hex(9).slice(0, 17)}`;
    const tableName = `vpc-lease-${hex(3)}`;
    // The plugin signs with the session its IMDS hands out, so every request it makes is evaluated against the
    // node policy synthesized from the construct (a denial fails the test); the fixture's own seeding and
    // inspection use control-plane keys.
    const credentials = { accessKeyId: 'test', secretAccessKey: 'test' };
    const iam = new IamEndpoint({
      target: dynalite.endpoint,
      region: 'us-east-1',
      accountId: '123456789012',
      policy: await synthesizedNodePolicy(),
      tableName,
      controlPlaneKeys: [credentials.accessKeyId],
    });
    await iam.start();
    const session = iam.issue(instanceId, FIXTURE_VPC_ID, 'vpc-lease-node');
    const imds = await startFakeImds(instanceId, 'us-east-1', '123456789012', session.credentials);
    const api = createSdkDynamoApi({ endpoint: dynalite.endpoint, region: 'us-east-1', credentials });
    const store = new DynamoLeaseStore({ api, tableName });
    const fixture = new NodeFixture(cni, dynalite, iam, imds, store, tableName, binDir);
    const ddb = new DynamoDBClient({ endpoint: dynalite.endpoint, region: 'us-east-1', credentials });
    await ddb.send(new CreateTableCommand(createTableInput(tableName)));
    ddb.destroy();
    fixture.createMaster();
    return fixture;
  }

  /** An IMDS for another instance sharing this table, handing out that instance's own role session. */
  startOtherImds(instanceId: string): Promise<FakeImds> {
    const session = this.iam.issue(instanceId, FIXTURE_VPC_ID, 'vpc-lease-node');
    return startFakeImds(instanceId, 'us-east-1', '123456789012', session.credentials);
  }

  /** The ENI as EC2 hot-plugs it: down, no address, the driver's MTU; its peer (the VPC's side) up at 9001. */
  private createMaster(): void {
    execFileSync('ip', ['link', 'add', this.masterName, 'type', 'veth', 'peer', 'name', this.peerName]);
    execFileSync('ip', ['link', 'set', this.masterName, 'address', this.masterMac]);
    execFileSync('ip', ['link', 'set', this.peerName, 'mtu', '9001', 'up']);
  }

  /** Seeds `count` FREE leases on the ENI, 10.77.0.10 upwards. */
  seed(count: number, from = 10): Promise<string[]> {
    const ips = Array.from({ length: count }, (_, i) => `10.77.0.${from + i}`);
    return this.seedOnEni(ips, { subnetCidr: SUBNET_CIDR, gateway: GATEWAY });
  }

  /** Seeds `count` FREE IPv6 leases in the ENI's /80, ::10 upwards, beside the IPv4 ones. */
  seedIpv6(count: number): Promise<string[]> {
    const ips = Array.from({ length: count }, (_, i) => `2600:1f18:77:1:1::${(0x10 + i).toString(16)}`);
    return this.seedOnEni(ips, { subnetCidr: V6_SUBNET_CIDR, gateway: V6_GATEWAY, prefix: V6_PREFIX });
  }

  /** FREE leases as the control plane writes them (one conditional put each), claimable a second ago. */
  private async seedOnEni(
    ips: readonly string[],
    placement: Pick<NewLease, 'subnetCidr' | 'gateway' | 'prefix'>,
  ): Promise<string[]> {
    const leases: NewLease[] = ips.map((ip) => ({
      instanceArn: this.arn,
      ip,
      eniId: this.eniId,
      deviceIndex: 1,
      mac: this.masterMac,
      subnetId: 'subnet-0077aa77',
      ...placement,
    }));
    await this.store.putLeases(leases, Date.now() - 1000);
    return [...ips];
  }

  /** Creates the node item in `phase`, or moves it there (what the lifecycle and drain handlers write). */
  async setPhase(phase: NodePhase): Promise<void> {
    const current = await this.store.getNode(this.arn);
    const nowMs = Date.now();
    const record: NodeRecord = {
      instanceArn: this.arn,
      instanceId: this.imds.instanceId,
      instanceType: 'm5.large',
      availabilityZone: 'us-east-1a',
      podSubnetIds: [],
      phase,
      enis: [],
      maxPods: 29,
      createdAtMs: current?.createdAtMs ?? nowMs,
      updatedAtMs: nowMs,
      version: current?.version ?? 1,
    };
    if (current) await this.store.updateNode(record, current.version);
    else await this.store.createNode(record);
  }

  addNetns(): string {
    const name = `vl7-${this.runId}-${this.nsCounter++}`;
    execFileSync('ip', ['netns', 'add', name]);
    this.namespaces.push(name);
    return `/var/run/netns/${name}`;
  }

  /** `ip -j` inside a namespace, parsed. */
  ipJson(netns: string, ...args: string[]): Record<string, unknown>[] {
    const name = netns.split('/').pop()!;
    const out = execFileSync('ip', ['-n', name, '-j', ...args], { encoding: 'utf8' });
    return out.trim() === '' ? [] : (JSON.parse(out) as Record<string, unknown>[]);
  }

  /** Names of the links in the host namespace (a leaked temp link would show up here). */
  hostLinks(): string[] {
    const out = execFileSync('ip', ['-j', 'link', 'show'], { encoding: 'utf8' });
    return (JSON.parse(out) as { ifname: string }[]).map((l) => l.ifname);
  }

  /** Links in a pod netns other than lo. */
  podLinks(netns: string): string[] {
    return this.ipJson(netns, 'link', 'show')
      .map((l) => l['ifname'] as string)
      .filter((n) => n !== 'lo');
  }

  netconf(version: string, extra: Record<string, unknown> = {}): Record<string, unknown> {
    return {
      cniVersion: version,
      name: 'vpc-lease',
      type: 'vpc-lease-cni',
      dataDir: this.dataDir,
      logFile: this.logFile,
      logLevel: 'debug',
      tableName: this.tableName,
      imdsEndpoint: this.imds.endpoint,
      dynamoEndpoint: this.iam.endpoint,
      reuseWaitMs: 0,
      ...extra,
    };
  }

  /**
   * The pod link kind: macvlan on this kernel; VPC_LEASE_FIXTURE_LINK_KIND=ipvlan runs the same suites with real
   * ipvlan (inside the ipvlan VM: `../shared/ipvlan-vm/run -- npx vitest run test/node`).
   */
  readonly linkKind: 'ipvlan' | 'macvlan' =
    process.env['VPC_LEASE_FIXTURE_LINK_KIND'] === 'ipvlan' ? 'ipvlan' : 'macvlan';

  baseEnv(): Record<string, string> {
    return {
      PATH: process.env['PATH'] ?? '/usr/bin:/bin',
      VPC_LEASE_TEST_MODE: '1',
      ...(this.linkKind === 'macvlan' ? { VPC_LEASE_TEST_LINK_KIND: 'macvlan' } : {}),
    };
  }

  run(command: string, options: RunOptions = {}, netconf?: Record<string, unknown>): Promise<PluginRun> {
    const env: Record<string, string> = {
      ...this.baseEnv(),
      CNI_COMMAND: command,
      CNI_CONTAINERID: options.containerId ?? 'c0',
      CNI_IFNAME: options.ifName ?? 'eth0',
      CNI_PATH: '/usr/lib/cni',
      ...(options.netns !== undefined ? { CNI_NETNS: options.netns } : {}),
      ...(options.args !== undefined ? { CNI_ARGS: options.args } : {}),
    };
    for (const [k, v] of Object.entries(options.env ?? {})) {
      if (v === undefined) delete env[k];
      else env[k] = v;
    }
    const stdin = options.stdin ?? JSON.stringify(netconf ?? this.netconf('1.1.0'));
    return runProcess(options.executable ?? this.cni, [], env, stdin);
  }

  /** Runs a reference plugin from /usr/lib/cni with the same contract. */
  runReference(
    plugin: string,
    command: string,
    options: RunOptions,
    netconf: Record<string, unknown>,
  ): Promise<PluginRun> {
    const env: Record<string, string> = {
      PATH: process.env['PATH'] ?? '/usr/bin:/bin',
      CNI_COMMAND: command,
      CNI_CONTAINERID: options.containerId ?? 'c0',
      CNI_IFNAME: options.ifName ?? 'eth0',
      CNI_PATH: '/usr/lib/cni',
      ...(options.netns !== undefined ? { CNI_NETNS: options.netns } : {}),
    };
    return runProcess(`/usr/lib/cni/${plugin}`, [], env, JSON.stringify(netconf));
  }

  async close(): Promise<void> {
    for (const ns of this.namespaces) {
      try {
        execFileSync('ip', ['netns', 'del', ns], { stdio: 'ignore' });
      } catch {
        // already gone
      }
    }
    try {
      execFileSync('ip', ['link', 'del', this.masterName], { stdio: 'ignore' });
    } catch {
      // already gone
    }
    await this.imds.close();
    await this.iam.close();
    await this.dynalite.close();
    rmSync(this.dir, { recursive: true, force: true });
    rmSync(this.binDir, { recursive: true, force: true });
  }
}

export type { PluginRun };
export const runProcess = runPluginProcess;
