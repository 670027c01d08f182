import {
  BatchWriteItemCommand,
  DeleteItemCommand,
  ExecuteStatementCommand,
  PutItemCommand,
  TransactWriteItemsCommand,
} from '@aws-sdk/client-dynamodb';
import { A, leaseKey } from '../../shared/lease-store/item-codec.js';
import { answers, forgedFree, n, ownLeases, s, setAttributes, victimTarget } from './attack-requests.js';
import type { Attack } from './attacks.js';
import { TABLE } from './battlefield.js';

/**
 * Attacks with lease items inside the node's own partition: forged leases naming other nodes' ENIs, the claim
 * index, write APIs the policy does not grant, and attributes a claim or release may not set.
 */
export const OWN_PARTITION_ATTACKS: readonly Attack[] = [
  {
    // Issue 14's reproduction on the v1 table, whose claim index was keyed on this node-written attribute.
    name: 'Poison the claim index: 150 items whose cPk names another node, claimable since 0',
    iam: 'denied',
    run: async (f) => {
      const victim = f.victims[0]!;
      const sends = Array.from({ length: 150 }, (_, i) =>
        setAttributes(f.attacker, leaseKey(f.attacker.arn, `10.0.200.${i}`), {
          cPk: s(victim.arn),
          [A.cAt]: n(0),
          [A.state]: s('FREE'),
          [A.version]: n(1),
        }),
      );
      return answers(sends);
    },
  },
  {
    name: 'Poison its own claim index: 150 unclaimable items, claimable since 0',
    iam: 'accepted',
    run: (f) =>
      answers(
        Array.from({ length: 150 }, (_, i) =>
          setAttributes(f.attacker, leaseKey(f.attacker.arn, `10.0.199.${i}`), {
            [A.cAt]: n(0),
            [A.state]: s('FREE'),
            [A.version]: n(1),
          }),
        ),
      ),
  },
  {
    name: 'PutItem a forged FREE lease naming another node’s ENI and address',
    iam: 'denied',
    run: async (f) => {
      const t = victimTarget(f, f.victims[0]!);
      const forged = await forgedFree(f, t);
      return answers([
        () =>
          f.attacker.ddb.send(
            new PutItemCommand({
              TableName: TABLE,
              Item: { ...leaseKey(f.attacker.arn, t.ip), ...forged },
            }),
          ),
      ]);
    },
  },
  {
    name: 'DeleteItem, BatchWriteItem, TransactWriteItems and PartiQL on its own partition',
    iam: 'denied',
    run: async (f) => {
      const [own] = await ownLeases(f, 'FREE');
      const key = leaseKey(f.attacker.arn, own?.ip ?? '10.0.201.1');
      const item = { ...leaseKey(f.attacker.arn, '10.0.201.2'), [A.state]: s('FREE') };
      return answers([
        () => f.attacker.ddb.send(new DeleteItemCommand({ TableName: TABLE, Key: key })),
        () =>
          f.attacker.ddb.send(
            new BatchWriteItemCommand({ RequestItems: { [TABLE]: [{ PutRequest: { Item: item } }] } }),
          ),
        () =>
          f.attacker.ddb.send(
            new TransactWriteItemsCommand({ TransactItems: [{ Put: { TableName: TABLE, Item: item } }] }),
          ),
        () =>
          f.attacker.ddb.send(
            new ExecuteStatementCommand({
              Statement: `UPDATE "${TABLE}" SET ${A.state}='FREE' WHERE ${A.pk}='${f.attacker.arn}' AND ${A.sk}='ip#10.0.201.3'`,
            }),
          ),
      ]);
    },
  },
  {
    name: 'Forge leases (upsert) for every address of another node’s ENI, FREE since 0, past the high watermark',
    iam: 'denied',
    run: async (f) => {
      // The reproduction: enough claimable forged leases that the pool-manager releases the excess.
      const t = victimTarget(f, f.victims[0]!);
      const base = t.ip.split('.').slice(0, 3).join('.');
      const ips = [...t.ips, ...Array.from({ length: 12 }, (_, i) => `${base}.${230 + i}`)];
      const forged = await forgedFree(f, t);
      return answers(ips.map((ip) => setAttributes(f.attacker, leaseKey(f.attacker.arn, ip), forged)));
    },
  },
  {
    name: 'Rewrite its own FREE leases to name another node’s ENI (the pool-manager then sees excess)',
    iam: 'denied',
    run: async (f) => {
      const t = victimTarget(f, f.victims[0]!);
      const free = await ownLeases(f, 'FREE');
      return answers(
        free.map((l) =>
          setAttributes(f.attacker, leaseKey(f.attacker.arn, l.ip), { [A.eniId]: s(t.eniId), [A.cAt]: n(0) }),
        ),
      );
    },
  },
  {
    name: 'Forge a /28 prefix lease naming another node’s ENI',
    iam: 'denied',
    run: async (f) => {
      const t = victimTarget(f, f.victims[0]!);
      const base = t.ip.split('.').slice(0, 3).join('.');
      const forged = await forgedFree(f, t);
      return answers([
        setAttributes(f.attacker, leaseKey(f.attacker.arn, `${base}.48`), {
          ...forged,
          [A.prefix]: s(`${base}.48/28`),
        }),
      ]);
    },
  },
  {
    // IPv6 leases are lease items like any other (sort key ip#<address>): a node cannot create one either.
    name: 'Forge an IPv6 lease (a /80 prefix) naming another node’s ENI',
    iam: 'denied',
    run: async (f) => {
      const t = victimTarget(f, f.victims[0]!);
      const forged = await forgedFree(f, t);
      return answers([
        setAttributes(f.attacker, leaseKey(f.attacker.arn, '2600:1f18::8c3e:0:0:5'), {
          ...forged,
          [A.prefix]: s('2600:1f18:0:0:8c3e::/80'),
          [A.subnetCidr]: s('2600:1f18::/64'),
          [A.gateway]: s('2600:1f18::1'),
        }),
      ]);
    },
  },
  {
    name: 'Mark its own leases RELEASING, naming another node’s ENI, to trick an Unassign',
    iam: 'denied',
    run: async (f) => {
      const t = victimTarget(f, f.victims[0]!);
      const free = await ownLeases(f, 'FREE');
      return answers(
        free.slice(0, 3).map((l) =>
          setAttributes(f.attacker, leaseKey(f.attacker.arn, l.ip), {
            [A.state]: s('RELEASING'),
            [A.eniId]: s(t.eniId),
            [A.releasedAt]: n(0),
          }),
        ),
      );
    },
  },
  {
    name: 'Mark its own leases RELEASING (state and release time only), for the control plane to Unassign',
    iam: 'accepted',
    run: async (f) => {
      const free = await ownLeases(f, 'FREE');
      return answers(
        free.slice(0, 3).map((l) =>
          setAttributes(f.attacker, leaseKey(f.attacker.arn, l.ip), {
            [A.state]: s('RELEASING'),
            [A.releasedAt]: n(0),
          }),
        ),
      );
    },
  },
  {
    name: 'Replay an old version over a lease (version back to 1, state FREE)',
    iam: 'accepted',
    run: async (f) => {
      const leases = await ownLeases(f);
      return answers(
        leases.slice(0, 3).map((l) =>
          setAttributes(f.attacker, leaseKey(f.attacker.arn, l.ip), {
            [A.version]: n(1),
            [A.state]: s('FREE'),
            [A.cAt]: n(0),
          }),
        ),
      );
    },
  },
  {
    name: 'Set a lease’s holder to another node’s container',
    iam: 'accepted',
    run: async (f) => {
      const [own] = await ownLeases(f, 'FREE');
      if (!own) throw new Error('the attacker has no FREE lease left');
      return answers([
        setAttributes(f.attacker, leaseKey(f.attacker.arn, own.ip), {
          [A.state]: s('CLAIMED'),
          [A.containerId]: s('probe-000001'),
          [A.ifName]: s('eth0'),
          [A.podName]: s('victim-pod'),
        }),
      ]);
    },
  },
  {
    name: 'Claim and release timestamps in the past and the far future (claimable, claimed, released)',
    iam: 'accepted',
    run: async (f) => {
      const leases = await ownLeases(f);
      return answers(
        leases.slice(0, 4).map((l, i) =>
          setAttributes(f.attacker, leaseKey(f.attacker.arn, l.ip), {
            [A.cAt]: n(i % 2 === 0 ? -1 : 9e15),
            [A.claimedAt]: n(i % 2 === 0 ? 9e15 : -1),
            [A.releasedAt]: n(i % 2 === 0 ? 9e15 : -1),
          }),
        ),
      );
    },
  },
  {
    name: 'Rewrite a lease’s creation time (to 0 and to the far future)',
    iam: 'denied',
    run: async (f) => {
      const leases = await ownLeases(f);
      return answers(
        leases
          .slice(0, 2)
          .map((l, i) => setAttributes(f.attacker, leaseKey(f.attacker.arn, l.ip), { [A.createdAt]: n(i * 9e15) })),
      );
    },
  },
  {
    name: 'Write an oversized item (390 KB pod name)',
    iam: 'accepted',
    run: async (f) => {
      const [own] = await ownLeases(f);
      return answers([
        setAttributes(f.attacker, leaseKey(f.attacker.arn, own?.ip ?? '10.0.202.1'), {
          [A.podName]: s('x'.repeat(390_000)),
        }),
      ]);
    },
  },
  {
    name: 'Flood its partition with 200 lease-shaped items',
    iam: 'accepted',
    run: (f) =>
      answers(
        Array.from({ length: 200 }, (_, i) =>
          setAttributes(f.attacker, leaseKey(f.attacker.arn, `10.0.${210 + (i >> 8)}.${i & 255}`), {
            [A.state]: s('FREE'),
            [A.cAt]: n(0),
            [A.version]: n(1),
          }),
        ),
      ),
  },
];
