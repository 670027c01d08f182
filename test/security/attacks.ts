import {
  type AttributeValue,
  BatchGetItemCommand,
  BatchWriteItemCommand,
  DeleteItemCommand,
  DynamoDBClient,
  ExecuteStatementCommand,
  GetItemCommand,
  PutItemCommand,
  QueryCommand,
  ScanCommand,
  TransactWriteItemsCommand,
  UpdateItemCommand,
} from '@aws-sdk/client-dynamodb';
import { A, leaseKey, nodeKey } from '../../shared/lease-store/item-codec.js';
import { CLAIMABLE_INDEX } from '../../shared/lease-store/table.js';
import { RECONCILER_PARTITION } from '../../shared/reconcile/lease-partitions.js';
import { type Battlefield, type SimNode, TABLE } from './battlefield.js';

/**
 * `denied by IAM`: the node policy refuses the attacker's request(s) outright. `no effect`: IAM may accept it
 * (the request stays inside the attacker's own partition), but no other node notices: their ADDs succeed and
 * no EC2 mutation names their instance, ENIs, addresses or prefixes.
 */
export type Expected = 'denied by IAM' | 'no effect';

/** What the attacker's requests got back: refused (IAM or credentials), accepted, or refused by DynamoDB. */
export type IamAnswer = 'denied' | 'accepted' | `dynamodb refused: ${string}`;

export interface Attack {
  readonly name: string;
  readonly expected: Expected;
  run(field: Battlefield): Promise<IamAnswer>;
}

const REFUSALS = new Set(['AccessDeniedException', 'UnrecognizedClientException', 'InvalidSignatureException']);

/** Sends each request; `denied` only when IAM refused every one, `accepted` when any got through. */
async function answer(requests: readonly (() => Promise<unknown>)[]): Promise<IamAnswer> {
  const answers: IamAnswer[] = [];
  for (const send of requests) {
    try {
      await send();
      answers.push('accepted');
    } catch (err) {
      const name = (err as Error).name;
      answers.push(REFUSALS.has(name) ? 'denied' : `dynamodb refused: ${name}`);
    }
  }
  if (answers.every((a) => a === 'denied')) return 'denied';
  return answers.find((a) => a === 'accepted') ?? answers[0]!;
}

const s = (v: string): AttributeValue => ({ S: v });
const n = (v: number): AttributeValue => ({ N: String(v) });

/** An UpdateItem of `key` setting each attribute (by name, through placeholders: no reserved-word surprises). */
function setAttributes(node: SimNode, key: Record<string, AttributeValue>, attrs: Record<string, AttributeValue>) {
  const entries = Object.entries(attrs);
  return () =>
    node.ddb.send(
      new UpdateItemCommand({
        TableName: TABLE,
        Key: key,
        UpdateExpression: `SET ${entries.map((_, i) => `#a${i} = :v${i}`).join(', ')}`,
        ExpressionAttributeNames: Object.fromEntries(entries.map(([name], i) => [`#a${i}`, name])),
        ExpressionAttributeValues: Object.fromEntries(entries.map(([, v], i) => [`:v${i}`, v])),
      }),
    );
}

/** A Query whose key condition is `<attribute> <op> :v`, on the table or an index. */
function queryBy(node: SimNode, condition: (name: string) => string, attribute: string, value: string, index?: string) {
  return () =>
    node.ddb.send(
      new QueryCommand({
        TableName: TABLE,
        ...(index ? { IndexName: index } : {}),
        KeyConditionExpression: condition('#k'),
        ExpressionAttributeNames: { '#k': attribute },
        ExpressionAttributeValues: { ':v': s(value) },
      }),
    );
}

/** The attacker's own leases (their addresses), optionally in one state, read raw by the control plane. */
async function ownLeases(field: Battlefield, state?: 'FREE' | 'CLAIMED'): Promise<{ ip: string }[]> {
  return (await field.partition(field.attacker.arn))
    .filter((i) => i[A.sk]?.S?.startsWith('ip#') && (!state || i[A.state]?.S === state))
    .map((i) => ({ ip: i[A.sk]!.S!.slice(3) }));
}

/** A victim's pod ENI (device index ≥ 1) and its secondary addresses (`ip` the first). */
function victimTarget(field: Battlefield, victim: SimNode): { eniId: string; ip: string; ips: string[]; mac: string } {
  const eni = field.cloud.ec2.api.instanceInterfaces(victim.instanceId).find((e) => e.deviceIndex >= 1);
  if (!eni) throw new Error(`victim ${victim.instanceId} has no pod ENI`);
  const ips = eni.privateIpAddresses.slice(1);
  return { eniId: eni.eniId, ip: ips[0] ?? eni.privateIpAddresses[0]!, ips, mac: eni.mac };
}

/**
 * A complete lease-shaped FREE item for the attacker's own partition, copied from one of its real leases (so
 * every decoder accepts it) but naming another ENI, claimable since `claimableAtMs`: bait for a release.
 */
