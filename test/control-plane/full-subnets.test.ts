import { CreateNetworkInterfaceCommand } from '@aws-sdk/client-ec2';
import { afterEach, describe, expect, it } from 'vitest';
import { formatViolations } from '../../shared/invariants/checker.js';
import { launchEventBody } from './support/events.js';
import { Harness, type HarnessOptions } from './support/harness.js';

/**
 * Full subnets through the EC2 simulator's own accounting (no injected faults where the subnet itself can be
 * made full): a fragmented subnet refuses /28s while it still has addresses, and the launch goes elsewhere,
 * falls back to single addresses, or, when nothing can hold its minimum, says so on the node item.
 */
describe('Function: runLaunch with full pod subnets (EC2 simulator + dynalite)', () => {
  let h: Harness;
  afterEach(async () => {
    await h?.close();
  });

  const start = async (options?: HarnessOptions): Promise<void> => {
    h = await Harness.start(options);
  };

  /**
   * A /24 with one address taken in each of its 14 delegable /28s: 235 addresses free, the most of any
   * subnet here, and not one aligned block — the planner picks it first and EC2 answers InsufficientCidrBlocks.
   */
  async function fragmentedSubnet(third: number): Promise<string> {
    const subnetId = h.sim.admin.seedSubnet(h.vpcId, `10.0.${third}.0/24`, 'us-east-1a').subnetId;
    for (let block = 1; block < 15; block += 1) {
      await h.ec2.client.send(
        new CreateNetworkInterfaceCommand({ SubnetId: subnetId, PrivateIpAddress: `10.0.${third}.${block * 16 + 5}` }),
      );
    }
    return subnetId;
  }

  async function launch(type = 'm5.large') {
    const id = h.launchInstance(type);
    await h.drive(launchEventBody(id));
    const node = await h.store.getNode(h.instanceArnOf(id));
    const leases = await h.store.listLeases(h.instanceArnOf(id));
    return { id, node, leases, ifaces: h.sim.api.instanceInterfaces(id).filter((i) => i.deviceIndex > 0) };
  }

  const refusedBy = (reason: string) => h.metrics.totalsBy('SubnetFull', 'Reason')[reason] ?? 0;

  it('moves /28s refused by a fragmented subnet to the next subnet of the AZ and records why', async () => {
    await start({ config: { prefixDelegation: true } });
    const fragmented = await fragmentedSubnet(8);
    const roomy = h.sim.admin.seedSubnet(h.vpcId, '10.0.9.0/25', 'us-east-1a').subnetId;
    h.configure({ prefixDelegation: true, podSubnetIds: [fragmented, roomy] });

    const { node, leases, ifaces } = await launch();
    expect(node?.phase).toBe('READY');
    expect(ifaces.map((i) => i.subnetId)).toEqual([roomy]);
    expect(ifaces[0]?.ipv4Prefixes.length).toBeGreaterThan(0);
    expect(leases.every((l) => l.subnetId === roomy && l.prefix !== undefined)).toBe(true);
    expect(node?.subnetRefusals?.map((r) => [r.subnetId, r.code])).toEqual([[fragmented, 'InsufficientCidrBlocks']]);
    expect(refusedBy('InsufficientCidrBlocks')).toBe(1);
    expect(formatViolations(await h.check())).toBe('');
  });

  it('falls back to single addresses in prefix mode when no subnet has a /28 left (prefixFallbackToAddresses)', async () => {
    await start({ config: { prefixDelegation: true } });
    const fragmented = await fragmentedSubnet(8);
    h.configure({ prefixDelegation: true, podSubnetIds: [fragmented] });

    const { node, leases, ifaces } = await launch();
    expect(node?.phase).toBe('READY');
    expect(ifaces).toHaveLength(1);
    expect(ifaces[0]?.subnetId).toBe(fragmented);
    expect(ifaces[0]?.ipv4Prefixes).toEqual([]);
    // m5.large: 10 IPv4 per ENI, the primary included.
    expect(ifaces[0]?.privateIpAddresses).toHaveLength(10);
    expect(leases).toHaveLength(9);
    expect(leases.every((l) => l.prefix === undefined && l.subnetId === fragmented)).toBe(true);
    expect(node?.subnetRefusals?.map((r) => r.code)).toEqual(['InsufficientCidrBlocks']);
    expect(h.autoScaling.resultFor(node?.instanceId ?? '')).toEqual(['CONTINUE']);
    expect(formatViolations(await h.check())).toBe('');
  });

  it('without the fallback, abandons and says on the node item which subnet refused and why', async () => {
    await start({ config: { prefixDelegation: true, prefixFallbackToAddresses: false } });
    const fragmented = await fragmentedSubnet(8);
    h.configure({ prefixDelegation: true, prefixFallbackToAddresses: false, podSubnetIds: [fragmented] });

    const { id, node, leases } = await launch();
    expect(node?.phase).toBe('FAILED');
    expect(node?.failureReason).toBe(
      `subnets-exhausted: every candidate subnet is out of room for the launch's minimum (0 of minLeases 8 possible); EC2 refused ${fragmented} InsufficientCidrBlocks`,
    );
    expect(leases).toEqual([]);
    expect(h.autoScaling.resultFor(id)).toEqual(['ABANDON']);
    // The alarm's query: LaunchAbandoned with Reason subnets-exhausted (infra/construct/monitoring.ts).
    expect(h.metrics.totalsBy('LaunchAbandoned', 'Reason')['subnets-exhausted']).toBe(1);
    expect(formatViolations(await h.check())).toBe('');
  });

  it('records an address refusal and carries on in the next subnet (InsufficientFreeAddressesInSubnet)', async () => {
    await start();
    const first = h.sim.admin.seedSubnet(h.vpcId, '10.0.8.0/24', 'us-east-1a').subnetId;
    const second = h.sim.admin.seedSubnet(h.vpcId, '10.0.9.0/25', 'us-east-1a').subnetId;
    h.configure({ podSubnetIds: [first, second] });
    // The plan read `first` as roomy; another creator takes it first (a race EC2 answers with this code).
    h.sim.admin.failNext({ action: 'CreateNetworkInterface', code: 'InsufficientFreeAddressesInSubnet', count: 2 });

    const { node, ifaces } = await launch();
    expect(node?.phase).toBe('READY');
    expect(ifaces.map((i) => i.subnetId)).toEqual([second, second]);
    expect(node?.subnetRefusals?.map((r) => [r.subnetId, r.code])).toEqual([
      [first, 'InsufficientFreeAddressesInSubnet'],
    ]);
    expect(refusedBy('InsufficientFreeAddressesInSubnet')).toBe(2);
    expect(h.metrics.totalsBy('SubnetFull', 'SubnetId')).toEqual({ [first]: 2 });
  });
});
