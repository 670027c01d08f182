import {
  type _InstanceType,
  CreateNetworkInterfaceCommand,
  DescribeNetworkInterfacesCommand,
  DescribeSubnetsCommand,
  EC2Client,
  type EC2ClientConfig,
  type NetworkInterface,
  RunInstancesCommand,
} from '@aws-sdk/client-ec2';
import {
  type Ec2SimulatorOptions,
  type Ec2SimulatorServer,
  startEc2Simulator,
} from '../../../local-cloud/ec2/index.js';

export interface Ec2Harness {
  readonly sim: Ec2SimulatorServer;
  readonly ec2: EC2Client;
  readonly vpcId: string;
  readonly subnetId: string;
  client(config?: Partial<EC2ClientConfig>): EC2Client;
  close(): Promise<void>;
}

/** A simulator with one VPC (10.0.0.0/16) and one /24 subnet in us-east-1a, and a real EC2Client on it. */
export async function startHarness(options: Ec2SimulatorOptions = {}): Promise<Ec2Harness> {
  const sim = await startEc2Simulator(options);
  const clients: EC2Client[] = [];
  const client = (config: Partial<EC2ClientConfig> = {}): EC2Client => {
    const c = new EC2Client({
      endpoint: sim.endpoint,
      region: 'us-east-1',
      credentials: { accessKeyId: 'AKIDEXAMPLE', secretAccessKey: 'secret' },
      maxAttempts: 1,
      ...config,
    });
    clients.push(c);
    return c;
  };
  const vpc = sim.admin.seedVpc('10.0.0.0/16');
  const subnet = sim.admin.seedSubnet(vpc.vpcId, '10.0.1.0/24', 'us-east-1a');
  return {
    sim,
    ec2: client(),
    vpcId: vpc.vpcId,
    subnetId: subnet.subnetId,
    client,
    close: async () => {
      for (const c of clients) c.destroy();
      await sim.close();
    },
  };
}

/** The EC2 error code a rejected SDK call carried. */
export async function errorCode(call: Promise<unknown>): Promise<string> {
  try {
    await call;
  } catch (err) {
    return (err as { name: string }).name;
  }
  throw new Error('expected the call to fail');
}

export async function waitFor<T>(probe: () => Promise<T | undefined>, what: string, timeoutMs = 10_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}

/** RunInstances of one instance through the SDK; returns its id. */
export async function launchInstance(h: Ec2Harness, instanceType = 'm5.large', subnetId = h.subnetId): Promise<string> {
  const run = await h.ec2.send(
    new RunInstancesCommand({
      InstanceType: instanceType as _InstanceType,
      SubnetId: subnetId,
      MinCount: 1,
      MaxCount: 1,
    }),
  );
  return run.Instances?.[0]?.InstanceId as string;
}

/** CreateNetworkInterface in the harness subnet (or as `extra` says); returns the ENI id. */
export async function createEni(h: Ec2Harness, extra: Record<string, unknown> = {}): Promise<string> {
  const out = await h.ec2.send(new CreateNetworkInterfaceCommand({ SubnetId: h.subnetId, ...extra }));
  return out.NetworkInterface?.NetworkInterfaceId as string;
}

export async function describeEni(h: Ec2Harness, eniId: string): Promise<NetworkInterface> {
  const out = await h.ec2.send(new DescribeNetworkInterfacesCommand({ NetworkInterfaceIds: [eniId] }));
  const eni = out.NetworkInterfaces?.[0];
  if (!eni) throw new Error(`no ${eniId}`);
  return eni;
}

/** The subnet's AvailableIpAddressCount as DescribeSubnets reports it. */
export async function subnetFreeCount(h: Ec2Harness, subnetId = h.subnetId): Promise<number> {
  const out = await h.ec2.send(new DescribeSubnetsCommand({ SubnetIds: [subnetId] }));
  return out.Subnets?.[0]?.AvailableIpAddressCount as number;
}
