import type { AttributeValue } from '@aws-sdk/client-dynamodb';
import { LEASE_STATES, type Lease, type LeaseHolder, type LeaseState, type NewLease } from '../domain/lease.js';
import type { NodeRecord } from '../domain/node.js';
import { ValidationError } from '../errors.js';
import { fromAttr, num as n, type Plain, str as s, toAttr } from './attribute-value.js';
import type { NodeRef } from './port.js';
import {
  CLAIMABLE_INDEX,
  LEASE_SORT_PREFIX,
  leaseSortKey,
  NODE_INDEX,
  NODE_SORT_KEY,
  nodeIndexShard,
  TABLE_KEYS,
} from './table.js';

export type Item = Record<string, AttributeValue>;

/**
 * Attribute names of the items. Short because every read and write is billed by item size and a node's
 * partition is queried on every pod start; the mapping lives here and nowhere else.
 *
 * Lease item life cycle of the optional attributes:
 * - holder (hc/hi/hn/pn/pp/hnw) is present exactly while CLAIMED (hnw, the CNI network name, only on leases
 *   claimed since it was added: GC releases only its own network's attachments);
 * - cAt (the claimable index's sort key, and reusableAtMs) exactly while FREE or COOLDOWN;
 * - cl (claimedAtMs) is the last claim, rl (releasedAtMs) the last time the lease left use (a holder's
 *   release, or the start of the release handshake) — both kept as history.
 */
export const A = {
  pk: TABLE_KEYS.partitionKey,
  sk: TABLE_KEYS.sortKey,
  cAt: CLAIMABLE_INDEX.sortKey,
  version: 'v',
  state: 'st',
  eniId: 'eni',
  deviceIndex: 'di',
  mac: 'mac',
  subnetId: 'sn',
  subnetCidr: 'cidr',
  gateway: 'gw',
  prefix: 'pfx',
  containerId: 'hc',
  ifName: 'hi',
  netns: 'hn',
  podNamespace: 'pn',
  podName: 'pp',
  network: 'hnw',
  createdAt: 'ca',
  claimedAt: 'cl',
  releasedAt: 'rl',
  // Node item only. Its version is `nv`, not the lease's `v`: a node may write `v` (its claims bump it), and
  // no attribute the control plane reads from the node item may be one a node can write.
  nodeVersion: 'nv',
  instanceId: 'iid',
  instanceType: 'ity',
  availabilityZone: 'az',
  lifecycle: 'lc',
  limits: 'lim',
  podSubnetIds: 'psn',
  phase: 'ph',
  ipFamily: 'ipf',
  failureReason: 'fr',
  subnetRefusals: 'sfr',
  enis: 'enis',
  maxPods: 'mp',
  updatedAt: 'ua',
  goneSeenAt: 'gs',
  hookCompletedAt: 'hca',
  // The node index's key: written by encodeNode only, never in NODE_WRITABLE_ATTRS (see NODE_INDEX).
  nodeShard: NODE_INDEX.partitionKey,
  // The pass marker's owner and expiry: control-plane only, never in NODE_WRITABLE_ATTRS.
  passOwner: 'po',
  passUntil: 'pu',
} as const;

export const HOLDER_ATTRS = [A.containerId, A.ifName, A.netns, A.podNamespace, A.podName, A.network] as const;

/** The holder's CNI network name (GC releases only its own network's leases); written by the node's claim. */
export const HOLDER_NETWORK_ATTR = A.network;

/**
 * Every attribute a node's UpdateItem may name (the node policy's `dynamodb:Attributes`): the keys, which IAM
 * requires in the list, the index sort key, and what a claim or a release changes. A node cannot write the
 * ENI, MAC, subnet, prefix or creation time of a lease, nor any attribute of the node item that the control
 * plane reads (see `nodeVersion`).
 */
export const NODE_WRITABLE_ATTRS = [
  A.pk,
  A.sk,
  A.state,
  A.version,
  A.claimedAt,
  A.releasedAt,
  A.cAt,
  ...HOLDER_ATTRS,
] as const;

export function leaseKey(instanceArn: string, ip: string): Item {
  return { [A.pk]: s(instanceArn), [A.sk]: s(leaseSortKey(ip)) };
}

export function nodeKey(instanceArn: string): Item {
  return { [A.pk]: s(instanceArn), [A.sk]: s(NODE_SORT_KEY) };
}

