import { UpdateItemCommand } from '@aws-sdk/client-dynamodb';
import { A, HOLDER_ATTRS, leaseKey, NODE_WRITABLE_ATTRS, nodeKey } from '../../shared/lease-store/item-codec.js';
import { answers, n, s, setAttributes } from './attack-requests.js';
import type { Attack } from './attacks.js';
import { TABLE } from './battlefield.js';

/**
 * Attacks on the node's own node item, which only the control plane writes, and on the node index keyed on it.
 */
export const NODE_ITEM_ATTACKS: readonly Attack[] = [
  {
    name: 'Write its own node item (phase, ENI list, max pods, hook completion time, IP family, full subnets)',
    iam: 'denied',
    run: (f) =>
      answers([
        setAttributes(f.attacker, nodeKey(f.attacker.arn), { [A.phase]: s('PROVISIONING') }),
        // Full-subnet records steer the pool's top-up and feed the subnets-exhausted alarm: EC2's answers only.
        setAttributes(f.attacker, nodeKey(f.attacker.arn), {
          [A.subnetRefusals]: {
            L: [{ M: { subnetId: s('subnet-0'), code: s('InsufficientFreeAddressesInSubnet'), atMs: n(0) } }],
          },
        }),
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
];
