import { beforeEach, describe, expect, it } from 'vitest';
import type { Lease, NewLease } from '../../shared/domain/lease.js';
import { SdkDynamoApi } from '../../shared/dynamo/sdk-client.js';
import { NoFreeLeaseError, StoreUnavailableError } from '../../shared/errors.js';
import { ipFamilyOf } from '../../shared/ipv6.js';
import { claimPodLeases, findPodLeases } from '../../shared/lease-store/claim-pair.js';
import { DynamoLeaseStore } from '../../shared/lease-store/dynamo-lease-store.js';
import { encodeNewLease } from '../../shared/lease-store/item-codec.js';
import { CountingApi } from './counting-api.js';
import { useDynalite } from './dynalite-env.js';
import { holder, newInstanceArn, newLeases } from './fixtures.js';

const env = useDynalite();
const NOW_MS = 1_767_225_600_000;
const ENI_A = { eniId: 'eni-0aaaaaaaaaaaaaaa1', mac: '02:00:00:00:0a:01', deviceIndex: 1 };
const ENI_B = { eniId: 'eni-0bbbbbbbbbbbbbbb2', mac: '02:00:00:00:0b:02', deviceIndex: 2 };
const V6_SUBNET = '2600:1f18:aa:1::/64';

/** IPv6 leases of one ENI, as the control plane writes them: inside one /80 of the subnet's /64. */
function v6Leases(arn: string, eni: typeof ENI_A, count: number, first = 0x10): NewLease[] {
  const prefix = `2600:1f18:aa:1:${eni.deviceIndex}::/80`;
  return Array.from({ length: count }, (_, i) => ({
    instanceArn: arn,
    ip: `2600:1f18:aa:1:${eni.deviceIndex}::${(first + i).toString(16)}`,
    ...eni,
    subnetId: 'subnet-0123456789abcdef0',
    subnetCidr: V6_SUBNET,
    gateway: '2600:1f18:aa:1::1',
    prefix,
  }));
}

function v4Leases(arn: string, eni: typeof ENI_A, count: number): NewLease[] {
  return newLeases(arn, count).map((l, i) => ({ ...l, ...eni, ip: `10.0.${eni.deviceIndex}.${10 + i}` }));
}

