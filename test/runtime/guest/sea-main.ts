/**
 * In-guest suite for the single executable (bundled and run with plain node inside the ipvlan VM): the installed
 * executable, with every Node binary masked, installs itself, answers VERSION, and runs ADD and DEL with real
 * ipvlan (L2) against the guest's local cloud. Results go to the shared folder like the main guest suite's.
 */
import { existsSync, mkdirSync, readdirSync, realpathSync } from 'node:fs';
import { join } from 'node:path';
import { runWithoutNode } from '../../support/plugin-process.js';
import { type GuestCaseList, guestMain } from '../../vm/guest/guest-main.js';
import { ip } from '../../vm/guest/guest-node.js';

const nodes = ['/usr/bin/node', '/usr/local/bin/node', realpathSync(process.execPath)].filter((p) => existsSync(p));
const withoutNode = (file: string, args: string[], env: Record<string, string>, stdin: string) =>
  runWithoutNode(nodes, file, args, env, stdin);

function check(ok: boolean, what: string): void {
  if (!ok) throw new Error(what);
}

const binDir = '/tmp/vpc-lease-sea/bin';
const installed = join(binDir, 'vpc-lease-cni');

const SEA_GUEST_CASES = [
  'sea: node is masked in the namespace the executable runs in',
  'sea: installs itself and answers VERSION with no Node.js',
  'sea: ADD and DEL with real ipvlan L2 and no Node.js',
] as const;

/** `sea` is the built single executable; the guest node runs the copy it installs. */
const seaCases: GuestCaseList = (start, guestNode, sea) => [
  {
    name: SEA_GUEST_CASES[0],
    run: async () => {
      const r = await withoutNode('/usr/bin/env', ['node', '-e', 'process.exit(0)'], {}, '');
      check(r.code !== 0, `node still ran: ${r.code}`);
      check((await withoutNode('/bin/true', [], {}, '')).code === 0, 'the wrapper itself fails');
    },
  },
  {
    name: SEA_GUEST_CASES[1],
    run: async () => {
      mkdirSync(binDir, { recursive: true });
      const r = await withoutNode(
        sea,
        [
          'install',
          '--no-wait-ready',
          '--bin-dir',
          binDir,
          '--conf-dir',
          '/tmp/vpc-lease-sea/net.d',
          '--service-cidrs',
          '10.96.0.0/16',
        ],
        {},
        '',
      );
      check(r.code === 0, `install: ${r.code} ${r.stderr}`);
      const files = readdirSync(binDir).sort().join(',');
      check(files === 'netlink.node,vpc-lease-cni,vpc-lease-cni-plugin,vpc_lease_netns.node', `installed ${files}`);
      const v = await withoutNode(installed, [], { CNI_COMMAND: 'VERSION' }, '{}');
      check(v.code === 0 && v.json?.['cniVersion'] === '1.1.0', `VERSION: ${v.code} ${v.stdout} ${v.stderr}`);
    },
  },
  {
    name: SEA_GUEST_CASES[2],
    run: async () => {
      await start(installed);
      const node = guestNode();
      const pod = node.addNetns();
      // Test mode: the netconf names the guest's local IMDS and DynamoDB endpoints.
      const env = (command: string): Record<string, string> => ({
        VPC_LEASE_TEST_MODE: '1',
        CNI_COMMAND: command,
        CNI_CONTAINERID: 'sea-vm-0',
        CNI_IFNAME: 'eth0',
        CNI_NETNS: `/var/run/netns/${pod}`,
        CNI_PATH: binDir,
      });
      // The ipvlan link alone: the host veth and its connmark rules are the main guest suite's subject.
      const { serviceCidrs: _routedThroughHostVeth, ...netconf } = node.netconf('l2', { hostVeth: false });
      const conf = JSON.stringify(netconf);
      const add = await withoutNode(installed, [], env('ADD'), conf);
      check(add.code === 0, `ADD: ${add.code} ${add.stdout} ${add.stderr}`);
      const address = (add.json?.['ips'] as { address: string }[] | undefined)?.[0]?.address ?? '';
      const link = ip('-n', pod, '-d', 'link', 'show', 'eth0');
      check(link.includes('ipvlan') && link.includes('mode l2'), `not an ipvlan l2 link: ${link}`);
      check(ip('-n', pod, 'addr', 'show', 'eth0').includes(address), `eth0 lacks ${address}`);
      check((await node.claimed()).length === 1, 'the lease is not CLAIMED');
      const del = await withoutNode(installed, [], env('DEL'), conf);
      check(del.code === 0, `DEL: ${del.code} ${del.stdout} ${del.stderr}`);
      check((await node.claimed()).length === 0, 'a lease stayed CLAIMED after DEL');
    },
  },
];

await guestMain(seaCases);