/** A fresh FREE lease, claimable from `nowMs`. */
export function encodeNewLease(lease: NewLease, nowMs: number): Item {
  const item: Item = {
    ...leaseKey(lease.instanceArn, lease.ip),
    [A.cAt]: n(nowMs),
    [A.version]: n(1),
    [A.state]: s('FREE'),
    [A.eniId]: s(lease.eniId),
    [A.deviceIndex]: n(lease.deviceIndex),
    [A.mac]: s(lease.mac),
    [A.subnetId]: s(lease.subnetId),
    [A.subnetCidr]: s(lease.subnetCidr),
    [A.gateway]: s(lease.gateway),
    [A.createdAt]: n(nowMs),
  };
  if (lease.prefix !== undefined) item[A.prefix] = s(lease.prefix);
  return item;
}

/** Holder attributes for an UpdateExpression's values (`:hc`, `:hi`, ...) and the SET clauses naming them. */
export function encodeHolder(holder: LeaseHolder): { set: string[]; remove: string[]; values: Item } {
  const set: string[] = [];
  const remove: string[] = [];
  const values: Item = {};
  const fields: [string, string | undefined][] = [
    [A.containerId, holder.containerId],
    [A.ifName, holder.ifName],
    [A.netns, holder.netns],
    [A.podNamespace, holder.podNamespace],
    [A.podName, holder.podName],
    [A.network, holder.network],
  ];
  for (const [attr, value] of fields) {
    if (value === undefined) {
      remove.push(attr);
    } else {
      set.push(`${attr} = :${attr}`);
      values[`:${attr}`] = s(value);
    }
  }
  return { set, remove, values };
}

function str(item: Item, attr: string): string | undefined {
  return item[attr]?.S;
}

function num(item: Item, attr: string): number | undefined {
  const v = item[attr]?.N;
  return v === undefined ? undefined : Number(v);
}

function reqStr(item: Item, attr: string, what: string): string {
  const v = str(item, attr);
  if (v === undefined) throw new ValidationError(`${what} item lacks ${attr}`);
  return v;
}

function reqNum(item: Item, attr: string, what: string): number {
  const v = num(item, attr);
  if (v === undefined) throw new ValidationError(`${what} item lacks ${attr}`);
  return v;
}

export function isLeaseItem(item: Item): boolean {
  return str(item, A.sk)?.startsWith(LEASE_SORT_PREFIX) === true;
}

export function decodeLease(item: Item): Lease {
  const sk = reqStr(item, A.sk, 'lease');
  if (!sk.startsWith(LEASE_SORT_PREFIX)) throw new ValidationError(`not a lease item: ${sk}`);
  const state = reqStr(item, A.state, 'lease') as LeaseState;
  if (!LEASE_STATES.includes(state)) throw new ValidationError(`lease item has unknown state ${state}`);
  const containerId = str(item, A.containerId);
  const ifName = str(item, A.ifName);
  let holder: LeaseHolder | undefined;
  if (containerId !== undefined && ifName !== undefined) {
    const podNamespace = str(item, A.podNamespace);
    const podName = str(item, A.podName);
    const network = str(item, A.network);
    holder = {
      containerId,
      ifName,
      netns: str(item, A.netns) ?? '',
      ...(podNamespace !== undefined ? { podNamespace } : {}),
      ...(podName !== undefined ? { podName } : {}),
      ...(network !== undefined ? { network } : {}),
    };
  }
  const prefix = str(item, A.prefix);
  const claimedAtMs = num(item, A.claimedAt);
  const releasedAtMs = num(item, A.releasedAt);
  const reusableAtMs = num(item, A.cAt);
  return {
    instanceArn: reqStr(item, A.pk, 'lease'),
    ip: sk.slice(LEASE_SORT_PREFIX.length),
    state,
    eniId: reqStr(item, A.eniId, 'lease'),
    deviceIndex: reqNum(item, A.deviceIndex, 'lease'),
    mac: reqStr(item, A.mac, 'lease'),
    subnetId: reqStr(item, A.subnetId, 'lease'),
    subnetCidr: reqStr(item, A.subnetCidr, 'lease'),
    gateway: reqStr(item, A.gateway, 'lease'),
    ...(prefix !== undefined ? { prefix } : {}),
    ...(holder ? { holder } : {}),
    createdAtMs: reqNum(item, A.createdAt, 'lease'),
    ...(claimedAtMs !== undefined ? { claimedAtMs } : {}),
    ...(releasedAtMs !== undefined ? { releasedAtMs } : {}),
    ...(reusableAtMs !== undefined ? { reusableAtMs } : {}),
    version: reqNum(item, A.version, 'lease'),
  };
}

