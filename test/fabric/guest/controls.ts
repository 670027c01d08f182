/**
 * The fabric's controls, each judged by where the packets went, never by a missing answer alone (the VPC range is
 * a blackhole on the fabric, so a reply to an unassigned or unowned address could never come back anyway):
 * - an unassigned source: the echo requests must reach the fabric, be dropped by its source check, and never
 *   reach the pod on node 2;
 * - an address no ENI owns: the requests never reach the node that has the address configured;
 * - IMDS: whatever leaves a pod's netns toward 169.254.169.254 is marked (DSCP) in that netns and counted where
 *   the stand-in listens, and the URL carries a nonce, so a request SNATed to any other address still counts;
 *   a pod with the block lifted must be seen by both, also when it is SNATed to its sibling's address.
 */
import { randomUUID } from 'node:crypto';
import { type FabricNode, NAT_OUTSIDE6 } from '../topology.js';
import { type FabricImds, PROBE_PATH } from './imds.js';
import { ip, type ProbeRule, probeRule, ruleCounts } from './net.js';
import { addressOf, type Cell, type Family, get, type Pod, ping, short, urlHost, V4, V6 } from './probes.js';

/** One DSCP value per IMDS cell, so cells that run side by side count only their own pod's packets. */
export const IMDS_DSCP = { client: 11, noVeth: 12, lifted: 13 } as const;

const icmpFrom = (source: string, f: Family): string[] => ['-s', `${source}/${f.hostMask}`, '-p', f.icmp];

/** Packets dropped so far by the fabric's source/destination check: the DROP that ends every SRC-<port> chain. */
function sourceCheckDrops(f: Family): number {
  return ruleCounts(undefined, 'raw', f.v)
    .filter((r) => /^-A SRC6?-\S+ -j DROP$/.test(r.rule))
    .reduce((sum, r) => sum + r.packets, 0);
}

/** Runs `body` with probe rules in place, removing them whatever happens. */
async function withProbes<T>(make: readonly (() => ProbeRule)[], body: (p: ProbeRule[]) => Promise<T>): Promise<T> {
  const probes: ProbeRule[] = [];
  try {
    for (const m of make) probes.push(m());
    return await body(probes);
  } finally {
    for (const p of probes.reverse()) p.remove();
  }
}

/**
 * Node 2 counts the requests in two places: the pod's netns sees them in L2 and L3, where ipvlan hands the
 * packet straight to the pod's stack; in L3S they pass node 2's own netfilter hooks instead and never the pod's.
 */
export function unassignedSourceDropped(from: Pod, to: Pod, toNode: FabricNode, f: Family = V4): Cell {
  const unassigned = f.unassigned;
  const target = addressOf(to, f);
  const probe = (ns: string | undefined, match: string[]) => () => probeRule(ns, 'raw', 'PREROUTING', match, [], f.v);
  return {
    name: `negative control: a pod sending from an unassigned address is dropped${f.label}`,
    run: () =>
      withProbes(
        [
          probe(to.ns, icmpFrom(addressOf(from, f), f)),
          probe(toNode.name, [...icmpFrom(addressOf(from, f), f), '-d', `${target}/${f.hostMask}`]),
          probe(to.ns, icmpFrom(unassigned, f)),
          probe(toNode.name, [...icmpFrom(unassigned, f), '-d', `${target}/${f.hostMask}`]),
          probe(undefined, icmpFrom(unassigned, f)),
        ],
        async ([twinAtPod, twinAtNode, atPod, atNode, atFabric]) => {
          const twinAtTarget = { count: () => twinAtPod!.count() + twinAtNode!.count() };
          const atTarget = { count: () => atPod!.count() + atNode!.count() };
          if (!(await ping(from.ns, target))) return 'positive twin failed: no answer from the assigned address';
          if (twinAtTarget.count() === 0) return `the twin was answered, yet ${to.name}'s probe counted nothing`;
          const dropsBefore = sourceCheckDrops(f);
          // No duplicate address detection: a tentative address could not be sent from.
          ip(
            '-n',
            from.ns,
            'addr',
            'add',
            `${unassigned}/${f.hostMask}`,
            'dev',
            'eth0',
            ...(f.v === 6 ? ['nodad'] : []),
          );
          try {
            const answered = await ping(from.ns, target, ['-I', unassigned]);
            const reached = atTarget.count();
            const arrived = atFabric!.count();
            const dropped = sourceCheckDrops(f) - dropsBefore;
            if (reached > 0)
              return `${reached} echo request(s) from ${unassigned} reached ${to.name}: the fabric forwarded an unassigned source`;
            if (answered) return 'answered: the fabric forwarded an unassigned source (a bridge?)';
            if (arrived === 0) return `no request from ${unassigned} reached the fabric: the control proves nothing`;
            if (dropped < arrived)
              return `${arrived} request(s) reached the fabric, its source check dropped ${dropped}`;
            return undefined;
          } finally {
            ip('-n', from.ns, 'addr', 'del', `${unassigned}/${f.hostMask}`, 'dev', 'eth0');
          }
        },
      ),
  };
}

