import type { NewLease } from '../../../shared/domain/lease.js';
import { LightDynamoClient } from '../../../shared/dynamo/light-client.js';
import { encodeNewLease } from '../../../shared/lease-store/item-codec.js';
import {
  assert,
  ENI_MAC,
  GATEWAY,
  type GuestNode,
  HARNESS_STORE_TIMEOUT_MS,
  HOST_IP,
  ip,
  ok,
  type PluginRun,
  ping,
  SERVICE_CIDR,
  sh,
} from './guest-node.js';
import type { GuestCase } from './runner.js';
import { ipJson, leftovers, NODE_WIDE_RULE, podRuleset, type Snapshot, snapshot, text } from './snapshot.js';

/**
 * IPv6 pods on real ipvlan: the guest node of guest-node.ts plus its IPv6 half — the VPC router at the /64's base
 * + 1 (with an IMDS stand-in on fd00:ec2::254 behind it), the host's IPv6 address and an IPv6 service address, and
 * a "world" netns behind the host (198.51.100.1, with an IPv4 IMDS stand-in) that IPv4 egress reaches.
 */
const V6_SUBNET = '2600:1f18:77:1::/64';
const V6_GATEWAY = '2600:1f18:77:1::1';
const V6_PREFIX = '2600:1f18:77:1:1::/80';
const HOST_IP6 = '2600:1f18:77::5';
const SERVICE6 = 'fd00:96::/108';
const SERVICE_IP6 = 'fd00:96::10';
const IMDS6 = 'fd00:ec2::254';
const IMDS4 = '169.254.169.254';
const WORLD_IP = '198.51.100.1';
const EGRESS_CHAIN = 'VPC-LEASE-EGRESS4';
const MODES = ['l2', 'l3', 'l3s'] as const;

function ping6(netns: string | undefined, target: string, waitS = 3): boolean {
  const args = ['busybox', 'ping6', '-c', '1', '-W', String(waitS), target];
  try {
    if (netns) sh('ip', 'netns', 'exec', netns, ...args);
    else sh(args[0]!, ...args.slice(1));
    return true;
  } catch {
    return false;
  }
}

/** The IPv6 half of the node, and its IPv6 leases (seeded as the control plane writes them). */
async function startIpv6(n: GuestNode): Promise<void> {
  ip('-n', 'vpc', 'addr', 'add', `${V6_GATEWAY}/64`, 'dev', 'gw0', 'nodad');
  ip('-n', 'vpc', 'addr', 'add', `${IMDS6}/128`, 'dev', 'lo');
  ip('addr', 'add', `${HOST_IP6}/64`, 'dev', 'boot0', 'nodad');
  ip('addr', 'add', `${SERVICE_IP6}/128`, 'dev', 'lo');
  ip('netns', 'add', 'world');
  ip('link', 'add', 'out0', 'type', 'veth', 'peer', 'name', 'outp', 'netns', 'world');
  ip('addr', 'add', '198.51.100.5/24', 'dev', 'out0');
  ip('link', 'set', 'out0', 'up');
  ip('-n', 'world', 'addr', 'add', `${WORLD_IP}/24`, 'dev', 'outp');
  ip('-n', 'world', 'addr', 'add', `${IMDS4}/32`, 'dev', 'lo');
  ip('-n', 'world', 'link', 'set', 'lo', 'up');
  ip('-n', 'world', 'link', 'set', 'outp', 'up');
  ip('route', 'add', `${IMDS4}/32`, 'dev', 'out0');
  const leases: NewLease[] = Array.from({ length: 24 }, (_, i) => ({
    instanceArn: n.arn,
    ip: `2600:1f18:77:1:1::${(0x10 + i).toString(16)}`,
    eniId: 'eni-0a1b2c3d',
    deviceIndex: 1,
    mac: ENI_MAC,
    subnetId: 'subnet-0077aa77',
    subnetCidr: V6_SUBNET,
    gateway: V6_GATEWAY,
    prefix: V6_PREFIX,
  }));
  // One conditional put per lease, as the control plane writes them (the store's putLeases is IPv4's bulk path).
  const api = new LightDynamoClient({
    endpoint: n.dynalite.endpoint,
    region: 'us-east-1',
    credentials: async () => ({ accessKeyId: 'test', secretAccessKey: 'test' }),
    timeoutMs: HARNESS_STORE_TIMEOUT_MS,
  });
  for (const lease of leases)
    await api.putItem({ TableName: n.tableName, Item: encodeNewLease(lease, Date.now() - 1000) });
  await api.close();
  const batch = leases.map((l) => `neigh replace ${l.ip} lladdr ${ENI_MAC} dev gw0 nud permanent`).join('\n');
  sh('sh', '-c', `ip -n vpc -batch - <<'EOF'\n${batch}\nEOF`);
}

function addressesOf(run: PluginRun): string[] {
  const ips = (run.json?.['ips'] as { address: string }[] | undefined) ?? [];
  assert(ips.length > 0, `no address in ${run.stdout}`);
  return ips.map((a) => a.address.split('/')[0]!);
}

