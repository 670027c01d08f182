import { readFileSync } from 'node:fs';
import { EC2_ENI_MTU } from '../../../node/datapath/eni-link.js';
import { assert, GATEWAY, type GuestNode, ip, ok, ping } from './guest-node.js';
import type { GuestCase } from './runner.js';

/**
 * ENI link ownership on real ipvlan (issue 26). They run before every other plugin case, while eni1 is still as
 * EC2 hot-plugs an ENI: down, no address, MTU 1500. The negative control runs the built plugin with its up step
 * switched off (VPC_LEASE_TEST_SKIP_ENI_UP, test mode only) and shows its pod cut off; then parallel ADDs bring
 * the ENI up once, at EC2's MTU, and no DEL takes it down.
 */
interface LinkJson {
  readonly mtu: number;
  readonly flags: readonly string[];
  readonly addr_info?: readonly { readonly family: string }[];
}

function link(netns: string | undefined, name: string): LinkJson {
  const args = [...(netns ? ['-n', netns] : []), '-j', 'addr', 'show', name];
  return (JSON.parse(ip(...args)) as LinkJson[])[0]!;
}

const isUp = (l: LinkJson): boolean => l.flags.includes('UP');
const hasCarrier = (l: LinkJson): boolean => l.flags.includes('LOWER_UP') && !l.flags.includes('NO-CARRIER');
const describeLink = (l: LinkJson): string => `mtu ${l.mtu} <${l.flags.join(',')}>`;

export function eniCases(node: () => GuestNode): GuestCase[] {
  const conf = (n: GuestNode) => n.netconf('l2');
  return [
    {
      name: 'eni link: the pod ENI arrives as EC2 hot-plugs it (down, MTU 1500, no IPv4 address)',
      async run(): Promise<void> {
        const eni = link(undefined, 'eni1');
        assert(!isUp(eni) && eni.mtu === 1500, `eni1 should arrive down at 1500: ${describeLink(eni)}`);
        assert(!(eni.addr_info ?? []).some((a) => a.family === 'inet'), 'eni1 should carry no IPv4 address');
      },
    },
    {
      name: 'eni link: negative control, without the up step the pod has no carrier and cannot reach the gateway',
      async run(): Promise<void> {
        const n = node();
        const netns = n.addNetns();
        const pod = { containerId: 'eni-skip', netns, env: { VPC_LEASE_TEST_SKIP_ENI_UP: '1' } };
        const add = await n.run('ADD', pod, conf(n));
        // The kernel makes an ipvlan link on a down master: ADD "succeeds", and the pod is cut off.
        ok(add, 'ADD without the up step');
        const eth0 = link(netns, 'eth0');
        assert(!hasCarrier(eth0), `the pod should have no carrier: ${describeLink(eth0)}`);
        assert(!ping(netns, GATEWAY, 2), 'the pod reached the gateway through a down ENI');
        assert(!isUp(link(undefined, 'eni1')), 'eni1 came up without the plugin');
        ok(await n.run('DEL', pod, conf(n)), 'DEL');
      },
    },
    {
      name: 'eni link: parallel ADDs bring the down ENI up at 9001; pods reach the gateway; no DEL takes it down',
      async run(): Promise<void> {
        const n = node();
        const pods = [0, 1, 2].map((i) => ({ containerId: `eni-par-${i}`, netns: n.addNetns() }));
        const adds = await Promise.all(pods.map((p) => n.run('ADD', p, conf(n))));
        for (const [i, add] of adds.entries()) ok(add, `ADD of pod ${i}`);
        const eni = link(undefined, 'eni1');
        assert(isUp(eni) && eni.mtu === EC2_ENI_MTU, `eni1 should be up at ${EC2_ENI_MTU}: ${describeLink(eni)}`);
        const acceptRa = readFileSync('/proc/sys/net/ipv6/conf/eni1/accept_ra', 'utf8').trim();
        assert(acceptRa === '0', `eni1 accepts router advertisements (accept_ra ${acceptRa})`);
        for (const p of pods) {
          const eth0 = link(p.netns, 'eth0');
          assert(hasCarrier(eth0) && eth0.mtu === EC2_ENI_MTU, `${p.netns}: eth0 is ${describeLink(eth0)}`);
          assert(ping(p.netns, GATEWAY), `${p.netns} cannot reach the gateway`);
        }
        for (const p of pods.slice(1)) ok(await n.run('DEL', p, conf(n)), `DEL of ${p.containerId}`);
        assert(isUp(link(undefined, 'eni1')), 'a DEL took eni1 down while a pod still used it');
        assert(ping(pods[0]!.netns, GATEWAY), 'the remaining pod lost the gateway after the other DELs');
        ok(await n.run('DEL', pods[0]!, conf(n)), 'the last DEL');
        assert(isUp(link(undefined, 'eni1')), 'the last DEL took eni1 down');
      },
    },
  ];
}
