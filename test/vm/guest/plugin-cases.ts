import { eniCases } from './eni-cases.js';
import { faultCases } from './fault-cases.js';
import {
  assert,
  ENI_TABLE,
  GATEWAY,
  type GuestNode,
  HOST_IP,
  ip,
  ok,
  type PluginRun,
  ping,
  SERVICE_IP,
} from './guest-node.js';
import { kernelCases } from './kernel-cases.js';
import type { GuestCase } from './runner.js';
import { leftovers, NODE_WIDE_RULE, type Snapshot, snapshot } from './snapshot.js';

/**
 * The built plugin on real ipvlan, driven as a runtime drives it. Per mode: two pods on one master reach each
 * other, the VPC router (through the ENI's table in L3/L3S), the host and a service address (through the host
 * veth), and the host reaches them; CHECK passes; DEL leaves nothing. Then an ADD failure injected after every
 * step leaves nothing either (fault-cases.ts).
 */
const MODES = ['l2', 'l3', 'l3s'] as const;

/** A table's routes as `ip` prints them; empty when the table does not exist (the kernel refuses the dump). */
function tableText(table: number): string {
  try {
    return ip('route', 'show', 'table', String(table));
  } catch (err) {
    if (/does not exist/.test(String((err as { stderr?: unknown }).stderr))) return '';
    throw err;
  }
}

function podIp(run: PluginRun): string {
  const ips = run.json?.['ips'] as { address: string }[] | undefined;
  const address = ips?.[0]?.address;
  assert(address !== undefined, `no address in ${run.stdout}`);
  return address.split('/')[0]!;
}

export function pluginCases(node: () => GuestNode): GuestCase[] {
  const cases: GuestCase[] = [];
  for (const mode of MODES) {
    const state: { pods: string[]; ips: string[]; before?: Snapshot; add?: PluginRun } = {
      pods: [],
      ips: [],
    };
    cases.push({
      name: `plugin ${mode}: two pods on one master reach each other, the gateway, the host and a service`,
      async run(): Promise<void> {
        const n = node();
        state.pods = [n.addNetns(), n.addNetns()];
        state.before = snapshot(state.pods);
        const conf = n.netconf(mode);
        const runs = await Promise.all(
          state.pods.map((netns, i) => n.run('ADD', { containerId: `${mode}-${i}`, netns }, conf)),
        );
        for (const [i, r] of runs.entries()) ok(r, `ADD of pod ${i}`);
        state.add = runs[0];
        state.ips = runs.map(podIp);
        const [a, b] = state.pods as [string, string];
        const [ipA, ipB] = state.ips as [string, string];
        const details = ip('-d', '-n', a, 'link', 'show', 'eth0');
        assert(new RegExp(`ipvlan\\s+mode ${mode} `).test(details), `eth0 is not ipvlan ${mode}: ${details}`);
        assert(ping(a, ipB), `pod ${ipA} cannot ping pod ${ipB}`);
        assert(ping(b, ipA), `pod ${ipB} cannot ping pod ${ipA}`);
        assert(ping(a, GATEWAY), `pod ${ipA} cannot reach the subnet gateway ${GATEWAY}`);
        assert(ping(a, HOST_IP), `pod ${ipA} cannot reach the host ${HOST_IP} over its veth`);
        assert(ping(undefined, ipA), `the host cannot reach pod ${ipA} over its veth`);
        assert(ping(b, SERVICE_IP), `pod ${ipB} cannot reach the service address ${SERVICE_IP}`);
        const podRoutes = ip('-n', a, 'route', 'show');
        assert(/10\.96\.0\.0\/16 via 10\.77\.0\.5 dev vh-eth0/.test(podRoutes), `no service route: ${podRoutes}`);
        const rules = ip('rule', 'show');
        const table = tableText(ENI_TABLE);
        if (mode === 'l2') {
          assert(!rules.includes(`lookup ${ENI_TABLE}`), `L2 needs no rule: ${rules}`);
          assert(table.trim() === '', `L2 needs no table: ${table}`);
        } else {
          for (const addr of state.ips)
            assert(rules.includes(`from ${addr} lookup ${ENI_TABLE}`), `no rule for ${addr}: ${rules}`);
          const defaults = table.split('\n').filter((l) => l.startsWith(`default via ${GATEWAY} dev eni1`));
          assert(defaults.length === 2, `table ${ENI_TABLE} should hold one route per pod: ${table}`);
        }
        const check = await n.run(
          'CHECK',
          { containerId: `${mode}-0`, netns: a },
          { ...conf, prevResult: state.add?.json },
        );
        ok(check, 'CHECK');
      },
    });
    cases.push({
      name: `plugin ${mode}: DEL leaves no link, veth, rule, table or route behind`,
      async run(): Promise<void> {
        const n = node();
        assert(state.before !== undefined && state.pods.length === 2, 'the ADD case did not run');
        const conf = n.netconf(mode);
        const dels = await Promise.all(
          state.pods.map((netns, i) => n.run('DEL', { containerId: `${mode}-${i}`, netns }, conf)),
        );
        for (const [i, r] of dels.entries()) ok(r, `DEL of pod ${i}`);
        const left = leftovers(state.before, snapshot(state.pods), NODE_WIDE_RULE);
        assert(left.length === 0, `left behind after DEL:\n${left.join('\n')}`);
        assert(!ping(undefined, state.ips[0]!, 1), 'the host still reaches the deleted pod');
        assert((await n.claimed()).length === 0, 'a lease is still CLAIMED');
        ok(await n.run('DEL', { containerId: `${mode}-0`, netns: state.pods[0]! }, conf), 'DEL again');
      },
    });
  }

  return cases;
}

/**
 * The whole guest suite in order: the kernel's own checks, the node's start, the plugin cases. The host side
 * builds the same list (with inert callbacks) to expect every case by name.
 */
export function guestCases(start: () => Promise<void>, node: () => GuestNode): GuestCase[] {
  return [
    ...kernelCases,
    { name: 'guest node starts (dynalite, IMDS, boot ENI, pod ENI, VPC router)', run: start },
    // First: the pod ENI is still as EC2 hot-plugged it, and every later case depends on ADD bringing it up.
    ...eniCases(node),
    ...pluginCases(node),
    ...faultCases(node),
    {
      // Invariant 7 under real ipvlan: the plugin signed with its instance's session and stayed inside its policy.
      name: 'every plugin request was judged by the node policy and allowed',
      run: async () => {
        const { iam } = node();
        assert(iam.counts.allowed > 0, 'no plugin request reached the node policy');
        assert(iam.denials.length === 0, `denied: ${JSON.stringify(iam.denials.slice(0, 3))}`);
      },
    },
  ];
}
