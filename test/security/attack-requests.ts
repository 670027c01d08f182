import { type AttributeValue, GetItemCommand, QueryCommand, UpdateItemCommand } from '@aws-sdk/client-dynamodb';
import { A, nodeKey } from '../../shared/lease-store/item-codec.js';
import { type Battlefield, type SimNode, TABLE } from './battlefield.js';

/**
 * What one request got back. `denied` is IAM's refusal and only that (AccessDeniedException, counted by the
 * endpoint's policy evaluation); any other error is named, so a signing failure or a DynamoDB validation error
 * is never mistaken for the policy working.
 */
export type IamAnswer = 'accepted' | 'denied' | `refused: ${string}`;

/** Sends each request in turn; one answer per request, in order. */
export async function answers(requests: readonly (() => Promise<unknown>)[]): Promise<IamAnswer[]> {
  const out: IamAnswer[] = [];
  for (const send of requests) {
    try {
      await send();
      out.push('accepted');
    } catch (err) {
      const name = (err as Error).name;
      out.push(name === 'AccessDeniedException' ? 'denied' : `refused: ${name}`);
    }
  }
  return out;
}

/** The positive control of a client: a GetItem of `node`'s own node item, which the node policy allows. */
export function ownGetItem(node: SimNode) {
  return () => node.ddb.send(new GetItemCommand({ TableName: TABLE, Key: nodeKey(node.arn) }));
}

export const s = (v: string): AttributeValue => ({ S: v });
export const n = (v: number): AttributeValue => ({ N: String(v) });

/** An UpdateItem of `key` setting each attribute (by name, through placeholders: no reserved-word surprises). */
export function setAttributes(
  node: SimNode,
  key: Record<string, AttributeValue>,
  attrs: Record<string, AttributeValue>,
) {
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
export function queryBy(
  node: SimNode,
  condition: (name: string) => string,
  attribute: string,
  value: string,
  index?: string,
) {
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
export async function ownLeases(field: Battlefield, state?: 'FREE' | 'CLAIMED'): Promise<{ ip: string }[]> {
  return (await field.partition(field.attacker.arn))
    .filter((i) => i[A.sk]?.S?.startsWith('ip#') && (!state || i[A.state]?.S === state))
    .map((i) => ({ ip: i[A.sk]!.S!.slice(3) }));
}

/** A victim's pod ENI (device index ≥ 1) and its secondary addresses (`ip` the first). */
export function victimTarget(
  field: Battlefield,
  victim: SimNode,
): { eniId: string; ip: string; ips: string[]; mac: string } {
  const eni = field.cloud.ec2.api.instanceInterfaces(victim.instanceId).find((e) => e.deviceIndex >= 1);
  if (!eni) throw new Error(`victim ${victim.instanceId} has no pod ENI`);
  const ips = eni.privateIpAddresses.slice(1);
  return { eniId: eni.eniId, ip: ips[0] ?? eni.privateIpAddresses[0]!, ips, mac: eni.mac };
}

/**
 * A complete lease-shaped FREE item for the attacker's own partition, copied from one of its real leases (so
 * every decoder accepts it) but naming another ENI, claimable since `claimableAtMs`: bait for a release.
 */
export async function forgedFree(
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