/** What an IPv6 attachment could leave on the node: snapshot() (its routes hold both families), the IPv6 rules,
 * the IPv4 egress chains and each pod's IPv6 marks. */
function snapshot6(pods: readonly string[]): Snapshot {
  const chain = (...args: string[]): string[] => {
    try {
      return sh('iptables', '-w', '5', ...args)
        .split('\n')
        .filter((l) => l.startsWith('-A '));
    } catch {
      return [];
    }
  };
  const [rules6 = []] = ipJson(undefined, ['rule show'], '-6');
  return {
    ...snapshot(pods),
    rules6: rules6.map(text),
    egress: [...chain('-S', EGRESS_CHAIN), ...chain('-t', 'nat', '-S', EGRESS_CHAIN)],
    podRuleset6: pods.flatMap((p) => podRuleset(p, 'ip6')),
  };
}

/**
 * A case's pods, DELeted in its `finally` when the case failed before its own DEL: a failing case must not leave a
 * CLAIMED lease or a pod's links, rules and routes behind, or every case after it fails for its leftovers.
 */
export class CasePods {
  /** The pods ADDed (or being ADDed) and not yet DELeted: containerId -> its namespace and netconf. */
  private readonly open = new Map<string, { netns: string; netconf: Record<string, unknown> }>();

  constructor(private readonly n: Pick<GuestNode, 'run'>) {}

  add(containerId: string, netns: string, netconf: Record<string, unknown>): Promise<PluginRun> {
    // Registered before the ADD runs: an ADD that fails half-way is DELeted too (DEL is idempotent).
    this.open.set(containerId, { netns, netconf });
    return this.n.run('ADD', { containerId, netns }, netconf);
  }

  async del(containerId: string): Promise<PluginRun> {
    const pod = this.open.get(containerId);
    assert(pod !== undefined, `${containerId} was never ADDed`);
    const run = await this.n.run('DEL', { containerId, netns: pod.netns }, pod.netconf);
    if (run.code === 0) this.open.delete(containerId);
    return run;
  }

  /** DELs what is still open; its failures are the console's, never the case's (the case already failed). */
  async cleanUp(): Promise<void> {
    for (const containerId of [...this.open.keys()]) {
      const run = await this.del(containerId).catch((err: unknown) => ({ code: -1, stdout: String(err), stderr: '' }));
      if (run.code !== 0) console.log(`cleanup: DEL ${containerId} exited ${run.code}: ${run.stdout} ${run.stderr}`);
    }
  }
}

/** Runs a case's body with its pods, cleaning up whatever the body left open, whether it passed or threw. */
export async function withPods(n: Pick<GuestNode, 'run'>, body: (pods: CasePods) => Promise<void>): Promise<void> {
  const pods = new CasePods(n);
  try {
    await body(pods);
  } finally {
    await pods.cleanUp();
  }
}

/**
 * May appear: the node-wide NodePort rules of either family, and the pod ENI's own link-local route (the first ADD
 * brings the ENI up, and nothing takes it down again: eni-link.ts), and what the first IPv6-only pod installs for
 * every later one: the IPv4 egress guard rule and the egress chains' rules, which name the whole link-local range,
 * never one pod's address.
 */
const NODE_WIDE = new RegExp(
  [
    NODE_WIDE_RULE.source,
    '^\\{"dst":"fe80::/64","dev":"eni1",',
    '^\\{"priority":1001,"src":"169\\.254\\.172\\.0","srclen":22,"action":"unreachable"\\}$',
    `^-A ${EGRESS_CHAIN} -s 169\\.254\\.172\\.0/22 `,
  ].join('|'),
);