async function forgedFree(
  field: Battlefield,
  target: { eniId: string; mac: string },
  claimableAtMs = 0,
): Promise<Record<string, AttributeValue>> {
  const real = (await field.partition(field.attacker.arn)).find((i) => i[A.sk]?.S?.startsWith('ip#'));
  if (!real) throw new Error('the attacker has no lease to copy');
  const { [A.pk]: _pk, [A.sk]: _sk, ...attrs } = real;
  for (const h of [A.containerId, A.ifName, A.netns, A.podNamespace, A.podName]) delete attrs[h];
  return {
    ...attrs,
    [A.cAt]: n(claimableAtMs),
    [A.state]: s('FREE'),
    [A.version]: n(1),
    [A.eniId]: s(target.eniId),
    [A.mac]: s(target.mac),
    [A.deviceIndex]: n(1),
    [A.createdAt]: n(0),
  };
}

export const ATTACKS: readonly Attack[] = [
  {
    name: 'Scan the whole table',
    expected: 'denied by IAM',
    run: (f) => answer([() => f.attacker.ddb.send(new ScanCommand({ TableName: TABLE }))]),
  },
  {
    name: 'Query without a partition key (sort-key condition only)',
    expected: 'denied by IAM',
    run: (f) => answer([queryBy(f.attacker, (k) => `begins_with(${k}, :v)`, A.sk, 'ip#')]),
  },
  {
    name: "Query another node's partition of the table",
    expected: 'denied by IAM',
    run: (f) => answer([queryBy(f.attacker, (k) => `${k} = :v`, A.pk, f.victims[0]!.arn)]),
  },
  {
    name: "Query the claim index for another node's partition",
    expected: 'denied by IAM',
    run: (f) =>
      answer([
        queryBy(f.attacker, (k) => `${k} = :v`, CLAIMABLE_INDEX.partitionKey, f.victims[0]!.arn, CLAIMABLE_INDEX.name),
      ]),
  },
  {
    name: "GetItem and BatchGetItem of another node's lease",
    expected: 'denied by IAM',
    run: async (f) => {
      const ip = victimTarget(f, f.victims[0]!).ip;
      return answer([
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
    expected: 'denied by IAM',
    run: async (f) => {
      const victim = f.victims[0]!;
      const key = leaseKey(victim.arn, victimTarget(f, victim).ip);
      return answer([
        setAttributes(f.attacker, key, { [A.state]: s('RELEASING') }),
        setAttributes(f.attacker, key, { [A.state]: s('CLAIMED'), [A.containerId]: s('evil'), [A.ifName]: s('eth0') }),
        () => f.attacker.ddb.send(new DeleteItemCommand({ TableName: TABLE, Key: key })),
      ]);
    },
  },
  {
    name: "Write another node's node item (mark it DRAINING)",
    expected: 'denied by IAM',
    run: (f) => answer([setAttributes(f.attacker, nodeKey(f.victims[0]!.arn), { [A.phase]: s('DRAINING') })]),
  },
  {
    // The reconciler's first look at a stray partition lives in its own partition; a node must not move it.
    name: "Write or read the reconciler's stray-lease marks",
    expected: 'denied by IAM',
    run: (f) => {
      const key = { [A.pk]: s(RECONCILER_PARTITION), [A.sk]: s(`stray#${f.victims[0]!.arn}`) };
      return answer([
        setAttributes(f.attacker, key, { markedAtMs: n(0) }),
        queryBy(f.attacker, (k) => `${k} = :v`, A.pk, RECONCILER_PARTITION),
      ]);
    },
  },
  {
    name: 'Write its own node item (phase, ENI list, max pods)',
    expected: 'denied by IAM',
    run: (f) =>
      answer([
        setAttributes(f.attacker, nodeKey(f.attacker.arn), { [A.phase]: s('PROVISIONING') }),
        setAttributes(f.attacker, nodeKey(f.attacker.arn), { [A.maxPods]: n(100_000) }),
        setAttributes(f.attacker, nodeKey(f.attacker.arn), { [A.enis]: { L: [] } }),
      ]),
  },
  {
    name: 'Write its own node item through the legacy AttributeUpdates API',
    expected: 'denied by IAM',
    run: (f) =>
      answer([
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
    expected: 'denied by IAM',
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
      return answer(sends);
    },
  },
  {
    // The node index (issue 25) is keyed on `nsh`, which only the control plane writes: a node that could set
    // it would slip 150 fake READY "nodes" into every schedule's view, or hide its own node from the sweep.
    name: 'Poison the node index: 150 items carrying the node-index key, and its own node item moved out of it',
    expected: 'denied by IAM',
    run: (f) =>
      answer([
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
    expected: 'no effect',
    run: (f) =>
      answer(
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
    expected: 'denied by IAM',
    run: async (f) => {
      const t = victimTarget(f, f.victims[0]!);
      const forged = await forgedFree(f, t);
      return answer([
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
    expected: 'denied by IAM',
    run: async (f) => {
      const [own] = await ownLeases(f, 'FREE');
      const key = leaseKey(f.attacker.arn, own?.ip ?? '10.0.201.1');
      const item = { ...leaseKey(f.attacker.arn, '10.0.201.2'), [A.state]: s('FREE') };
      return answer([
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
    name: 'Made-up credentials, and a stolen access key id without its secret',
    expected: 'denied by IAM',
    run: async (f) => {
      const made = new DynamoDBClient({
        region: f.cloud.region,
        endpoint: f.cloud.endpoints.dynamodb,
        credentials: { accessKeyId: 'AKIAMADEUPKEY0000000', secretAccessKey: 'guess' },
        maxAttempts: 1,
      });
      const stolen = new DynamoDBClient({
        region: f.cloud.region,
        endpoint: f.cloud.endpoints.dynamodb,
        credentials: { ...f.victims[0]!.session.credentials, secretAccessKey: 'guess' },
        maxAttempts: 1,
      });
      try {
        const key = nodeKey(f.victims[0]!.arn);
        return await answer([
          () => made.send(new GetItemCommand({ TableName: TABLE, Key: key })),
          () => stolen.send(new GetItemCommand({ TableName: TABLE, Key: key })),
        ]);
      } finally {
        made.destroy();
        stolen.destroy();
      }
    },
  },
  {
    name: 'Forge leases (upsert) for every address of another node’s ENI, FREE since 0, past the high watermark',
    expected: 'no effect',
    run: async (f) => {
      // The issue's reproduction: enough claimable forged leases that the pool-manager releases the excess.
      const t = victimTarget(f, f.victims[0]!);
      const base = t.ip.split('.').slice(0, 3).join('.');
      const ips = [...t.ips, ...Array.from({ length: 12 }, (_, i) => `${base}.${230 + i}`)];
      const forged = await forgedFree(f, t);
      return answer(ips.map((ip) => setAttributes(f.attacker, leaseKey(f.attacker.arn, ip), forged)));
    },
  },
  {
    name: 'Rewrite its own FREE leases to name another node’s ENI (the pool-manager then sees excess)',
    expected: 'no effect',
    run: async (f) => {
      const t = victimTarget(f, f.victims[0]!);
      const free = await ownLeases(f, 'FREE');
      return answer(
        free.map((l) =>
          setAttributes(f.attacker, leaseKey(f.attacker.arn, l.ip), { [A.eniId]: s(t.eniId), [A.cAt]: n(0) }),
        ),
      );
    },
  },
  {
    name: 'Forge a /28 prefix lease naming another node’s ENI',
    expected: 'no effect',
    run: async (f) => {
      const t = victimTarget(f, f.victims[0]!);
      const base = t.ip.split('.').slice(0, 3).join('.');
      const forged = await forgedFree(f, t);
      return answer([
        setAttributes(f.attacker, leaseKey(f.attacker.arn, `${base}.48`), {
          ...forged,
          [A.prefix]: s(`${base}.48/28`),
        }),
      ]);
    },
  },
  {
    name: 'Mark its own leases RELEASING, naming another node’s ENI, to trick an Unassign',
    expected: 'no effect',
    run: async (f) => {
      const t = victimTarget(f, f.victims[0]!);
      const free = await ownLeases(f, 'FREE');
      return answer(
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
    name: 'Replay an old version over a lease (version back to 1, state FREE)',
    expected: 'no effect',
    run: async (f) => {
      const leases = await ownLeases(f);
      return answer(
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
    expected: 'no effect',
    run: async (f) => {
      const [own] = await ownLeases(f, 'FREE');
      if (!own) throw new Error('the attacker has no FREE lease left');
      return answer([
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
    name: 'Timestamps in the past and the far future (claimable, release and creation times)',
    expected: 'no effect',
    run: async (f) => {
      const leases = await ownLeases(f);
      return answer(
        leases.slice(0, 4).map((l, i) =>
          setAttributes(f.attacker, leaseKey(f.attacker.arn, l.ip), {
            [A.cAt]: n(i % 2 === 0 ? -1 : 9e15),
            [A.releasedAt]: n(i % 2 === 0 ? 9e15 : -1),
            [A.createdAt]: n(i % 2 === 0 ? 0 : 9e15),
          }),
        ),
      );
    },
  },
  {
    name: 'Write an oversized item (390 KB pod name)',
    expected: 'no effect',
    run: async (f) => {
      const [own] = await ownLeases(f);
      return answer([
        setAttributes(f.attacker, leaseKey(f.attacker.arn, own?.ip ?? '10.0.202.1'), {
          [A.podName]: s('x'.repeat(390_000)),
        }),
      ]);
    },
  },
  {
    name: 'Flood its partition with 200 lease-shaped items',
    expected: 'no effect',
    run: (f) =>
      answer(
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