/** The node item; `version` is written as given (updateNode passes expectedVersion + 1). */
export function encodeNode(node: NodeRecord, version: number): Item {
  const item: Item = {
    ...nodeKey(node.instanceArn),
    [A.nodeShard]: s(nodeIndexShard(node.instanceArn)),
    [A.nodeVersion]: n(version),
    [A.instanceId]: s(node.instanceId),
    [A.instanceType]: s(node.instanceType),
    [A.availabilityZone]: s(node.availabilityZone),
    [A.podSubnetIds]: toAttr(node.podSubnetIds as readonly Plain[]),
    [A.phase]: s(node.phase),
    [A.enis]: toAttr(node.enis as unknown as Plain),
    [A.maxPods]: n(node.maxPods),
    [A.createdAt]: n(node.createdAtMs),
    [A.updatedAt]: n(node.updatedAtMs),
  };
  if (node.lifecycle) item[A.lifecycle] = toAttr(node.lifecycle as unknown as Plain);
  if (node.limits) item[A.limits] = toAttr(node.limits as unknown as Plain);
  if (node.ipFamily !== undefined) item[A.ipFamily] = s(node.ipFamily);
  if (node.failureReason !== undefined) item[A.failureReason] = s(node.failureReason);
  if (node.subnetRefusals?.length) item[A.subnetRefusals] = toAttr(node.subnetRefusals as unknown as Plain);
  if (node.goneSeenAtMs !== undefined) item[A.goneSeenAt] = n(node.goneSeenAtMs);
  if (node.hookCompletedAtMs !== undefined) item[A.hookCompletedAt] = n(node.hookCompletedAtMs);
  return item;
}

export function decodeNode(item: Item): NodeRecord {
  if (str(item, A.sk) !== NODE_SORT_KEY) throw new ValidationError('not a node item');
  const lifecycle = item[A.lifecycle];
  const limits = item[A.limits];
  const failureReason = str(item, A.failureReason);
  const ipFamily = str(item, A.ipFamily);
  const refusals = item[A.subnetRefusals];
  const goneSeenAtMs = num(item, A.goneSeenAt);
  const hookCompletedAtMs = num(item, A.hookCompletedAt);
  const psn = item[A.podSubnetIds];
  const enis = item[A.enis];
  return {
    instanceArn: reqStr(item, A.pk, 'node'),
    instanceId: reqStr(item, A.instanceId, 'node'),
    instanceType: reqStr(item, A.instanceType, 'node'),
    availabilityZone: reqStr(item, A.availabilityZone, 'node'),
    ...(lifecycle ? { lifecycle: fromAttr(lifecycle) as unknown as NodeRecord['lifecycle'] } : {}),
    ...(limits ? { limits: fromAttr(limits) as unknown as NodeRecord['limits'] } : {}),
    podSubnetIds: psn ? (fromAttr(psn) as string[]) : [],
    phase: reqStr(item, A.phase, 'node') as NodeRecord['phase'],
    ...(ipFamily !== undefined ? { ipFamily: ipFamily as NonNullable<NodeRecord['ipFamily']> } : {}),
    ...(failureReason !== undefined ? { failureReason } : {}),
    ...(refusals ? { subnetRefusals: fromAttr(refusals) as unknown as NodeRecord['subnetRefusals'] } : {}),
    enis: enis ? (fromAttr(enis) as unknown as NodeRecord['enis']) : [],
    maxPods: reqNum(item, A.maxPods, 'node'),
    createdAtMs: reqNum(item, A.createdAt, 'node'),
    updatedAtMs: reqNum(item, A.updatedAt, 'node'),
    ...(goneSeenAtMs !== undefined ? { goneSeenAtMs } : {}),
    ...(hookCompletedAtMs !== undefined ? { hookCompletedAtMs } : {}),
    version: reqNum(item, A.nodeVersion, 'node'),
  };
}

/** The node index's projection of a node item (NODE_INDEX.projected). */
export function decodeNodeRef(item: Item): NodeRef {
  if (str(item, A.sk) !== NODE_SORT_KEY) throw new ValidationError('not a node item');
  const goneSeenAtMs = num(item, A.goneSeenAt);
  return {
    instanceArn: reqStr(item, A.pk, 'node'),
    instanceId: reqStr(item, A.instanceId, 'node'),
    phase: reqStr(item, A.phase, 'node') as NodeRecord['phase'],
    createdAtMs: reqNum(item, A.createdAt, 'node'),
    updatedAtMs: reqNum(item, A.updatedAt, 'node'),
    ...(goneSeenAtMs !== undefined ? { goneSeenAtMs } : {}),
    version: reqNum(item, A.nodeVersion, 'node'),
  };
}
