import { describe, expect, it } from 'vitest';
import { chooseSubnet, type SubnetChoiceInput } from '../../shared/planner/subnet-choice.js';

const subnet = (subnetId: string, availableIpCount: number, availabilityZone = 'az-a') => ({
  subnetId,
  cidr: `10.0.${subnetId.length}.0/24`,
  availabilityZone,
  availableIpCount,
});

const base: SubnetChoiceInput = {
  wanted: { ipCount: 9, prefixCount: 0 },
  candidates: [subnet('subnet-a', 40), subnet('subnet-bb', 200), subnet('subnet-ccc', 300, 'az-b')],
  availabilityZone: 'az-a',
  refused: [],
  prefixFallbackToAddresses: true,
  addressSlotsPerEni: 9,
};

describe('chooseSubnet (pure)', () => {
  it('takes the subnet of the AZ with the most free addresses that EC2 has not refused', () => {
    expect(chooseSubnet(base)?.subnetId).toBe('subnet-bb');
    const refused = [{ subnetId: 'subnet-bb', code: 'InsufficientFreeAddressesInSubnet', forPrefixes: false } as const];
    expect(chooseSubnet({ ...base, refused })).toMatchObject({ subnetId: 'subnet-a', ipCount: 9, fallback: false });
  });

  it('asks for what a subnet still holds, less the ENI primary address, and nothing from an empty one', () => {
    expect(chooseSubnet({ ...base, candidates: [subnet('subnet-a', 5)] })?.ipCount).toBe(4);
    expect(chooseSubnet({ ...base, candidates: [subnet('subnet-a', 1)] })).toBeUndefined();
  });

  it('keeps prefixes in a subnet that may have a /28, and falls back to addresses only where configured', () => {
    const wanted = { ipCount: 0, prefixCount: 2 };
    expect(chooseSubnet({ ...base, wanted })).toMatchObject({ subnetId: 'subnet-bb', prefixCount: 2, ipCount: 0 });
    const refused = [
      { subnetId: 'subnet-bb', code: 'InsufficientCidrBlocks', forPrefixes: true },
      { subnetId: 'subnet-a', code: 'InsufficientCidrBlocks', forPrefixes: true },
    ] as const;
    // Refused for /28s, both still have single addresses: the most free one gets them, up to the ENI's slots.
    expect(chooseSubnet({ ...base, wanted, refused })).toMatchObject({
      subnetId: 'subnet-bb',
      ipCount: 9,
      prefixCount: 0,
      fallback: true,
    });
    expect(chooseSubnet({ ...base, wanted, refused, prefixFallbackToAddresses: false })).toBeUndefined();
  });

  it('skips in the fallback a subnet that refused single addresses too', () => {
    const refused = [
      { subnetId: 'subnet-bb', code: 'InsufficientCidrBlocks', forPrefixes: true },
      { subnetId: 'subnet-bb', code: 'InsufficientFreeAddressesInSubnet', forPrefixes: false },
      { subnetId: 'subnet-a', code: 'InsufficientCidrBlocks', forPrefixes: true },
    ] as const;
    expect(chooseSubnet({ ...base, wanted: { ipCount: 0, prefixCount: 1 }, refused })?.subnetId).toBe('subnet-a');
  });

  it('never leaves the AZ: a roomy subnet elsewhere is no candidate', () => {
    const refused = ['subnet-a', 'subnet-bb'].map((subnetId) => ({
      subnetId,
      code: 'InsufficientFreeAddressesInSubnet' as const,
      forPrefixes: false,
    }));
    expect(chooseSubnet({ ...base, refused })).toBeUndefined();
  });
});