/**
 * TRAP_IP is configured on `holder`'s boot ENI, but no ENI owns it: a bridge would deliver it, the VPC must not.
 * Only node 2's side is asserted: a pod on-link with the address sends nothing at all (no one answers its ARP).
 */
export function unownedAddressGetsNothing(from: Pod, holder: FabricNode, f: Family = V4): Cell {
  const bootIp = f.v === 6 ? holder.bootIp6 : holder.bootIp;
  const toHolder = (address: string) => () =>
    probeRule(holder.name, 'raw', 'PREROUTING', ['-d', `${address}/${f.hostMask}`, '-p', f.icmp], [], f.v);
  return {
    name: `negative control: an address no ENI owns gets nothing${f.label}`,
    run: () =>
      withProbes([toHolder(bootIp), toHolder(f.trap)], async ([twinAtHolder, atHolder]) => {
        if (!(await ping(from.ns, bootIp))) return `positive twin failed: ${holder.name} unreachable`;
        if (twinAtHolder!.count() === 0) return `the twin was answered, yet ${holder.name}'s probe counted nothing`;
        const answered = await ping(from.ns, f.trap);
        const reached = atHolder!.count();
        if (reached > 0) return `${reached} request(s) to ${f.trap} reached ${holder.name}: the fabric delivered it`;
        return answered ? `${f.trap} answered: the fabric delivered it (a bridge?)` : undefined;
      }),
  };
}

interface ImdsProbe {
  readonly url: string;
  /** Packets the pod sent toward IMDS, those that arrived at the stand-in's address, requests bearing the nonce. */
  seen(): { sent: number; arrived: number; requests: string[] };
}

/** Marks the pod's packets toward IMDS in its own netns, and counts the marked ones where the stand-in listens. */
function withImdsProbe<T>(
  imds: FabricImds,
  pod: Pod,
  dscp: number,
  f: Family,
  body: (p: ImdsProbe) => Promise<T>,
): Promise<T> {
  const nonce = `${pod.name}-${randomUUID()}`;
  const mark = String(dscp);
  const to = ['-d', `${f.imds}/${f.hostMask}`];
  return withProbes(
    [
      () => probeRule(pod.ns, 'mangle', 'OUTPUT', to, ['-j', 'DSCP', '--set-dscp', mark], f.v),
      () => probeRule(undefined, 'mangle', 'INPUT', [...to, '-m', 'dscp', '--dscp', mark], [], f.v),
    ],
    ([sent, arrived]) =>
      body({
        url: `http://${urlHost(f.imds)}${PROBE_PATH}${nonce}`,
        seen: () => ({
          sent: sent!.count(),
          arrived: arrived!.count(),
          requests: imds.requests.filter((line) => line.includes(nonce)),
        }),
      }),
  );
}

/** `label` tells the cells of one configuration apart: the family's, or an `ipv6` pod's IPv4 egress. */
export function imdsBlocked(imds: FabricImds, pod: Pod, dscp: number, f: Family = V4, label = f.label): Cell {
  return {
    name: `pod → IMDS is blocked (${pod.name.endsWith('noveth') ? 'no host veth' : 'with host veth'})${label}`,
    run: () =>
      withImdsProbe(imds, pod, dscp, f, async (probe) => {
        const r = await get(pod.ns, probe.url, 15);
        const { sent, arrived, requests } = probe.seen();
        if (arrived > 0 || requests.length > 0)
          return `the pod reached IMDS: ${arrived} packet(s) at ${f.imds}, requests: ${requests.join('; ') || 'none'}`;
        if (r.body !== undefined) return `the pod got an answer from ${f.imds}: ${short(r.body)}`;
        // Not a failure: the host's drop behind the pod's route would stop them; said so the log shows which held.
        if (sent > 0) console.log(`note: ${pod.name} sent ${sent} packet(s) toward IMDS; none arrived`);
        return undefined;
      }),
  };
}

