import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import type { NodeRecord } from '../../shared/domain/node.js';
import { fromAttr, toAttr } from '../../shared/lease-store/attribute-value.js';
import {
  decodeLease,
  decodeNode,
  encodeNewLease,
  encodeNode,
  NODE_WRITABLE_ATTRS,
} from '../../shared/lease-store/item-codec.js';
import { newInstanceArn, newLeases, nodeRecord } from './fixtures.js';

describe('item codec', () => {
  it('round-trips a new lease and keeps the claimable-index key on it', () => {
    const [lease] = newLeases(newInstanceArn(), 1, { prefix: '10.0.1.0/28' });
    const item = encodeNewLease(lease!, 42);
    // The local index is keyed on the partition key itself: no second, node-writable partition attribute.
    expect(item['cPk']).toBeUndefined();
    expect(item['pk']).toEqual({ S: lease!.instanceArn });
    expect(item['cAt']).toEqual({ N: '42' });
    expect(decodeLease(item)).toEqual({ ...lease, state: 'FREE', createdAtMs: 42, reusableAtMs: 42, version: 1 });
  });

  it('keeps a FREE lease item small (every pod start reads a page of them)', () => {
    const [lease] = newLeases(newInstanceArn(), 1);
    const bytes = JSON.stringify(encodeNewLease(lease!, Date.UTC(2026, 0, 1))).length;
    process.stdout.write(`lease item, DynamoDB JSON: ${bytes} bytes\n`);
    // 16 candidates must fit one 4 KB read unit with room to spare.
    expect(bytes * 16).toBeLessThan(8192);
  });

  it('round-trips node records, nested parts included', () => {
    const arn = newInstanceArn();
    fc.assert(
      fc.property(
        fc.constantFrom<NodeRecord['phase']>('PENDING', 'READY', 'FAILED'),
        fc.array(fc.ipV4(), { maxLength: 5 }),
        fc.option(fc.string(), { nil: undefined }),
        fc.nat(),
        fc.option(fc.nat(), { nil: undefined }),
        (phase, addresses, failureReason, version, hookCompletedAtMs) => {
          const base = nodeRecord(arn);
          const node: NodeRecord = {
            ...base,
            phase,
            version,
            ...(failureReason !== undefined ? { failureReason } : {}),
            ...(hookCompletedAtMs !== undefined ? { hookCompletedAtMs } : {}),
            enis: [{ ...base.enis[0]!, addresses, eniId: 'eni-0123456789abcdef0', step: 'LEASED' }],
          };
          expect(decodeNode(encodeNode(node, version))).toEqual(node);
        },
      ),
    );
  });

  it('reads nothing from the node item that a node may write (no IAM condition sees the sort key)', () => {
    const node = nodeRecord(newInstanceArn());
    const item = encodeNode(node, 7);
    const writable = NODE_WRITABLE_ATTRS.filter((a) => a !== 'pk' && a !== 'sk');
    // Negative control: the node item does carry attributes, and decodeNode does read them.
    expect(decodeNode({ ...item, iid: { S: 'i-0fffffffffffffff0' } }).instanceId).toBe('i-0fffffffffffffff0');
    fc.assert(
      fc.property(
        fc.subarray(writable, { minLength: 1 }),
        fc.oneof(
          fc.constant<'remove'>('remove'),
          fc.nat().map((v) => ({ N: String(v) })),
          fc.string().map((v) => ({ S: v })),
        ),
        (attrs, value) => {
          const tampered = { ...item };
          for (const attr of attrs) {
            if (value === 'remove') delete tampered[attr];
            else tampered[attr] = value;
          }
          expect(decodeNode(tampered)).toEqual(decodeNode(item));
        },
      ),
    );
  });

  it('round-trips plain JSON values through attribute values', () => {
    fc.assert(
      fc.property(fc.jsonValue(), (value) => {
        // JSON has no -0 and DynamoDB numbers have none either.
        const normalised = JSON.parse(JSON.stringify(value));
        expect(fromAttr(toAttr(normalised))).toEqual(normalised);
      }),
    );
  });

  it('keeps a map key named __proto__ as data', () => {
    const value = JSON.parse('{"__proto__":{"x":1},"y":[true,null,"s"]}');
    const attr = toAttr(value);
    expect(Object.keys(attr.M ?? {})).toEqual(['__proto__', 'y']);
    expect(fromAttr(attr)).toEqual(value);
  });

  it('rejects an item that is not a lease', () => {
    expect(() => decodeLease({ pk: { S: 'x' }, sk: { S: 'node' } })).toThrow(/not a lease/);
    const item = encodeNewLease(newLeases(newInstanceArn(), 1)[0]!, 1);
    expect(() => decodeLease({ ...item, st: { S: 'BORROWED' } })).toThrow(/unknown state/);
  });
});