export function ipv6Cases(start: () => Promise<void>, node: () => GuestNode): GuestCase[] {
  const conf = (n: GuestNode, mode: string, ipFamily = 'ipv6') =>
    n.netconf(mode as 'l2', { ipFamily, serviceCidrs: [SERVICE_CIDR, SERVICE6] });
  const cases: GuestCase[] = [
    {
      name: 'ipv6 guest node starts (router at the /64 base + 1, IMDS stand-ins, host and service IPv6, world)',
      run: async () => {
        await start();
        await startIpv6(node());
      },
    },
  ];
  for (const mode of MODES) {
    cases.push({
      name: `ipv6 ${mode}: two pods reach each other, the router, the host and an IPv6 service; CHECK; DEL leaves nothing`,
      run: () =>
        withPods(node(), async (pods) => {
          const n = node();
          const netns = [n.addNetns(), n.addNetns()];
          const ids = netns.map((_, i) => `v6-${mode}-${i}`);
          const before = snapshot6(netns);
          const adds = await Promise.all(netns.map((ns, i) => pods.add(ids[i]!, ns, conf(n, mode))));
          for (const [i, r] of adds.entries()) ok(r, `ADD of pod ${i}`);
          const [a, b] = netns as [string, string];
          const [ipA] = addressesOf(adds[0]!) as [string];
          const [ipB] = addressesOf(adds[1]!) as [string];
          assert(ping6(a, ipB), `pod ${ipA} cannot ping6 pod ${ipB}`);
          assert(ping6(a, V6_GATEWAY), `pod ${ipA} cannot reach the router ${V6_GATEWAY}`);
          assert(ping6(a, HOST_IP6), `pod ${ipA} cannot reach the host ${HOST_IP6} over its veth`);
          assert(ping6(undefined, ipB), `the host cannot reach pod ${ipB} over its veth`);
          assert(ping6(b, SERVICE_IP6), `pod ${ipB} cannot reach the IPv6 service ${SERVICE_IP6}`);
          assert(ping(b, WORLD_IP), `pod ${ipB} has no IPv4 egress to ${WORLD_IP}`);
          if (mode !== 'l2') {
            const rules = ip('-6', 'rule', 'show');
            for (const addr of [ipA, ipB]) assert(rules.includes(`from ${addr} lookup 1001`), `no rule: ${rules}`);
          }
          const check = await n.run(
            'CHECK',
            { containerId: ids[0]!, netns: a },
            { ...conf(n, mode), prevResult: adds[0]!.json },
          );
          ok(check, 'CHECK');
          const dels = await Promise.all(ids.map((id) => pods.del(id)));
          for (const [i, r] of dels.entries()) ok(r, `DEL of pod ${i}`);
          const left = leftovers(before, snapshot6(netns), NODE_WIDE);
          assert(left.length === 0, `left behind after DEL:\n${left.join('\n')}`);
          assert((await n.claimed()).length === 0, 'a lease is still CLAIMED');
        }),
    });
  }
  cases.push(
    {
      name: 'ipv6 l2: IMDS is unreachable on fd00:ec2::254; negative control: reachable once the block is removed',
      run: () =>
        withPods(node(), async (pods) => {
          const n = node();
          const netns = n.addNetns();
          ok(await pods.add('v6-imds', netns, conf(n, 'l2')), 'ADD');
          assert(ping6(netns, V6_GATEWAY), 'the pod cannot reach the router (the control would prove nothing)');
          assert(!ping6(netns, IMDS6, 1), `the pod reached IMDS at ${IMDS6}`);
          ip('-n', netns, '-6', 'route', 'del', 'unreachable', IMDS6);
          assert(ping6(netns, IMDS6), 'without its block the pod still cannot reach the IMDS stand-in');
          ok(await pods.del('v6-imds'), 'DEL');
        }),
    },
    {
      name: 'ipv6 l3s: IPv4 egress cannot reach IMDS; controls: the pod route, then also the host drop removed',
      run: () =>
        withPods(node(), async (pods) => {
          const n = node();
          const netns = n.addNetns();
          ok(await pods.add('v4-imds', netns, conf(n, 'l3s')), 'ADD');
          assert(ping(netns, WORLD_IP), 'the pod has no IPv4 egress (the control would prove nothing)');
          assert(!ping(netns, IMDS4, 1), `the pod reached IMDS at ${IMDS4} over its egress`);
          ip('-n', netns, 'route', 'del', 'unreachable', IMDS4);
          assert(!ping(netns, IMDS4, 1), 'the host forwarded the pod to IMDS without the pod route');
          const chain = sh('iptables', '-w', '5', '-S', EGRESS_CHAIN)
            .split('\n')
            .filter((l) => l.startsWith('-A '));
          const at = chain.findIndex((l) => l.includes('169.254.0.0/16') && l.includes('DROP'));
          assert(at >= 0, 'no link-local drop in the egress chain');
          const drop = chain[at]!.replace(/^-A \S+ /, '').split(' ');
          sh('iptables', '-w', '5', '-D', EGRESS_CHAIN, ...drop);
          try {
            assert(ping(netns, IMDS4), 'with both blocks removed the pod still cannot reach the IMDS stand-in');
          } finally {
            // The drop is the node's, not the pod's: back where it was, for the cases after this one.
            sh('iptables', '-w', '5', '-I', EGRESS_CHAIN, String(at + 1), ...drop);
          }
          ok(await pods.del('v4-imds'), 'DEL');
        }),
    },
    {
      name: 'dual l3s: one pod reaches the router on both families and the host over its veth on both',
      run: () =>
        withPods(node(), async (pods) => {
          const n = node();
          const netns = n.addNetns();
          const before = snapshot6([netns]);
          const add = await pods.add('dual-l3s', netns, conf(n, 'l3s', 'dual'));
          ok(add, 'ADD');
          const [v4, v6] = addressesOf(add) as [string, string];
          assert(ping(netns, GATEWAY) && ping6(netns, V6_GATEWAY), `${v4}/${v6} cannot reach both routers`);
          assert(ping(netns, HOST_IP) && ping6(netns, HOST_IP6), 'the pod cannot reach the host on both families');
          ok(await pods.del('dual-l3s'), 'DEL');
          const left = leftovers(before, snapshot6([netns]), NODE_WIDE);
          assert(left.length === 0, `left behind after DEL:\n${left.join('\n')}`);
        }),
    },
  );
  return cases;
}
