import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DynamoDBClient, GetItemCommand, PutItemCommand } from '@aws-sdk/client-dynamodb';
import { describe, expect, it } from 'vitest';
import { startLocalCloud } from '../../local-cloud/cloud.js';

/** Kinds of libuv handles keeping the process alive (servers, sockets, timers), counted. */
function activeHandles(): Record<string, number> {
  const counts: Record<string, number> = {};
  for (const kind of process.getActiveResourcesInfo()) counts[kind] = (counts[kind] ?? 0) + 1;
  return counts;
}

describe('startLocalCloud lifecycle', () => {
  it('keeps DynamoDB data under dataDir across restarts and leaves no server or timer behind', async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'local-cloud-'));
    const before = activeHandles();
    try {
      const first = await startLocalCloud({ dataDir, leaseTable: 'leases', timeScale: 0.01 });
      const write = new DynamoDBClient({
        endpoint: first.endpoints.dynamodb,
        region: first.region,
        credentials: { accessKeyId: 'l', secretAccessKey: 'l' },
      });
      await write.send(
        new PutItemCommand({ TableName: 'leases', Item: { pk: { S: 'node-a' }, sk: { S: 'node' }, v: { N: '7' } } }),
      );
      write.destroy();
      await first.close();

      const second = await startLocalCloud({ dataDir, leaseTable: 'leases', timeScale: 0.01 });
      const read = new DynamoDBClient({
        endpoint: second.endpoints.dynamodb,
        region: second.region,
        credentials: { accessKeyId: 'l', secretAccessKey: 'l' },
      });
      const item = await read.send(
        new GetItemCommand({ TableName: 'leases', Key: { pk: { S: 'node-a' }, sk: { S: 'node' } } }),
      );
      read.destroy();
      expect(item.Item?.['v']).toEqual({ N: '7' });
      const instance = second.ec2.api.launchInstance({
        instanceType: 'm5.large',
        subnetId: second.ec2.admin.seedSubnet(second.ec2.admin.seedVpc('10.9.0.0/16').vpcId, '10.9.0.0/24').subnetId,
      });
      await second.imds.endpointFor(instance.instanceId);
      second.createEventSourceMapping(second.createQueue('idle'), () => {});
      // dynalite, the IAM endpoint, EC2, Auto Scaling, SQS and one IMDS listener: the probe sees them running.
      expect((activeHandles()['TCPServerWrap'] ?? 0) - (before['TCPServerWrap'] ?? 0)).toBe(6);
      await second.close();
      await new Promise((r) => setTimeout(r, 50));
      const after = activeHandles();
      expect(after['TCPServerWrap'] ?? 0).toBe(before['TCPServerWrap'] ?? 0);
      expect(after['Timeout'] ?? 0).toBeLessThanOrEqual(before['Timeout'] ?? 0);
    } finally {
      rmSync(dataDir, { recursive: true, force: true });
    }
  });
});
