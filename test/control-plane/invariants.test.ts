import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { podEniTags } from '../../shared/ec2/tags.js';
import type { InvariantReport } from '../../shared/invariants/checker.js';
import { launchEventBody, terminateEventBody } from './support/events.js';
import { Harness } from './support/harness.js';

const ids = (r: InvariantReport): number[] => [...new Set(r.violations.map((v) => v.invariant))].sort();

/** The checker must see each kind of violation, not only pass on healthy systems. */
describe('Function: checkInvariants', () => {
  let h: Harness;
  let id: string;
  let arn: string;
  beforeEach(async () => {
    h = await Harness.start();
    id = h.launchInstance('m5.large');
    arn = h.instanceArnOf(id);
    await h.drive(launchEventBody(id));
    expect((await h.check()).violations).toEqual([]);
  });
  afterEach(async () => {
    await h.close();
  });

  it('reports invariant 2 when a leased address is no longer on its ENI', async () => {
    const [lease] = await h.store.listLeases(arn);
    await h.ec2.unassignPrivateIpAddresses(lease!.eniId, { ips: [lease!.ip] });
    const report = await h.check();
    expect(ids(report)).toEqual([2]);
    expect(report.violations[0]).toMatchObject({ ip: lease!.ip, eniId: lease!.eniId });
  });

  it('does not report a RELEASING lease whose address is already unassigned', async () => {
    const [lease] = await h.store.listLeases(arn);
    await h.store.markReleasing(arn, lease!.ip, Date.now());
    await h.ec2.unassignPrivateIpAddresses(lease!.eniId, { ips: [lease!.ip] });
    expect((await h.check()).violations).toEqual([]);
  });

  it('reports invariant 3 for a tagged ENI left unattached and for an attached one without DeleteOnTermination', async () => {
    const [eni] = await h.ec2.describeNetworkInterfaces({ tags: { 'vpc-lease:instance-id': id } });
    await h.ec2.setDeleteOnTermination(eni!.eniId, eni!.attachment!.attachmentId, false);
    await h.ec2.createNetworkInterface({
      subnetId: h.subnetId,
      securityGroupIds: [],
      ipCount: 1,
      prefixCount: 0,
      tags: podEniTags('test', 'i-0000000000000aaaa', 1, Date.now() - 1000),
      clientToken: 'leaked-eni',
    });
    const report = await h.check();
    expect(ids(report)).toEqual([3]);
    expect(report.violations).toHaveLength(2);
  });

  it('reports invariant 4 for a READY node below minLeases and a FAILED node without reason', async () => {
    const node = (await h.store.getNode(arn))!;
    const leases = await h.store.listLeases(arn);
    for (const l of leases.slice(0, 10)) {
      await h.store.markReleasing(arn, l.ip, Date.now());
      await h.store.deleteReleasing(arn, l.ip);
      await h.ec2.unassignPrivateIpAddresses(l.eniId, { ips: [l.ip] });
    }
    const other = h.launchInstance('t3.medium');
    await h.store.createNode({
      ...node,
      instanceArn: h.instanceArnOf(other),
      instanceId: other,
      phase: 'FAILED',
      enis: [],
    });
    const report = await h.check();
    expect(ids(report)).toEqual([4]);
    const messages = report.violations.map((v) => v.message);
    expect(messages).toContain('READY node has 6 leases, below minLeases 8');
    expect(messages).toContain('FAILED node has no reason recorded');
  });

  it('reports invariant 5 for a second ENI at a device index and for an assigned address without a lease', async () => {
    await h.ec2.createNetworkInterface({
      subnetId: h.subnetId,
      securityGroupIds: [],
      ipCount: 1,
      prefixCount: 0,
      tags: podEniTags('test', id, 1, Date.now()),
      clientToken: 'duplicate-create',
    });
    const [lease] = await h.store.listLeases(arn);
    await h.store.markReleasing(arn, lease!.ip, Date.now());
    await h.store.deleteReleasing(arn, lease!.ip);
    const report = await h.check();
    expect(ids(report)).toContain(5);
    const messages = report.violations.filter((v) => v.invariant === 5).map((v) => v.message);
    expect(messages.some((m) => /2 ENIs for device index 1/.test(m))).toBe(true);
    expect(messages.some((m) => m.includes(`address ${lease!.ip}`) && m.includes('has no lease'))).toBe(true);
  });

  it('reports invariant 6 for leases that outlive their GONE node', async () => {
    const leases = await h.store.listLeases(arn);
    await h.drive(terminateEventBody(id));
    await h.store.putLeases(leases, Date.now());
    const report = await h.check();
    expect(ids(report)).toContain(6);
    expect(report.violations.filter((v) => v.invariant === 6)).toHaveLength(leases.length);
  });
});