describe('Function: claimPodLeases (dual stack on DynamoDB, dynalite)', () => {
  let api: CountingApi;
  let store: DynamoLeaseStore;
  let arn: string;

  /** IPv6 lease items are written as the control plane's putLeases writes them: one conditional put each. */
  async function seed(leases: NewLease[]): Promise<void> {
    const tableName = (store as unknown as { table: string }).table;
    for (const lease of leases)
      await api.putItem({
        TableName: tableName,
        Item: encodeNewLease(lease, NOW_MS),
        ConditionExpression: 'attribute_not_exists(sk)',
      });
  }

  beforeEach(async () => {
    api = new CountingApi(new SdkDynamoApi(env.sdkClient()));
    const tableName = await env.freshTable();
    store = new DynamoLeaseStore({ api, tableName, sleep: async () => {} });
    arn = newInstanceArn();
  });

  it('claims one lease of each family on the same ENI for one holder', async () => {
    await seed([
      ...v4Leases(arn, ENI_A, 3),
      ...v6Leases(arn, ENI_A, 3),
      ...v4Leases(arn, ENI_B, 3),
      ...v6Leases(arn, ENI_B, 3),
    ]);
    for (let n = 0; n < 6; n++) {
      const [v4, v6] = await claimPodLeases(store, arn, holder(n), NOW_MS, 'dual', { checkExisting: false });
      expect(ipFamilyOf(v4.ip)).toBe('ipv4');
      expect(v6 && ipFamilyOf(v6.ip)).toBe('ipv6');
      expect(v6?.eniId).toBe(v4.eniId);
      expect([v4.holder?.containerId, v6?.holder?.containerId]).toEqual([`container-${n}`, `container-${n}`]);
    }
    await expect(claimPodLeases(store, arn, holder(9), NOW_MS, 'dual')).rejects.toBeInstanceOf(NoFreeLeaseError);
  });

  it('never pairs across ENIs: no IPv6 lease left on the IPv4 lease’s ENI fails the pair and frees the IPv4 lease', async () => {
    // ENI A: an IPv4 lease and no IPv6 one; ENI B: only an IPv6 lease. Without the eniId narrowing the pair
    // would be made across the two ENIs (the negative control: remove `eniId` in claim-pair.ts and this fails).
    await seed([...v4Leases(arn, ENI_A, 1), ...v6Leases(arn, ENI_B, 1)]);
    await expect(claimPodLeases(store, arn, holder(1), NOW_MS, 'dual')).rejects.toBeInstanceOf(NoFreeLeaseError);
    const leases = await store.listLeases(arn);
    expect(leases.filter((l) => l.state === 'CLAIMED')).toEqual([]);
    // Given back with no cooldown: claimable at once by an IPv4-only claim.
    const again = await store.claim(arn, holder(2), NOW_MS, { family: 'ipv4' });
    expect(again.ip).toBe('10.0.1.10');
  });

  it('undoes the first claim when a failure is injected between the two writes', async () => {
    await seed([...v4Leases(arn, ENI_A, 2), ...v6Leases(arn, ENI_A, 2)]);
    const boom = new Error('injected between the claims');
    let seen: Lease | undefined;
    await expect(
      claimPodLeases(store, arn, holder(1), NOW_MS, 'dual', {}, (first) => {
        seen = first;
        throw boom;
      }),
    ).rejects.toBe(boom);
    expect(seen && ipFamilyOf(seen.ip)).toBe('ipv4');
    const after = await store.getLease(arn, seen!.ip);
    expect(after?.state).toBe('COOLDOWN');
    expect(after?.reusableAtMs).toBe(NOW_MS);
    expect(await findPodLeases(store, arn, 'container-1', 'eth0', 'dual')).toEqual([]);
  });

  it('reports the store failure, not the claim error, when the undo cannot be written either', async () => {
    await seed([...v4Leases(arn, ENI_A, 2), ...v6Leases(arn, ENI_A, 2)]);
    const down = new StoreUnavailableError('injected: the store is unreachable');
    const failingRelease: typeof store = Object.create(store);
    failingRelease.release = () => Promise.reject(down);
    let first: Lease | undefined;
    const claim = claimPodLeases(failingRelease, arn, holder(1), NOW_MS, 'dual', {}, (lease) => {
      first = lease;
      throw new NoFreeLeaseError('injected between the claims');
    });
    await expect(claim).rejects.toBeInstanceOf(StoreUnavailableError);
    await expect(claim).rejects.toThrow(/injected between the claims.*could not be given back.*unreachable/);
    // Still CLAIMED by the holder: what the caller's recovery (release by holder, or the kept intent) looks up.
    expect(await findPodLeases(store, arn, 'container-1', 'eth0', 'dual')).toEqual([first]);
  });

  it('a crash between the two claims is completed by the repeated ADD, on the same ENI and the same IPv4 address', async () => {
    await seed([...v4Leases(arn, ENI_A, 2), ...v6Leases(arn, ENI_A, 2), ...v6Leases(arn, ENI_B, 4)]);
    // The crashed ADD: its first write landed, the process died before the second.
    const half = await store.claim(arn, holder(1), NOW_MS, { family: 'ipv4', checkExisting: false });
    expect(await findPodLeases(store, arn, 'container-1', 'eth0', 'dual')).toEqual([half]);
    const [v4, v6] = await claimPodLeases(store, arn, holder(1), NOW_MS, 'dual');
    expect(v4.ip).toBe(half.ip);
    expect(v6?.eniId).toBe(ENI_A.eniId);
    // Invariant 1: a repeated ADD of the same attachment returns the same addresses, for both families.
    const repeated = await claimPodLeases(store, arn, holder(1), NOW_MS, 'dual');
    expect(repeated.map((l) => l.ip)).toEqual([v4.ip, v6?.ip]);
    const found = await findPodLeases(store, arn, 'container-1', 'eth0', 'dual');
    expect(found.map((l) => l.ip)).toEqual([v4.ip, v6?.ip]);
  });

  it('many ADDs racing for the last pairs: each holder ends with both or neither, every address held once', async () => {
    const pairs = 3;
    const racers = 10;
    await seed([...v4Leases(arn, ENI_A, pairs), ...v6Leases(arn, ENI_A, pairs)]);
    const outcomes = await Promise.allSettled(
      Array.from({ length: racers }, (_, n) =>
        claimPodLeases(store, arn, holder(n), NOW_MS, 'dual', { checkExisting: false, maxAttempts: 16 }),
      ),
    );
    const won = outcomes.filter((o) => o.status === 'fulfilled');
    const lost = outcomes.flatMap((o) => (o.status === 'rejected' ? [o.reason] : []));
    expect(won).toHaveLength(pairs);
    for (const reason of lost) expect(reason).toBeInstanceOf(NoFreeLeaseError);
    const claimed = (await store.listLeases(arn)).filter((l) => l.state === 'CLAIMED');
    const byHolder = new Map<string, Lease[]>();
    for (const l of claimed) byHolder.set(l.holder!.containerId, [...(byHolder.get(l.holder!.containerId) ?? []), l]);
    expect(byHolder.size).toBe(pairs);
    for (const leases of byHolder.values())
      expect(leases.map((l) => ipFamilyOf(l.ip)).sort()).toEqual(['ipv4', 'ipv6']);
    // Invariant 1, both families: no address CLAIMED twice (one item per address makes two holders impossible;
    // the count shows that no pair was made of one address reused).
    expect(new Set(claimed.map((l) => l.ip)).size).toBe(claimed.length);
  });

  it('ipv4 and ipv6 nodes claim only their own family', async () => {
    await seed([...v4Leases(arn, ENI_A, 1), ...v6Leases(arn, ENI_A, 1)]);
    const [v6] = await claimPodLeases(store, arn, holder(1), NOW_MS, 'ipv6');
    expect(ipFamilyOf(v6.ip)).toBe('ipv6');
    await expect(claimPodLeases(store, arn, holder(2), NOW_MS, 'ipv6')).rejects.toBeInstanceOf(NoFreeLeaseError);
    const released = await store.release(arn, holder(1), NOW_MS, 0, v6.ip);
    expect(released?.state).toBe('COOLDOWN');
  });
});
