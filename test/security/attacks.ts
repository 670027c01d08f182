import {
  BatchGetItemCommand,
  BatchWriteItemCommand,
  DeleteItemCommand,
  DynamoDBClient,
  ExecuteStatementCommand,
  GetItemCommand,
  PutItemCommand,
  ScanCommand,
  TransactWriteItemsCommand,
  UpdateItemCommand,
} from '@aws-sdk/client-dynamodb';
import { A, HOLDER_ATTRS, leaseKey, NODE_WRITABLE_ATTRS, nodeKey } from '../../shared/lease-store/item-codec.js';
import { CLAIMABLE_INDEX } from '../../shared/lease-store/table.js';
import { RECONCILER_PARTITION } from '../../shared/reconcile/lease-partitions.js';
import {
  answers,
  forgedFree,
  type IamAnswer,
  n,
  ownLeases,
  queryBy,
  s,
  setAttributes,
  victimTarget,
} from './attack-requests.js';
import { type Battlefield, TABLE } from './battlefield.js';

/**
 * One attack of a compromised node. Every attack must leave the other nodes untouched (their ADDs succeed, no
 * EC2 mutation names their instance, ENIs, addresses or prefixes, the control plane's runs succeed); `iam` is
 * what the node policy answers each of its requests — refused, or accepted because the request stays inside
 * the attacker's own partition and names only what a node may write.
 */
export interface Attack {
  readonly name: string;
  /** IAM's answer to each request, in order; a single answer stands for every request. */
  readonly iam: IamAnswer | readonly IamAnswer[];
  run(field: Battlefield): Promise<IamAnswer[]>;
  /** What else this attack must leave as it was, checked after the control plane ran. */
  unchanged?(field: Battlefield): Promise<unknown>;
}