/**
 * The IMDS cells' oracle must see a pod that does reach the stand-in: the block (the pod's unreachable route) is
 * lifted in `pod`, then the request goes once as is and once SNATed in the pod to `sibling`'s address (which the
 * source check accepts on their shared ENI; the answer goes to the sibling, so only the packets can be seen).
 */
export function imdsLiftedIsSeen(imds: FabricImds, pod: Pod, sibling: Pod, f: Family = V4): Cell {
  const block = `${f.imds}/${f.hostMask}`;
  const iptables = f.v === 6 ? 'ip6tables' : 'iptables';
  return {
    name: `positive control: a pod with the IMDS block lifted is seen reaching it (also SNATed to another address)${f.label}`,
    async run() {
      if (sibling.eni.id !== pod.eni.id) return `${sibling.name} is not on ${pod.name}'s ENI`;
      ip('-n', pod.ns, 'route', 'del', 'unreachable', block);
      try {
        return await withImdsProbe(imds, pod, IMDS_DSCP.lifted, f, async (probe) => {
          const r = await get(pod.ns, probe.url, 15);
          const direct = probe.seen();
          if (r.body === undefined) return `no answer with the block lifted: ${r.why}`;
          if (direct.arrived === 0 || direct.requests.length === 0)
            return `answered, yet seen as ${direct.arrived} packet(s) and ${direct.requests.length} request(s)`;
          const to = addressOf(sibling, f);
          const snat = ['POSTROUTING', '-d', block, '-j', 'SNAT', '--to-source', to];
          ip('netns', 'exec', pod.ns, iptables, '-w', '5', '-t', 'nat', '-A', ...snat);
          try {
            await get(pod.ns, probe.url, 4);
            const snatted = probe.seen();
            return snatted.arrived > direct.arrived
              ? undefined
              : `SNATed to ${to}: ${snatted.sent - direct.sent} packet(s) sent, none seen at ${f.imds}`;
          } finally {
            ip('netns', 'exec', pod.ns, iptables, '-w', '5', '-t', 'nat', '-D', ...snat);
          }
        });
      } finally {
        ip('-n', pod.ns, 'route', 'replace', 'unreachable', block);
      }
    },
  };
}

/**
 * The egress-only internet gateway: a connection from the outside host to a pod's IPv6 address must reach the
 * gateway and end there. The twin, the pod's own connection out, shows the path works both ways and is the one
 * that would carry the answer.
 */
export function unsolicitedInboundRefused(pod: Pod): Cell {
  const target = addressOf(pod, V6);
  const toPod = ['-d', `${target}/128`, '-p', 'tcp', '--dport', '8080'];
  return {
    name: 'negative control: unsolicited IPv6 from outside stops at the egress-only internet gateway (IPv6)',
    run: () =>
      withProbes(
        [
          () => probeRule('nat', 'raw', 'PREROUTING', ['-i', 'out0', ...toPod], [], 6),
          () => probeRule(undefined, 'raw', 'PREROUTING', ['-i', 'fnat', ...toPod], [], 6),
        ],
        async ([atGateway, pastGateway]) => {
          const out = await get(pod.ns, `http://${urlHost(NAT_OUTSIDE6.outside)}:8080/`);
          if (!out.body?.includes('outside')) return `positive twin failed: the pod cannot reach outside (${out.why})`;
          const r = await get('outside', `http://${urlHost(target)}:8080/cgi-bin/who`, 8);
          const passed = pastGateway!.count();
          if (passed > 0) return `${passed} packet(s) from outside passed the egress-only gateway toward ${target}`;
          if (r.body !== undefined) return `answered from outside: ${short(r.body)}`;
          if (atGateway!.count() === 0) return 'nothing from outside reached the gateway: the control proves nothing';
          return undefined;
        },
      ),
  };
}
