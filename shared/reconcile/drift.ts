import type { Lease } from '../domain/lease.js';
import { addressInPrefix, addressOnEni } from '../domain/lease-address.js';
import type { NodeRecord } from '../domain/node.js';
import type { Ec2Eni } from '../ec2/port.js';
import { eniInstanceOf } from '../ec2/tags.js';
import { isInstanceLive } from './gc-plan.js';

/**
 * Disagreements between EC2 and the lease table (DESIGN.md invariants 2 and 3, seen from the outside):
 * - lease-without-address: a lease that is not RELEASING names an address its ENI does not have — a pod
 *   could claim an address that does not route;
 * - address-without-lease: a pod ENI has a secondary address (or a whole /28) no lease names — an address
 *   lost to the pool until someone adopts or unassigns it; an IPv6 /80 with no lease inside it;
 * - eni-without-node: an attached ENI of this cluster on an instance with no node item;
 * - eni-detached: a node records an ENI as attached that EC2 reports as not attached to it.
 */
export type DriftKind = 'lease-without-address' | 'address-without-lease' | 'eni-without-node' | 'eni-detached';

export interface DriftItem {
  readonly kind: DriftKind;
  readonly instanceId: string;
  readonly eniId: string;
  /** The address or prefix concerned, when there is one. */
  readonly address?: string;
}

export interface DriftInput {
  readonly nowMs: number;
  /**
   * Leases written this recently are not judged: the EC2 snapshot may predate the Assign that preceded them
   * (the snapshot and the table are read at slightly different times, and EC2 reads are eventually consistent).
   */
  readonly graceMs: number;
  readonly nodes: readonly NodeRecord[];
  readonly leasesByNode: ReadonlyMap<string, readonly Lease[]>;
  /** This cluster's ENIs. */
  readonly enis: readonly Ec2Eni[];
  readonly instanceStates: ReadonlyMap<string, string>;
}

/** Pure: compares one snapshot of EC2 with one of the table. Only READY nodes of live instances are judged. */
export function detectDrift(input: DriftInput): DriftItem[] {
  const out: DriftItem[] = [];
  const enisByInstance = new Map<string, Ec2Eni[]>();
  const eniById = new Map(input.enis.map((e) => [e.eniId, e]));
  for (const eni of input.enis) {
    const instanceId = eni.attachment?.instanceId;
    if (!instanceId) continue;
    enisByInstance.set(instanceId, [...(enisByInstance.get(instanceId) ?? []), eni]);
  }
  const nodeInstances = new Set(input.nodes.map((n) => n.instanceId));

  for (const [instanceId, enis] of enisByInstance) {
    if (nodeInstances.has(instanceId) || !isInstanceLive(input.instanceStates.get(instanceId))) continue;
    for (const eni of enis) out.push({ kind: 'eni-without-node', instanceId, eniId: eni.eniId });
  }

  for (const node of input.nodes) {
    if (node.phase !== 'READY' || !isInstanceLive(input.instanceStates.get(node.instanceId))) continue;
    for (const record of node.enis) {
      if (!record.eniId || (record.step !== 'LEASED' && record.step !== 'ATTACHED')) continue;
      const eni = eniById.get(record.eniId);
      if (!eni || eni.attachment?.instanceId !== node.instanceId)
        out.push({ kind: 'eni-detached', instanceId: node.instanceId, eniId: record.eniId });
    }
    const leases = input.leasesByNode.get(node.instanceArn) ?? [];
    const attached = (enisByInstance.get(node.instanceId) ?? []).filter(
      // Launch-template ENIs are the node's by attachment; the boot ENI (also template-tagged) holds no pod address.
      (e) => eniInstanceOf(e) === node.instanceId && e.attachment?.deviceIndex !== 0,
    );
    const leased = new Set(leases.map((l) => l.ip));
    for (const lease of leases) {
      if (lease.state === 'RELEASING' || input.nowMs - lease.createdAtMs < input.graceMs) continue;
      const eni = eniById.get(lease.eniId);
      // An ENI missing from the snapshot is reported as eni-detached above (when recorded), not per address.
      if (!eni) continue;
      const present = addressOnEni(eni, lease.ip);
      if (!present)
        out.push({ kind: 'lease-without-address', instanceId: node.instanceId, eniId: eni.eniId, address: lease.ip });
    }
    for (const eni of attached) {
      for (const ip of eni.secondaryIps)
        if (!leased.has(ip))
          out.push({ kind: 'address-without-lease', instanceId: node.instanceId, eniId: eni.eniId, address: ip });
      // Prefix mode caps leases per node, so a /28 (and always a /80) is partly unleased by design; one with no
      // lease at all is lost.
      for (const prefix of [...eni.prefixes, ...(eni.ipv6Prefixes ?? [])])
        if (!leases.some((l) => addressInPrefix(prefix, l.ip)))
          out.push({ kind: 'address-without-lease', instanceId: node.instanceId, eniId: eni.eniId, address: prefix });
    }
  }
  return out;
}
