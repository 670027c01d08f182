import {
  AssignPrivateIpAddressesCommand,
  AttachNetworkInterfaceCommand,
  DeleteNetworkInterfaceCommand,
  DetachNetworkInterfaceCommand,
  ModifyNetworkInterfaceAttributeCommand,
  type NetworkInterface,
} from '@aws-sdk/client-ec2';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import {
  createEni as createEniIn,
  describeEni as describeEniIn,
  type Ec2Harness,
  errorCode,
  launchInstance,
  startHarness,
  subnetFreeCount,
  waitFor,
} from './harness.js';

let h: Ec2Harness;

const launch = (instanceType?: string, subnetId?: string): Promise<string> => launchInstance(h, instanceType, subnetId);
const createEni = (extra?: Record<string, unknown>): Promise<string> => createEniIn(h, extra);
const describeEni = (eniId: string): Promise<NetworkInterface> => describeEniIn(h, eniId);
const freeCount = (subnetId?: string): Promise<number> => subnetFreeCount(h, subnetId);

describe('EC2 simulator: attachments', () => {
  beforeEach(async () => {
    h = await startHarness();
  });
  afterEach(async () => {
    await h.close();
  });

  it('attaches asynchronously: attaching, then attached after the scaled delay; pausable', async () => {
    h.sim.admin.setTimeScale(0.01);
    h.sim.admin.setDelays({ attachMs: 2000, instancePendingMs: 0 });
    const instanceId = await launch();
    const eniId = await createEni();
    h.sim.admin.pauseAttachments();
    const att = await h.ec2.send(
      new AttachNetworkInterfaceCommand({ NetworkInterfaceId: eniId, InstanceId: instanceId, DeviceIndex: 1 }),
    );
    expect(att.AttachmentId).toMatch(/^eni-attach-[0-9a-f]{17}$/);
    const attaching = await describeEni(eniId);
    expect(attaching.Attachment?.Status).toBe('attaching');
    expect(attaching.Status).toBe('in-use');
    // Paused: well past the 20 ms real delay it is still attaching.
    await new Promise((resolve) => setTimeout(resolve, 60));
    expect((await describeEni(eniId)).Attachment?.Status).toBe('attaching');
    h.sim.admin.resumeAttachments();
    const attached = await waitFor(async () => {
      const eni = await describeEni(eniId);
      return eni.Attachment?.Status === 'attached' ? eni : undefined;
    }, 'attached');
    expect(attached.Attachment?.InstanceId).toBe(instanceId);
    expect(attached.Attachment?.DeviceIndex).toBe(1);
    expect(attached.Attachment?.DeleteOnTermination).toBe(false);
    expect(h.sim.api.instanceInterfaces(instanceId).map((i) => [i.deviceIndex, i.eniId, i.attachmentState])).toEqual([
      [0, expect.stringMatching(/^eni-/), 'attached'],
      [1, eniId, 'attached'],
    ]);
  });

  it('rejects a device index in use, an ENI in use and more ENIs than the instance type allows', async () => {
    const instanceId = await launch('t3.small'); // 3 ENIs, 4 IPv4 per ENI
    const a = await createEni();
    const b = await createEni();
    const c = await createEni();
    await h.ec2.send(
      new AttachNetworkInterfaceCommand({ NetworkInterfaceId: a, InstanceId: instanceId, DeviceIndex: 1 }),
    );
    expect(
      await errorCode(
        h.ec2.send(
          new AttachNetworkInterfaceCommand({ NetworkInterfaceId: b, InstanceId: instanceId, DeviceIndex: 1 }),
        ),
      ),
    ).toBe('InvalidParameterValue');
    expect(
      await errorCode(
        h.ec2.send(
          new AttachNetworkInterfaceCommand({ NetworkInterfaceId: a, InstanceId: instanceId, DeviceIndex: 2 }),
        ),
      ),
    ).toBe('InvalidNetworkInterface.InUse');
    await h.ec2.send(
      new AttachNetworkInterfaceCommand({ NetworkInterfaceId: b, InstanceId: instanceId, DeviceIndex: 2 }),
    );
    expect(
      await errorCode(
        h.ec2.send(
          new AttachNetworkInterfaceCommand({ NetworkInterfaceId: c, InstanceId: instanceId, DeviceIndex: 3 }),
        ),
      ),
    ).toBe('AttachmentLimitExceeded');
    expect((await describeEni(c)).Status).toBe('available');
  });

  it('enforces per-network-card limits on multi-card types', async () => {
    const limits = [...(await import('../../../shared/data/catalog.js')).loadInstanceTypes().values()].find(
      (l) => l.networkCards.length > 1,
    );
    if (!limits) throw new Error('the instance-type table has no multi-card type');
    const instanceId = await launch(limits.instanceType);
    const card1 = limits.networkCards.find((c) => c.networkCardIndex === 1);
    expect(card1).toBeDefined();
    const eniId = await createEni();
    await h.ec2.send(
      new AttachNetworkInterfaceCommand({
        NetworkInterfaceId: eniId,
        InstanceId: instanceId,
        DeviceIndex: 1,
        NetworkCardIndex: 1,
      }),
    );
    expect((await describeEni(eniId)).Attachment?.NetworkCardIndex).toBe(1);
    const other = await createEni();
    expect(
      await errorCode(
        h.ec2.send(
          new AttachNetworkInterfaceCommand({
            NetworkInterfaceId: other,
            InstanceId: instanceId,
            DeviceIndex: 1,
            NetworkCardIndex: limits.networkCards.length,
          }),
        ),
      ),
    ).toBe('InvalidParameterValue');
  });

  it('enforces the IPv4-per-ENI limit of the instance type, counting prefixes as slots', async () => {
    const instanceId = await launch('t3.small'); // 4 IPv4 per ENI, primary included
    const eniId = await createEni({ SecondaryPrivateIpAddressCount: 2 });
    await h.ec2.send(
      new AttachNetworkInterfaceCommand({ NetworkInterfaceId: eniId, InstanceId: instanceId, DeviceIndex: 1 }),
    );
    const free = await freeCount();
    expect(
      await errorCode(
        h.ec2.send(
          new AssignPrivateIpAddressesCommand({ NetworkInterfaceId: eniId, SecondaryPrivateIpAddressCount: 2 }),
        ),
      ),
    ).toBe('PrivateIpAddressLimitExceeded');
    expect(await freeCount()).toBe(free);
    await h.ec2.send(
      new AssignPrivateIpAddressesCommand({ NetworkInterfaceId: eniId, SecondaryPrivateIpAddressCount: 1 }),
    );
    expect((await describeEni(eniId)).PrivateIpAddresses).toHaveLength(4);
    expect(
      await errorCode(
        h.ec2.send(new AssignPrivateIpAddressesCommand({ NetworkInterfaceId: eniId, Ipv4PrefixCount: 1 })),
      ),
    ).toBe('PrivateIpAddressLimitExceeded');
    // An ENI holding more than the type allows cannot be attached to it.
    const big = await createEni({ SecondaryPrivateIpAddressCount: 5 });
    expect(
      await errorCode(
        h.ec2.send(
          new AttachNetworkInterfaceCommand({ NetworkInterfaceId: big, InstanceId: instanceId, DeviceIndex: 2 }),
        ),
      ),
    ).toBe('PrivateIpAddressLimitExceeded');
  });

  it('refuses to delete an attached ENI, detaches asynchronously, then deletes and frees its addresses', async () => {
    h.sim.admin.setTimeScale(0.001);
    const instanceId = await launch();
    const before = await freeCount();
    const eniId = await createEni({ SecondaryPrivateIpAddressCount: 3 });
    const att = await h.ec2.send(
      new AttachNetworkInterfaceCommand({ NetworkInterfaceId: eniId, InstanceId: instanceId, DeviceIndex: 1 }),
    );
    expect(await errorCode(h.ec2.send(new DeleteNetworkInterfaceCommand({ NetworkInterfaceId: eniId })))).toBe(
      'InvalidNetworkInterface.InUse',
    );
    await waitFor(
      async () => ((await describeEni(eniId)).Attachment?.Status === 'attached' ? true : undefined),
      'attached',
    );
    h.sim.admin.pauseAttachments();
    await h.ec2.send(new DetachNetworkInterfaceCommand({ AttachmentId: att.AttachmentId }));
    expect((await describeEni(eniId)).Attachment?.Status).toBe('detaching');
    expect(await errorCode(h.ec2.send(new DeleteNetworkInterfaceCommand({ NetworkInterfaceId: eniId })))).toBe(
      'InvalidNetworkInterface.InUse',
    );
    h.sim.admin.resumeAttachments();
    await waitFor(async () => ((await describeEni(eniId)).Status === 'available' ? true : undefined), 'available');
    await h.ec2.send(new DeleteNetworkInterfaceCommand({ NetworkInterfaceId: eniId }));
    expect(await freeCount()).toBe(before);
    expect(await errorCode(describeEni(eniId))).toBe('InvalidNetworkInterfaceID.NotFound');
    expect(await errorCode(h.ec2.send(new DeleteNetworkInterfaceCommand({ NetworkInterfaceId: eniId })))).toBe(
      'InvalidNetworkInterfaceID.NotFound',
    );
    expect(await errorCode(h.ec2.send(new DetachNetworkInterfaceCommand({ AttachmentId: att.AttachmentId })))).toBe(
      'InvalidAttachmentID.NotFound',
    );
  });

  it('never detaches the boot ENI', async () => {
    const instanceId = await launch();
    const boot = h.sim.api.instanceInterfaces(instanceId)[0];
    const eni = await describeEni(boot?.eniId as string);
    expect(eni.Attachment?.DeviceIndex).toBe(0);
    expect(
      await errorCode(h.ec2.send(new DetachNetworkInterfaceCommand({ AttachmentId: eni.Attachment?.AttachmentId }))),
    ).toBe('OperationNotPermitted');
  });

  it('sets DeleteOnTermination through ModifyNetworkInterfaceAttribute for the matching attachment only', async () => {
    const instanceId = await launch();
    const eniId = await createEni();
    const att = await h.ec2.send(
      new AttachNetworkInterfaceCommand({ NetworkInterfaceId: eniId, InstanceId: instanceId, DeviceIndex: 1 }),
    );
    await h.ec2.send(
      new ModifyNetworkInterfaceAttributeCommand({
        NetworkInterfaceId: eniId,
        Attachment: { AttachmentId: att.AttachmentId, DeleteOnTermination: true },
      }),
    );
    expect((await describeEni(eniId)).Attachment?.DeleteOnTermination).toBe(true);
    const other = await createEni();
    expect(
      await errorCode(
        h.ec2.send(
          new ModifyNetworkInterfaceAttributeCommand({
            NetworkInterfaceId: other,
            Attachment: { AttachmentId: att.AttachmentId, DeleteOnTermination: false },
          }),
        ),
      ),
    ).toBe('InvalidAttachmentID.NotFound');
  });
});
