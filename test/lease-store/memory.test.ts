import { describe, expect, it } from 'vitest';
import { StoreUnavailableError } from '../../shared/errors.js';
import { MemoryLeaseStore } from '../support/memory-lease-store.js';
import { leaseStoreContract } from './contract.js';
import { holder, newInstanceArn, newLeases, nodeRecord } from './fixtures.js';

leaseStoreContract('MemoryLeaseStore', async () => new MemoryLeaseStore());

describe('Class: MemoryLeaseStore', () => {
  it('fails the next calls of an operation with an injected error, then recovers', async () => {
    const store = new MemoryLeaseStore();
    const arn = newInstanceArn();
    await store.putLeases(newLeases(arn, 2), 0);
    const outage = new StoreUnavailableError('failed to claim a lease: injected');
    store.failNext('claim', outage, 2);
    await expect(store.claim(arn, holder(1), 0)).rejects.toBe(outage);
    await expect(store.claim(arn, holder(1), 0)).rejects.toBe(outage);
    // A failed call changed nothing.
    expect(await store.countClaimable(arn, 0)).toBe(2);
    expect((await store.claim(arn, holder(1), 0)).state).toBe('CLAIMED');
  });

  it('hands out copies of node records, so a caller cannot change the stored one', async () => {
    const store = new MemoryLeaseStore();
    const arn = newInstanceArn();
    await store.createNode(nodeRecord(arn));
    const read = await store.getNode(arn);
    (read!.podSubnetIds as string[]).push('subnet-ffffffffffffffff0');
    expect((await store.getNode(arn))?.podSubnetIds).toEqual(['subnet-0123456789abcdef0']);
  });
});