export const ATTACKS: readonly Attack[] = [
  {
    name: 'Scan the whole table',
    iam: 'denied',
    run: (f) => answers([() => f.attacker.ddb.send(new ScanCommand({ TableName: TABLE }))]),
  },
  {
    name: 'Query without a partition key (sort-key condition only)',
    iam: 'denied',
    run: (f) => answers([queryBy(f.attacker, (k) => `begins_with(${k}, :v)`, A.sk, 'ip#')]),
  },
  {
    name: "Query another node's partition of the table",
    iam: 'denied',
    run: (f) => answers([queryBy(f.attacker, (k) => `${k} = :v`, A.pk, f.victims[0]!.arn)]),
  },
  {
    name: "Query the claim index for another node's partition",
    iam: 'denied',
    run: (f) =>
      answers([
        queryBy(f.attacker, (k) => `${k} = :v`, CLAIMABLE_INDEX.partitionKey, f.victims[0]!.arn, CLAIMABLE_INDEX.name),
      ]),
  },
  {
    name: "GetItem and BatchGetItem of another node's lease",
    iam: 'denied',
    run: async (f) => {
      const ip = victimTarget(f, f.victims[0]!).ip;
      return answers([
        () => f.attacker.ddb.send(new GetItemCommand({ TableName: TABLE, Key: leaseKey(f.victims[0]!.arn, ip) })),
        () =>
          f.attacker.ddb.send(
            new BatchGetItemCommand({ RequestItems: { [TABLE]: { Keys: [leaseKey(f.victims[0]!.arn, ip)] } } }),
          ),
      ]);
    },
  },
  {
    name: "Write another node's lease (claim it, free it, make it RELEASING)",
    iam: 'denied',
    run: async (f) => {
      const victim = f.victims[0]!;
      const key = leaseKey(victim.arn, victimTarget(f, victim).ip);
      return answers([
        setAttributes(f.attacker, key, { [A.state]: s('RELEASING') }),
        setAttributes(f.attacker, key, { [A.state]: s('CLAIMED'), [A.containerId]: s('evil'), [A.ifName]: s('eth0') }),
        () => f.attacker.ddb.send(new DeleteItemCommand({ TableName: TABLE, Key: key })),
      ]);
    },
  },
  {
    name: "Write another node's node item (mark it DRAINING)",
    iam: 'denied',
    run: (f) => answers([setAttributes(f.attacker, nodeKey(f.victims[0]!.arn), { [A.phase]: s('DRAINING') })]),
  },
  {
    // The reconciler's first look at a stray partition lives in its own partition; a node must not move it.
    name: "Write or read the reconciler's stray-lease marks",
    iam: 'denied',
    run: (f) => {
      const key = { [A.pk]: s(RECONCILER_PARTITION), [A.sk]: s(`stray#${f.victims[0]!.arn}`) };
      return answers([
        setAttributes(f.attacker, key, { markedAtMs: n(0) }),
        queryBy(f.attacker, (k) => `${k} = :v`, A.pk, RECONCILER_PARTITION),
      ]);
    },
  },
  {
    name: 'Write its own node item (phase, ENI list, max pods, hook completion time, IP family)',
    iam: 'denied',
    run: (f) =>
      answers([
        setAttributes(f.attacker, nodeKey(f.attacker.arn), { [A.phase]: s('PROVISIONING') }),
        setAttributes(f.attacker, nodeKey(f.attacker.arn), { [A.hookCompletedAt]: n(0) }),
        setAttributes(f.attacker, nodeKey(f.attacker.arn), { [A.maxPods]: n(100_000) }),
        setAttributes(f.attacker, nodeKey(f.attacker.arn), { [A.enis]: { L: [] } }),
        // The family its ADD checks its netconf against: the launch's to set, never the node's.
        setAttributes(f.attacker, nodeKey(f.attacker.arn), { [A.ipFamily]: s('dual') }),
      ]),
  },
  {
    // IAM cannot condition on the sort key: every attribute a lease claim may write, it may write here too.
    name: 'Write every node-writable attribute on its own node item (as FREE and claimable since 0)',
    iam: 'accepted',
    run: (f) => {
      const holder = Object.fromEntries(HOLDER_ATTRS.map((h) => [h, s('evil')]));
      const writable = { ...holder, [A.state]: s('FREE'), [A.version]: n(1), [A.cAt]: n(0) };
      const timestamps = { [A.claimedAt]: n(9e15), [A.releasedAt]: n(-1) };
      const named = new Set([...Object.keys(writable), ...Object.keys(timestamps), A.pk, A.sk]);
      if (NODE_WRITABLE_ATTRS.some((a) => !named.has(a))) throw new Error('a node-writable attribute is left out');
      return answers([setAttributes(f.attacker, nodeKey(f.attacker.arn), { ...writable, ...timestamps })]);
    },
    // The control plane reads the node item the same, and the attacker's own claims never take it as a lease.
    unchanged: async (f) => ({
      node: await f.controlStore.getNode(f.attacker.arn),
      add: await f.addAndDelete(f.attacker),
    }),
  },
  {
    name: 'Write its own node item through the legacy AttributeUpdates API',
    iam: 'denied',
    run: (f) =>
      answers([
        () =>
          f.attacker.ddb.send(
            new UpdateItemCommand({
              TableName: TABLE,
              Key: nodeKey(f.attacker.arn),
              AttributeUpdates: { [A.phase]: { Action: 'PUT', Value: s('FAILED') } },
            }),
          ),
      ]),
  },
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
    // The node index is keyed on `nsh`, which only the control plane writes: a node that could set it would
    // slip 150 fake READY "nodes" into every schedule's view, or hide its own node from the sweep.
    name: 'Poison the node index: 150 items carrying the node-index key, and its own node item moved out of it',
    iam: 'denied',
    run: (f) =>
      answers([
        ...Array.from({ length: 150 }, (_, i) =>
          setAttributes(f.attacker, leaseKey(f.attacker.arn, `10.0.198.${i}`), {
            [A.nodeShard]: s('nodes#0'),
            [A.phase]: s('READY'),
            [A.state]: s('FREE'),
            [A.version]: n(1),
          }),
        ),
        setAttributes(f.attacker, nodeKey(f.attacker.arn), { [A.nodeShard]: s('elsewhere') }),
        () =>
          f.attacker.ddb.send(
            new UpdateItemCommand({
              TableName: TABLE,
              Key: nodeKey(f.attacker.arn),
              UpdateExpression: 'REMOVE #k',
              ExpressionAttributeNames: { '#k': A.nodeShard },
            }),
          ),
      ]),
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
    // Refused before any policy is read: an unknown key, then a signature that does not verify.
    name: 'Made-up credentials, and a stolen access key id without its secret',
    iam: ['refused: UnrecognizedClientException', 'refused: InvalidSignatureException', 'accepted'],
    run: async (f) => {
      const client = (credentials: { accessKeyId: string; secretAccessKey: string }) =>
        new DynamoDBClient({
          region: f.cloud.region,
          endpoint: f.cloud.endpoints.dynamodb,
          credentials,
          maxAttempts: 1,
        });
      const made = client({ accessKeyId: 'AKIAMADEUPKEY0000000', secretAccessKey: 'guess' });
      const stolen = client({ ...f.victims[0]!.session.credentials, secretAccessKey: 'guess' });
      const honest = client(f.victims[0]!.session.credentials);
      try {
        const key = nodeKey(f.victims[0]!.arn);
        return await answers([
          () => made.send(new GetItemCommand({ TableName: TABLE, Key: key })),
          () => stolen.send(new GetItemCommand({ TableName: TABLE, Key: key })),
          // The same client, built the same way with the victim's whole credentials, is let in.
          () => honest.send(new GetItemCommand({ TableName: TABLE, Key: key })),
        ]);
      } finally {
        for (const c of [made, stolen, honest]) c.destroy();
      }
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
