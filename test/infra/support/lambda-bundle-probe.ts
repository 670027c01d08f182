/**
 * Bundled by test/infra/lambda-bundle.test.ts exactly as the Lambdas are (infra/lambda-bundle.ts), then run in a
 * fresh Node: one SDK call through the bundle's own EC2 client, credentials and endpoint from the environment.
 */
import { DescribeSubnetsCommand, EC2Client } from '@aws-sdk/client-ec2';

const client = new EC2Client({});
try {
  const out = await client.send(new DescribeSubnetsCommand({}));
  process.stdout.write(JSON.stringify({ subnets: (out.Subnets ?? []).map((s) => s.SubnetId) }));
} catch (err) {
  process.stdout.write(JSON.stringify({ error: (err as Error).message }));
}
