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
import { type FabricNode, IMDS_IP, TRAP_IP, UNASSIGNED_SOURCE } from '../topology.js';
import { type FabricImds, PROBE_PATH } from './imds.js';
import { ip, type ProbeRule, probeRule, ruleCounts } from './net.js';
import { type Cell, get, type Pod, ping, short } from './probes.js';

/** One DSCP value per IMDS cell, so cells that run side by side count only their own pod's packets. */
export const IMDS_DSCP = { client: 11, noVeth: 12, lifted: 13 } as const;

const icmpFrom = (source: string): string[] => ['-s', `${source}/32`, '-p', 'icmp'];

/** Packets dropped so far by the fabric's source/destination check: the DROP that ends every SRC-<port> chain. */
function sourceCheckDrops(): number {
  return ruleCounts(undefined, 'raw')
    .filter((r) => /^-A SRC-\S+ -j DROP$/.test(r.rule))
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
export function unassignedSourceDropped(from: Pod, to: Pod, toNode: FabricNode): Cell {
  return {
    name: 'negative control: a pod sending from an unassigned address is dropped',
    run: () =>
      withProbes(
        [
          () => probeRule(to.ns, 'raw', 'PREROUTING', icmpFrom(from.ip)),
          () => probeRule(toNode.name, 'raw', 'PREROUTING', [...icmpFrom(from.ip), '-d', `${to.ip}/32`]),
          () => probeRule(to.ns, 'raw', 'PREROUTING', icmpFrom(UNASSIGNED_SOURCE)),
          () => probeRule(toNode.name, 'raw', 'PREROUTING', [...icmpFrom(UNASSIGNED_SOURCE), '-d', `${to.ip}/32`]),
          () => probeRule(undefined, 'raw', 'PREROUTING', icmpFrom(UNASSIGNED_SOURCE)),
        ],
        async ([twinAtPod, twinAtNode, atPod, atNode, atFabric]) => {
          const twinAtTarget = { count: () => twinAtPod!.count() + twinAtNode!.count() };
          const atTarget = { count: () => atPod!.count() + atNode!.count() };
          if (!(await ping(from.ns, to.ip))) return 'positive twin failed: no answer from the assigned address';
          if (twinAtTarget.count() === 0) return `the twin was answered, yet ${to.name}'s probe counted nothing`;
          const dropsBefore = sourceCheckDrops();
          ip('-n', from.ns, 'addr', 'add', `${UNASSIGNED_SOURCE}/32`, 'dev', 'eth0');
          try {
            const answered = await ping(from.ns, to.ip, ['-I', UNASSIGNED_SOURCE]);
            const reached = atTarget.count();
            const arrived = atFabric!.count();
            const dropped = sourceCheckDrops() - dropsBefore;
            if (reached > 0)
              return `${reached} echo request(s) from ${UNASSIGNED_SOURCE} reached ${to.name}: the fabric forwarded an unassigned source`;
            if (answered) return 'answered: the fabric forwarded an unassigned source (a bridge?)';
            if (arrived === 0)
              return `no request from ${UNASSIGNED_SOURCE} reached the fabric: the control proves nothing`;
            if (dropped < arrived)
              return `${arrived} request(s) reached the fabric, its source check dropped ${dropped}`;
            return undefined;
          } finally {
            ip('-n', from.ns, 'addr', 'del', `${UNASSIGNED_SOURCE}/32`, 'dev', 'eth0');
          }
        },
      ),
  };
}

/**
 * TRAP_IP is configured on `holder`'s boot ENI, but no ENI owns it: a bridge would deliver it, the VPC must not.
 * Only node 2's side is asserted: a pod on-link with the address sends nothing at all (no one answers its ARP).
 */
export function unownedAddressGetsNothing(from: Pod, holder: FabricNode): Cell {
  return {
    name: 'negative control: an address no ENI owns gets nothing',
    run: () =>
      withProbes(
        [
          () => probeRule(holder.name, 'raw', 'PREROUTING', ['-d', `${holder.bootIp}/32`, '-p', 'icmp']),
          () => probeRule(holder.name, 'raw', 'PREROUTING', ['-d', `${TRAP_IP}/32`, '-p', 'icmp']),
        ],
        async ([twinAtHolder, atHolder]) => {
          if (!(await ping(from.ns, holder.bootIp))) return `positive twin failed: ${holder.name} unreachable`;
          if (twinAtHolder!.count() === 0) return `the twin was answered, yet ${holder.name}'s probe counted nothing`;
          const answered = await ping(from.ns, TRAP_IP);
          const reached = atHolder!.count();
          if (reached > 0) return `${reached} request(s) to ${TRAP_IP} reached ${holder.name}: the fabric delivered it`;
          return answered ? `${TRAP_IP} answered: the fabric delivered it (a bridge?)` : undefined;
        },
      ),
  };
}

interface ImdsProbe {
  readonly url: string;
  /** Packets the pod sent toward IMDS, those that arrived at the stand-in's address, requests bearing the nonce. */
  seen(): { sent: number; arrived: number; requests: string[] };
}

/** Marks the pod's packets toward IMDS in its own netns, and counts the marked ones where the stand-in listens. */
function withImdsProbe<T>(imds: FabricImds, pod: Pod, dscp: number, body: (p: ImdsProbe) => Promise<T>): Promise<T> {
  const nonce = `${pod.name}-${randomUUID()}`;
  const mark = String(dscp);
  return withProbes(
    [
      () => probeRule(pod.ns, 'mangle', 'OUTPUT', ['-d', `${IMDS_IP}/32`], ['-j', 'DSCP', '--set-dscp', mark]),
      () => probeRule(undefined, 'mangle', 'INPUT', ['-d', `${IMDS_IP}/32`, '-m', 'dscp', '--dscp', mark]),
    ],
    ([sent, arrived]) =>
      body({
        url: `http://${IMDS_IP}${PROBE_PATH}${nonce}`,
        seen: () => ({
          sent: sent!.count(),
          arrived: arrived!.count(),
          requests: imds.requests.filter((line) => line.includes(nonce)),
        }),
      }),
  );
}

export function imdsBlocked(imds: FabricImds, pod: Pod, dscp: number): Cell {
  return {
    name: `pod → IMDS is blocked (${pod.name.endsWith('noveth') ? 'no host veth' : 'with host veth'})`,
    run: () =>
      withImdsProbe(imds, pod, dscp, async (probe) => {
        const r = await get(pod.ns, probe.url, 15);
        const { sent, arrived, requests } = probe.seen();
        if (arrived > 0 || requests.length > 0)
          return `the pod reached IMDS: ${arrived} packet(s) at ${IMDS_IP}, requests: ${requests.join('; ') || 'none'}`;
        if (r.body !== undefined) return `the pod got an answer from ${IMDS_IP}: ${short(r.body)}`;
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
export function imdsLiftedIsSeen(imds: FabricImds, pod: Pod, sibling: Pod): Cell {
  return {
    name: 'positive control: a pod with the IMDS block lifted is seen reaching it (also SNATed to another address)',
    async run() {
      if (sibling.eni.id !== pod.eni.id) return `${sibling.name} is not on ${pod.name}'s ENI`;
      ip('-n', pod.ns, 'route', 'del', 'unreachable', `${IMDS_IP}/32`);
      try {
        return await withImdsProbe(imds, pod, IMDS_DSCP.lifted, async (probe) => {
          const r = await get(pod.ns, probe.url, 15);
          const direct = probe.seen();
          if (r.body === undefined) return `no answer with the block lifted: ${r.why}`;
          if (direct.arrived === 0 || direct.requests.length === 0)
            return `answered, yet seen as ${direct.arrived} packet(s) and ${direct.requests.length} request(s)`;
          const snat = ['POSTROUTING', '-d', `${IMDS_IP}/32`, '-j', 'SNAT', '--to-source', sibling.ip];
          ip('netns', 'exec', pod.ns, 'iptables', '-w', '5', '-t', 'nat', '-A', ...snat);
          try {
            await get(pod.ns, probe.url, 4);
            const snatted = probe.seen();
            return snatted.arrived > direct.arrived
              ? undefined
              : `SNATed to ${sibling.ip}: ${snatted.sent - direct.sent} packet(s) sent, none seen at ${IMDS_IP}`;
          } finally {
            ip('netns', 'exec', pod.ns, 'iptables', '-w', '5', '-t', 'nat', '-D', ...snat);
          }
        });
      } finally {
        ip('-n', pod.ns, 'route', 'replace', 'unreachable', `${IMDS_IP}/32`);
      }
    },
  };
}
