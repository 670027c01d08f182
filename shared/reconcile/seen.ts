import { createHash } from 'node:crypto';
import type { Ec2Eni } from '../ec2/port.js';
import type { NodeRef } from '../lease-store/port.js';

/**
 * What the reconciler last found clean on the nodes of one node-index shard: instance ARN → the node's digest. Kept in the schedules' cursor store, one state per shard (`seenStateName`), so a
 * cycle reads 16 small items, not one per node.
 */
export interface SeenState {
  /** The full cycle that last started this shard's entries afresh (entries of gone nodes go then). */
  readonly fullCycle: number;
  readonly entries: Record<string, string>;
}

export function seenStateName(shard: number): string {
  return `drift-seen#${shard}`;
}

/**
 * A node's digest: its item's version (every control-plane change to its ENIs or phase bumps it) and what
 * EC2 shows attached to it (ENI ids, device indexes, addresses, prefixes, IPv6 /80s). Leases are not in it on purpose:
 * the control plane changes a node's lease set only together with an Assign or Unassign (or a node-item
 * write), so an unchanged digest means nothing the drift check judges has changed on our side or EC2's.
 */
export function nodeDigest(ref: Pick<NodeRef, 'version'>, attached: readonly Ec2Eni[]): string {
  const enis = [...attached]
    .sort((a, b) => a.eniId.localeCompare(b.eniId))
    .map((e) =>
      [
        e.eniId,
        e.attachment?.deviceIndex ?? '-',
        e.attachment?.instanceId ?? '-',
        [...e.secondaryIps].sort().join(','),
        [...e.prefixes].sort().join(','),
        // IPv6 only when there is some, so an IPv4 node's digest stays what it was.
        ...(e.ipv6Addresses?.length || e.ipv6Prefixes?.length
          ? [[...(e.ipv6Addresses ?? []), ...(e.ipv6Prefixes ?? [])].sort().join(',')]
          : []),
      ].join('/'),
    );
  return createHash('sha256')
    .update(`${ref.version}|${enis.join(';')}`)
    .digest('base64url')
    .slice(0, 12);
}
