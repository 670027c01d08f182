import { parseArgs } from 'node:util';
import { startEc2Simulator } from './index.js';

/**
 * Runs the EC2 simulator alone: `tsx local-cloud/ec2/main.ts --port 4599 --time-scale 1 --throttling --latency`
 * and prints the endpoint for AWS_ENDPOINT_URL_EC2. Seeds one VPC and subnet when `--seed-subnet` is given.
 */
const { values } = parseArgs({
  options: {
    port: { type: 'string', default: '0' },
    seed: { type: 'string', default: '1' },
    'time-scale': { type: 'string', default: '1' },
    throttling: { type: 'boolean', default: false },
    latency: { type: 'boolean', default: false },
    'seed-subnet': { type: 'string' },
  },
});

const sim = await startEc2Simulator({
  port: Number(values.port),
  seed: Number(values.seed),
  timeScale: Number(values['time-scale']),
  throttling: values.throttling,
  latency: values.latency,
});
const out: Record<string, string> = { endpoint: sim.endpoint };
if (values['seed-subnet']) {
  const vpc = sim.admin.seedVpc('10.0.0.0/16');
  out['vpcId'] = vpc.vpcId;
  out['subnetId'] = sim.admin.seedSubnet(vpc.vpcId, values['seed-subnet']).subnetId;
}
process.stdout.write(`${JSON.stringify(out)}\n`);
const stop = (): void => {
  void sim.close().then(() => process.exit(0));
};
process.on('SIGINT', stop);
process.on('SIGTERM', stop);
