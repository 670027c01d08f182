/**
 * Bundled by test/infra/lambda-bundle.test.ts exactly as the Lambdas are (packaging/lambda-bundle.ts), then run in a
 * fresh Node: one SDK call through the bundle's own EC2 client, credentials and endpoint from the environment.
 * The filter and the decoded fields go through the schema traits (query names, XML names) that the bundle's
 * schema-key rewrite touches.
 */
import { DescribeSubnetsCommand, EC2Client } from '@aws-sdk/client-ec2';

const client = new EC2Client({});
const vpcId = process.env['PROBE_VPC_ID'];
try {
  const out = await client.send(
    new DescribeSubnetsCommand(vpcId ? { Filters: [{ Name: 'vpc-id', Values: [vpcId] }] } : {}),
  );
  const subnets = (out.Subnets ?? []).map((s) => ({
    id: s.SubnetId,
    cidr: s.CidrBlock,
    free: s.AvailableIpAddressCount,
  }));
  process.stdout.write(JSON.stringify({ subnets }));
} catch (err) {
  process.stdout.write(JSON.stringify({ error: (err as Error).message }));
}
