/**
 * The controls run with their defence removed: each control cell must FAIL, for the reason the missing defence
 * causes, while its defence is lifted, and pass again once it is back. Without this a control that cannot fail
 * (a missing echo that the blackhole would explain anyway) looks exactly like one that works. Only this guest's
 * own rules are lifted (the fabric's source check and delivery table, the pod's IMDS route): no product hook.
 */
import { hasV4, hasV6, type PodFamily } from '../configs.js';
import type { CellResult } from '../results.js';
import type { FabricNode } from '../topology.js';
import {
  IMDS_DSCP,
  imdsBlocked,
  unassignedSourceDropped,
  unownedAddressGetsNothing,
  unsolicitedInboundRefused,
} from './controls.js';
import type { FabricImds } from './imds.js';
import { cmd, type IpVersion, ip } from './net.js';
import { EIGW_CHAIN } from './net6.js';
import { type Cell, type Family, type NodePods, type Pod, V4, V6 } from './probes.js';

export interface Defended {
  /** The defence the control exists to prove, as the output names it. */
  readonly defence: string;
  readonly cell: Cell;
  /** What the cell must say while the defence is lifted: the failure the defence prevents, not any failure. */
  readonly failsWith: RegExp;
  /** Removes the defence and returns its undo. */
  lift(): () => void;
}

const iptablesOf = (v: IpVersion): string => (v === 6 ? 'ip6tables' : 'iptables');

/** The fabric's source/destination check: the jump from raw PREROUTING into every port's SRC-<port> chain. */
function liftSourceCheck(nodes: readonly FabricNode[], f: Family): () => void {
  const prefix = f.v === 6 ? 'SRC6' : 'SRC';
  const jumps = nodes.flatMap((n) => n.enis.map((e) => ['PREROUTING', '-i', e.port, '-j', `${prefix}-${e.port}`]));
  for (const j of jumps) cmd(iptablesOf(f.v), '-w', '5', '-t', 'raw', '-D', ...j);
  return () => {
    for (const j of jumps) cmd(iptablesOf(f.v), '-w', '5', '-t', 'raw', '-A', ...j);
  };
}

/** Delivery only to the owner: a route (and MAC) for the trap address toward the node that has it, as a bridge. */
function liftOwnerDelivery(holder: FabricNode, f: Family): () => void {
  const boot = holder.enis[0]!;
  ip('route', 'add', `${f.trap}/${f.hostMask}`, 'dev', boot.port);
  ip('neigh', 'replace', f.trap, 'lladdr', boot.mac, 'dev', boot.port, 'nud', 'permanent');
  return () => {
    ip('neigh', 'del', f.trap, 'dev', boot.port);
    ip('route', 'del', `${f.trap}/${f.hostMask}`, 'dev', boot.port);
  };
}

/** The plugin's IMDS block: the unreachable route in the pod's own table. */
function liftImdsBlock(pod: Pod, f: Family): () => void {
  ip('-n', pod.ns, 'route', 'del', 'unreachable', `${f.imds}/${f.hostMask}`);
  return () => void ip('-n', pod.ns, 'route', 'replace', 'unreachable', `${f.imds}/${f.hostMask}`);
}

/**
 * An `ipv6` pod's IPv4 egress keeps it from IMDS twice: the pod's own unreachable route, and the node's link-local
 * drop in VPC-LEASE-EGRESS4 (egress4.ts). Either alone holds, so only both lifted can show the control fail.
 */
function liftEgressImdsBlocks(pod: Pod, node: string): () => void {
  const undoRoute = liftImdsBlock(pod, V4);
  const drops = ip('netns', 'exec', node, 'iptables', '-w', '5', '-S', 'VPC-LEASE-EGRESS4')
    .split('\n')
    .filter((l) => l.startsWith('-A ') && l.includes('169.254.0.0/16') && l.endsWith('-j DROP'));
  for (const d of drops) ip('netns', 'exec', node, 'iptables', '-w', '5', ...d.replace(/^-A /, '-D ').split(' '));
  return () => {
    for (const d of drops) ip('netns', 'exec', node, 'iptables', '-w', '5', ...d.replace(/^-A /, '-I ').split(' '));
    undoRoute();
  };
}

/** The egress-only internet gateway's drop: everything from outside is let in while it is lifted. */
function liftEgressOnlyGateway(): () => void {
  const rule = ['-i', 'out0', '-j', 'ACCEPT'];
  ip('netns', 'exec', 'nat', 'ip6tables', '-w', '5', '-I', EIGW_CHAIN, '1', ...rule);
  return () => void ip('netns', 'exec', 'nat', 'ip6tables', '-w', '5', '-D', EIGW_CHAIN, ...rule);
}

