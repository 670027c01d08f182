/**
 * One simulated node inside the VM, for driving the built plugin as a runtime does. The VM is throwaway, so its
 * root namespace plays the node's host namespace:
 * - boot0 (dummy, 10.77.0.5/24): the boot ENI and the host's address; 10.96.0.10 (host-scoped, on lo) stands in
 *   for a service address kube-proxy would DNAT;
 * - eni1 (veth, fixed MAC, device index 1): the pod ENI, arriving down at MTU 1500 as EC2 hot-plugs it (the
 *   plugin brings it up at 9001); its peer gw0 sits in netns `vpc`, which plays the VPC
 *   router with the subnet gateway 10.77.0.1 (and static neighbours for the pod addresses, as the VPC fabric
 *   needs no ARP);
 * - dynalite and an IMDS run in this process (so every plugin call must be spawned asynchronously).
 */
import { execFileSync } from 'node:child_process';
import { mkdirSync, readFileSync } from 'node:fs';
import { request } from 'node:http';
import { IamEndpoint } from '../../../local-cloud/iam/endpoint.js';
import type { SynthesizedNodePolicy } from '../../../local-cloud/iam/node-policy.js';
import { instanceArn } from '../../../shared/domain/arn.js';
import type { Lease, NewLease } from '../../../shared/domain/lease.js';
import { LightDynamoClient } from '../../../shared/dynamo/light-client.js';
import { signRequest } from '../../../shared/dynamo/sigv4.js';
import { DynamoLeaseStore } from '../../../shared/lease-store/dynamo-lease-store.js';
import { createTableInput } from '../../../shared/lease-store/table.js';
import { cmd, countExecs, ip, ipBatch } from '../../fabric/guest/net.js';
import { type FakeImds, startFakeImds } from '../../node/support/fake-imds.js';
import { type DynaliteHandle, startDynalite } from '../../support/dynalite.js';
import { callAsKubelet } from '../../support/kubelet-retry.js';
import { type PluginRun, runPluginProcess } from '../../support/plugin-process.js';
import { retriedCalls } from './runner.js';

export const SUBNET_CIDR = '10.77.0.0/24';
export const GATEWAY = '10.77.0.1';
export const HOST_IP = '10.77.0.5';
export const SERVICE_CIDR = '10.96.0.0/16';
export const SERVICE_IP = '10.96.0.10';
export const ENI_MAC = '02:77:00:00:00:01';
export const ENI_TABLE = 1001;
const CREDENTIALS = { accessKeyId: 'test', secretAccessKey: 'test' };
/** The harness's own requests to the guest's dynalite (seeding, reading leases): slow, never failed for it. */
export const HARNESS_STORE_TIMEOUT_MS = 300_000;

export type { PluginRun };
/** A program in the guest, counted (the fabric's helpers: every start is the suite's work). */
export const sh = cmd;
export { ip };

export function assert(condition: boolean, message: string): asserts condition {
  if (!condition) throw new Error(message);
}

export function ok(run: PluginRun, what: string): void {
  assert(run.code === 0, `${what} exited ${run.code}: ${run.stdout} ${run.stderr}`);
}

