import {
  BatchGetItemCommand,
  DeleteItemCommand,
  DynamoDBClient,
  GetItemCommand,
  ScanCommand,
} from '@aws-sdk/client-dynamodb';
import { A, leaseKey, nodeKey } from '../../shared/lease-store/item-codec.js';
import { CLAIMABLE_INDEX } from '../../shared/lease-store/table.js';
import { RECONCILER_PARTITION } from '../../shared/reconcile/lease-partitions.js';
import { answers, n, queryBy, s, setAttributes, victimTarget } from './attack-requests.js';
import type { Attack } from './attacks.js';
import { TABLE } from './battlefield.js';

/**
 * Attacks that reach outside the node's own partition: the whole table, other nodes' partitions and indexes, the
 * reconciler's partition, and credentials other than its own.
 */
export const OTHER_PARTITION_ATTACKS: readonly Attack[] = [
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
];