/** A family's controls: the source check, delivery to the owner, and the IMDS block of both kinds of pod. */
function familyControls(
  imds: FabricImds,
  nodes: readonly FabricNode[],
  p: Record<string, NodePods>,
  f: Family,
): Defended[] {
  const n1 = p['node1']!;
  const node2 = nodes[1]!;
  const v6 = f.v === 6;
  return [
    {
      defence: `source/destination check (${v6 ? 'SRC6' : 'SRC'}-* chains)`,
      cell: unassignedSourceDropped(n1.client, p['node2']!.client, node2, f),
      failsWith: /reached node2|answered: the fabric forwarded/,
      lift: () => liftSourceCheck(nodes, f),
    },
    {
      defence: `delivery only to the owning ENI${f.label}`,
      cell: unownedAddressGetsNothing(n1.client, node2, f),
      failsWith: /reached node2|answered: the fabric delivered/,
      lift: () => liftOwnerDelivery(node2, f),
    },
    ...[
      { pod: n1.client, dscp: IMDS_DSCP.client },
      { pod: n1.noVeth, dscp: IMDS_DSCP.noVeth },
    ].map(({ pod, dscp }) => ({
      defence: `IMDS${v6 ? ' (IPv6)' : ''} unreachable in ${pod.name}'s netns`,
      cell: imdsBlocked(imds, pod, dscp, f),
      failsWith: /the pod reached IMDS|got an answer/,
      lift: () => liftImdsBlock(pod, f),
    })),
  ];
}

export function defendedControls(
  imds: FabricImds,
  nodes: readonly FabricNode[],
  p: Record<string, NodePods>,
  family: PodFamily = 'ipv4',
): Defended[] {
  const n1 = p['node1']!;
  const out: Defended[] = [];
  if (hasV4(family)) out.push(...familyControls(imds, nodes, p, V4));
  if (hasV6(family))
    out.push(...familyControls(imds, nodes, p, V6), {
      defence: `the egress-only internet gateway's drop (${EIGW_CHAIN} chain)`,
      cell: unsolicitedInboundRefused(n1.client),
      failsWith: /passed the egress-only gateway|answered from outside/,
      lift: liftEgressOnlyGateway,
    });
  if (family === 'ipv6')
    out.push({
      defence: `IMDS unreachable over ${n1.client.name}'s IPv4 egress (its route and the node's link-local drop)`,
      cell: imdsBlocked(imds, n1.client, IMDS_DSCP.client, V4, ' (IPv4 egress)'),
      failsWith: /the pod reached IMDS|got an answer/,
      lift: () => liftEgressImdsBlocks(n1.client, 'node1'),
    });
  return out;
}

/**
 * The matrix of one configuration with its controls: first each control with its defence removed, one at a time
 * (a lifted defence is fabric-wide), where `without <defence>: fails` is ok when the cell failed for the expected
 * reason; then the matrix, which holds the same control cells, with every defence back. Their matrix results are
 * the `with <defence>: passes` rows: the restore is proven by the run every configuration makes anyway.
 */
export async function runWithControls(
  config: string,
  matrix: readonly Cell[],
  controls: readonly Defended[],
  out: CellResult[],
  runCells: (config: string, cells: readonly Cell[], out: CellResult[]) => Promise<void>,
): Promise<void> {
  for (const c of controls) {
    const start = Date.now();
    const undo = c.lift();
    let why: string | undefined;
    try {
      why = await c.cell.run();
    } catch (err) {
      why = err instanceof Error ? err.message : String(err);
    } finally {
      undo();
    }
    const ok = why !== undefined && c.failsWith.test(why);
    const detail =
      why === undefined
        ? 'passed with its defence removed: the control cannot fail'
        : ok
          ? `failed as it must: ${why}`
          : `failed, but not for the missing defence: ${why}`;
    const cell = `control without ${c.defence}: ${c.cell.name} fails`;
    console.log(`${ok ? 'ok  ' : 'FAIL'} ${config} | ${cell} — ${detail}`);
    out.push({ config, cell, ok, detail, ms: Date.now() - start });
  }
  const missing = controls.filter((c) => !matrix.includes(c.cell));
  if (missing.length > 0) throw new Error(`controls outside the matrix: ${missing.map((c) => c.cell.name).join(', ')}`);
  const from = out.length;
  await runCells(config, matrix, out);
  for (const c of controls) {
    const ran = out.slice(from).find((r) => r.config === config && r.cell === c.cell.name);
    out.push({
      config,
      cell: `control with ${c.defence}: ${c.cell.name} passes (its matrix run, after the restore)`,
      ok: ran?.ok === true,
      detail: ran ? ran.detail : 'the matrix did not run it',
      ms: 0,
    });
  }
}