/** One echo; `waitS` short for the pings expected to fail (each costs its whole wait). */
export function ping(netns: string | undefined, target: string, waitS = 3): boolean {
  const args = ['busybox', 'ping', '-c', '1', '-W', String(waitS), target];
  const argv = netns ? ['ip', 'netns', 'exec', netns, ...args] : args;
  countExecs(argv);
  try {
    execFileSync(argv[0]!, argv.slice(1), { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
}

/** CreateTable over plain HTTP (the guest bundle carries no SDK). */
export async function createTable(endpoint: string, tableName: string): Promise<void> {
  const url = new URL(endpoint);
  const body = JSON.stringify(createTableInput(tableName));
  const headers = signRequest(
    {
      method: 'POST',
      host: url.host,
      path: '/',
      headers: {
        'content-type': 'application/x-amz-json-1.0',
        'x-amz-target': 'DynamoDB_20120810.CreateTable',
        'content-length': String(Buffer.byteLength(body)),
      },
      body,
    },
    { region: 'us-east-1', service: 'dynamodb', credentials: CREDENTIALS, date: new Date() },
  );
  await new Promise<void>((resolve, reject) => {
    const req = request({ hostname: url.hostname, port: url.port, path: '/', method: 'POST', headers }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () =>
        res.statusCode === 200
          ? resolve()
          : reject(new Error(`CreateTable: ${res.statusCode} ${Buffer.concat(chunks).toString('utf8')}`)),
      );
    });
    req.on('error', reject);
    req.end(body);
  });
}

export class GuestNode {
  readonly dataDir = '/tmp/vpc-lease-guest/data';
  readonly logFile = '/tmp/vpc-lease-guest/cni.log';
  readonly tableName = 'vpc-lease-vm';
  readonly arn: string;
  private podCounter = 0;

  private constructor(
    readonly cni: string,
    readonly dynalite: DynaliteHandle,
    /** In front of dynalite: the plugin's requests, signed with the instance's session, judged by the node policy. */
    readonly iam: IamEndpoint,
    readonly imds: FakeImds,
    readonly store: DynamoLeaseStore,
  ) {
    this.arn = instanceArn('us-east-1', '123456789012', imds.instanceId, 'aws');
  }

  static async start(cni: string, policyFile: string): Promise<GuestNode> {
    mkdirSync('/tmp/vpc-lease-guest', { recursive: true });
    ip('link', 'set', 'lo', 'up');
    sh('sysctl', '-qw', 'net.ipv4.ip_forward=1');
    ip('link', 'add', 'boot0', 'type', 'dummy');
    ip('addr', 'add', `${HOST_IP}/24`, 'dev', 'boot0');
    ip('link', 'set', 'boot0', 'up');
    ip('addr', 'add', `${SERVICE_IP}/32`, 'dev', 'lo', 'scope', 'host');
    ip('netns', 'add', 'vpc');
    // As EC2 hot-plugs an ENI: down, no address, the driver's MTU. The plugin brings it up.
    ip('link', 'add', 'eni1', 'address', ENI_MAC, 'type', 'veth', 'peer', 'name', 'gw0', 'netns', 'vpc');
    ip('-n', 'vpc', 'link', 'set', 'lo', 'up');
    ip('-n', 'vpc', 'link', 'set', 'gw0', 'mtu', '9001', 'up');
    ip('-n', 'vpc', 'addr', 'add', `${GATEWAY}/24`, 'dev', 'gw0');

    const dynalite = await startDynalite();
    await createTable(dynalite.endpoint, 'vpc-lease-vm');
    const iam = new IamEndpoint({
      target: dynalite.endpoint,
      region: 'us-east-1',
      accountId: '123456789012',
      policy: JSON.parse(readFileSync(policyFile, 'utf8')) as SynthesizedNodePolicy,
      tableName: 'vpc-lease-vm',
      controlPlaneKeys: [CREDENTIALS.accessKeyId],
    });
    await iam.start();
    const session = iam.issue('i-0123456789abcdef0', 'vpc-0a1b2c3d4e5f60718', 'vpc-lease-node');
    const imds = await startFakeImds('i-0123456789abcdef0', 'us-east-1', '123456789012', session.credentials);
    // The guest runs ~5x slower than the host, which is itself shared: seeding must not hinge on its speed (at
    // load 35 on 2 cores a PutItem to the guest's own dynalite passed 30 s). The VM's own limit bounds a hang.
    const api = new LightDynamoClient({
      endpoint: dynalite.endpoint,
      region: 'us-east-1',
      credentials: async () => CREDENTIALS,
      timeoutMs: HARNESS_STORE_TIMEOUT_MS,
    });
    const node = new GuestNode(cni, dynalite, iam, imds, new DynamoLeaseStore({ api, tableName: 'vpc-lease-vm' }));
    const leases = await node.seed(40);
    // The VPC fabric delivers to the ENI without ARP; the router netns needs the same knowledge. One `ip -batch`:
    // a process start costs ~0.1 s in the emulated guest.
    ipBatch(
      'vpc',
      leases.map((lease) => `neigh replace ${lease} lladdr ${ENI_MAC} dev gw0 nud permanent`),
    );
    return node;
  }

  private async seed(count: number): Promise<string[]> {
    const leases: NewLease[] = Array.from({ length: count }, (_, i) => ({
      instanceArn: this.arn,
      ip: `10.77.0.${10 + i}`,
      eniId: 'eni-0a1b2c3d',
      deviceIndex: 1,
      mac: ENI_MAC,
      subnetId: 'subnet-0077aa77',
      subnetCidr: SUBNET_CIDR,
      gateway: GATEWAY,
    }));
    await this.store.putLeases(leases, Date.now() - 1000);
    return leases.map((l) => l.ip);
  }

  async claimed(): Promise<Lease[]> {
    return this.store.listLeases(this.arn, { state: 'CLAIMED' });
  }

  addNetns(name = `pod${this.podCounter++}`): string {
    ip('netns', 'add', name);
    ip('-n', name, 'link', 'set', 'lo', 'up');
    return name;
  }

  netconf(mode: 'l2' | 'l3' | 'l3s', extra: Record<string, unknown> = {}): Record<string, unknown> {
    return {
      cniVersion: '1.1.0',
      name: 'vpc-lease',
      type: 'vpc-lease-cni',
      mode,
      dataDir: this.dataDir,
      logFile: this.logFile,
      logLevel: 'debug',
      tableName: this.tableName,
      imdsEndpoint: this.imds.endpoint,
      dynamoEndpoint: this.iam.endpoint,
      reuseWaitMs: 0,
      // Per-request budgets sized for a slow guest on a busy host, not for EC2 (3000 / 1000 by default).
      storeTimeoutMs: 20_000,
      imdsTimeoutMs: 10_000,
      hostVeth: true,
      serviceCidrs: [SERVICE_CIDR],
      ...extra,
    };
  }

  /**
   * One plugin call: a separate process, CNI_* in the environment, the netconf on stdin; retried as kubelet would
   * (code 11, or a failed DEL), each retry listed in the case's result and counted against the suite's budget.
   */
  run(
    command: string,
    options: { containerId: string; netns: string; env?: Record<string, string> },
    netconf: Record<string, unknown>,
  ): Promise<PluginRun> {
    const env: Record<string, string> = {
      PATH: process.env['PATH'] ?? '/usr/sbin:/usr/bin:/sbin:/bin',
      // The guest's IMDS stand-in is on loopback: an IMDS override is honoured only in test mode.
      VPC_LEASE_TEST_MODE: '1',
      CNI_COMMAND: command,
      CNI_CONTAINERID: options.containerId,
      CNI_IFNAME: 'eth0',
      CNI_NETNS: `/var/run/netns/${options.netns}`,
      CNI_PATH: '/opt/cni/bin',
      ...options.env,
    };
    return callAsKubelet(
      command,
      () => {
        countExecs([this.cni]);
        return runPluginProcess(this.cni, [], env, JSON.stringify(netconf));
      },
      (failed, attempt) =>
        retriedCalls.push(`${command} ${options.containerId} attempt ${attempt}: ${failed.stdout}${failed.stderr}`),
    );
  }

  async close(): Promise<void> {
    await this.imds.close();
    await this.iam.close();
    await this.dynalite.close();
  }
}
