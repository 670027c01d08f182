/**
 * The controls run with their defence removed: each control cell must FAIL, for the reason the missing defence
 * causes, while its defence is lifted, and pass again once it is back. Without this a control that cannot fail
 * (a missing echo that the blackhole would explain anyway) looks exactly like one that works. Only this guest's
 * own rules are lifted (the fabric's source check and delivery table, the pod's IMDS route): no product hook.
 */
import type { CellResult } from '../results.js';
import { type FabricNode, IMDS_IP, TRAP_IP } from '../topology.js';
import { IMDS_DSCP, imdsBlocked, unassignedSourceDropped, unownedAddressGetsNothing } from './controls.js';
import type { FabricImds } from './imds.js';
import { cmd, ip } from './net.js';
import type { Cell, NodePods, Pod } from './probes.js';

export interface Defended {
  /** The defence the control exists to prove, as the output names it. */
  readonly defence: string;
  readonly cell: Cell;
  /** What the cell must say while the defence is lifted: the failure the defence prevents, not any failure. */
  readonly failsWith: RegExp;
  /** Removes the defence and returns its undo. */
  lift(): () => void;
}

/** The fabric's source/destination check: the jump from raw PREROUTING into every port's SRC-<port> chain. */
function liftSourceCheck(nodes: readonly FabricNode[]): () => void {
  const jumps = nodes.flatMap((n) => n.enis.map((e) => ['PREROUTING', '-i', e.port, '-j', `SRC-${e.port}`]));
  for (const j of jumps) cmd('iptables', '-w', '5', '-t', 'raw', '-D', ...j);
  return () => {
    for (const j of jumps) cmd('iptables', '-w', '5', '-t', 'raw', '-A', ...j);
  };
}

/** Delivery only to the owner: a route (and MAC) for TRAP_IP toward the node that has it configured, as a bridge. */
function liftOwnerDelivery(holder: FabricNode): () => void {
  const boot = holder.enis[0]!;
  ip('route', 'add', `${TRAP_IP}/32`, 'dev', boot.port);
  ip('neigh', 'replace', TRAP_IP, 'lladdr', boot.mac, 'dev', boot.port, 'nud', 'permanent');
  return () => {
    ip('neigh', 'del', TRAP_IP, 'dev', boot.port);
    ip('route', 'del', `${TRAP_IP}/32`, 'dev', boot.port);
  };
}

/** The plugin's IMDS block: the unreachable route in the pod's own table. */
function liftImdsBlock(pod: Pod): () => void {
  ip('-n', pod.ns, 'route', 'del', 'unreachable', `${IMDS_IP}/32`);
  return () => void ip('-n', pod.ns, 'route', 'replace', 'unreachable', `${IMDS_IP}/32`);
}

export function defendedControls(
  imds: FabricImds,
  nodes: readonly FabricNode[],
  p: Record<string, NodePods>,
): Defended[] {
  const n1 = p['node1']!;
  const node2 = nodes[1]!;
  return [
    {
      defence: 'source/destination check (SRC-* chains)',
      cell: unassignedSourceDropped(n1.client, p['node2']!.client, node2),
      failsWith: /reached node2|answered: the fabric forwarded/,
      lift: () => liftSourceCheck(nodes),
    },
    {
      defence: 'delivery only to the owning ENI',
      cell: unownedAddressGetsNothing(n1.client, node2),
      failsWith: /reached node2|answered: the fabric delivered/,
      lift: () => liftOwnerDelivery(node2),
    },
    ...[
      { pod: n1.client, dscp: IMDS_DSCP.client },
      { pod: n1.noVeth, dscp: IMDS_DSCP.noVeth },
    ].map(({ pod, dscp }) => ({
      defence: `IMDS unreachable in ${pod.name}'s netns`,
      cell: imdsBlocked(imds, pod, dscp),
      failsWith: /the pod reached IMDS|got an answer/,
      lift: () => liftImdsBlock(pod),
    })),
  ];
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
