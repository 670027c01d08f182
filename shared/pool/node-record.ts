import type { EniRecord, NodeRecord } from '../domain/node.js';
import { NodeNotFoundError, VersionConflictError } from '../errors.js';
import type { LeaseStore } from '../lease-store/port.js';

/** Optimistic-concurrency retries: the lifecycle Lambda and other pool runs write the same item. */
const MAX_NODE_WRITE_ATTEMPTS = 8;

/**
 * Applies `edit` to the node item's ENI records and writes it conditionally on the version read, re-reading
 * and re-applying on a conflict. Returns the written node, or undefined when the node item is gone (the
 * instance terminated meanwhile — nothing left to record). `edit` returning undefined means "no change".
 */
export async function editNodeEnis(
  store: LeaseStore,
  instanceArn: string,
  nowMs: number,
  edit: (enis: readonly EniRecord[], node: NodeRecord) => readonly EniRecord[] | undefined,
): Promise<NodeRecord | undefined> {
  return editNode(store, instanceArn, nowMs, (node) => {
    const enis = edit(node.enis, node);
    return enis && { ...node, enis };
  });
}

/** As editNodeEnis, for any field of the node item: `edit` returns the changed node, or undefined for none. */
export async function editNode(
  store: LeaseStore,
  instanceArn: string,
  nowMs: number,
  edit: (node: NodeRecord) => NodeRecord | undefined,
): Promise<NodeRecord | undefined> {
  for (let attempt = 1; ; attempt += 1) {
    const node = await store.getNode(instanceArn);
    if (!node) return undefined;
    const changed = edit(node);
    if (!changed) return node;
    try {
      return await store.updateNode({ ...changed, updatedAtMs: nowMs }, node.version);
    } catch (err) {
      if (err instanceof NodeNotFoundError) return undefined;
      if (!(err instanceof VersionConflictError) || attempt >= MAX_NODE_WRITE_ATTEMPTS) throw err;
    }
  }
}

/** The ENI record with these addresses and prefixes added (kept unique, in order). */
export function withAddresses(eni: EniRecord, ips: readonly string[], prefixes: readonly string[]): EniRecord {
  return {
    ...eni,
    addresses: [...new Set([...eni.addresses, ...ips])],
    prefixes: [...new Set([...eni.prefixes, ...prefixes])],
  };
}

/** The ENI record without these addresses and prefixes. */
export function withoutAddresses(eni: EniRecord, ips: readonly string[], prefixes: readonly string[]): EniRecord {
  const goneIps = new Set(ips);
  const gonePrefixes = new Set(prefixes);
  return {
    ...eni,
    addresses: eni.addresses.filter((a) => !goneIps.has(a)),
    prefixes: eni.prefixes.filter((p) => !gonePrefixes.has(p)),
  };
}
