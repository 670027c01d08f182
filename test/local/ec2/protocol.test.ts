import {
  CreateTagsCommand,
  DescribeAvailabilityZonesCommand,
  DescribeVpcsCommand,
  EC2ServiceException,
} from '@aws-sdk/client-ec2';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { type Ec2Harness, startHarness } from './harness.js';

let h: Ec2Harness;

async function rawQuery(body: string): Promise<{ status: number; text: string; requestId: string | null }> {
  const res = await fetch(h.sim.endpoint, {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
    body,
  });
  return { status: res.status, text: await res.text(), requestId: res.headers.get('x-amzn-requestid') };
}

describe('EC2 simulator: Query protocol', () => {
  beforeEach(async () => {
    h = await startHarness();
  });
  afterEach(async () => {
    await h.close();
  });

  it('answers an EC2-shaped XML document with <item> lists', async () => {
    const res = await rawQuery(`Action=DescribeVpcs&Version=2016-11-15&VpcId.1=${h.vpcId}`);
    expect(res.status).toBe(200);
    expect(res.text).toMatch(
      /^<\?xml version="1.0" encoding="UTF-8"\?><DescribeVpcsResponse xmlns="http:\/\/ec2\.amazonaws\.com\/doc\/2016-11-15\/">/,
    );
    expect(res.text).toContain(`<requestId>${res.requestId}</requestId>`);
    expect(res.text).toContain(`<vpcSet><item>`);
    expect(res.text).toContain(`<vpcId>${h.vpcId}</vpcId>`);
  });

  it('answers errors as <Response><Errors><Error> with the real status codes', async () => {
    const unknown = await rawQuery('Action=FlyToTheMoon&Version=2016-11-15');
    expect(unknown.status).toBe(400);
    expect(unknown.text).toContain('<Response><Errors><Error><Code>InvalidAction</Code><Message>');
    expect(unknown.text).toMatch(/<RequestID>[0-9a-f-]{36}<\/RequestID><\/Response>$/);
    const missing = await rawQuery('Action=DescribeVpcs&Version=2016-11-15&VpcId.1=vpc-00000000000000000');
    expect(missing.status).toBe(400);
    expect(missing.text).toContain('<Code>InvalidVpcID.NotFound</Code>');
    const malformed = await rawQuery('Action=DescribeVpcs&Version=2016-11-15&MaxResults=lots');
    expect(malformed.status).toBe(400);
    expect(malformed.text).toContain('<Code>InvalidParameterValue</Code>');
  });

  it('answers DryRunOperation (412) to a DryRun that would succeed, without doing anything', async () => {
    let caught: unknown;
    try {
      await h.ec2.send(new DescribeVpcsCommand({ DryRun: true }));
    } catch (err) {
      caught = err;
    }
    expect(caught).toBeInstanceOf(EC2ServiceException);
    expect((caught as EC2ServiceException).name).toBe('DryRunOperation');
    expect((caught as EC2ServiceException).$metadata.httpStatusCode).toBe(412);
    expect(h.sim.admin.counts()['DescribeVpcs']).toMatchObject({ calls: 1, ok: 0 });
  });

  it('round-trips markup, entities, spaces, plus signs and non-ASCII in values', async () => {
    const value = `<a href="x">&amp; 'q' + ü 🦀 %20</a>`;
    await h.ec2.send(new CreateTagsCommand({ Resources: [h.vpcId], Tags: [{ Key: 'k e+y/ü', Value: value }] }));
    const out = await h.ec2.send(new DescribeVpcsCommand({ Filters: [{ Name: 'tag:k e+y/ü', Values: [value] }] }));
    expect(out.Vpcs?.[0]?.Tags).toEqual([{ Key: 'k e+y/ü', Value: value }]);
  });

  it("lists the region's availability zones", async () => {
    const out = await h.ec2.send(new DescribeAvailabilityZonesCommand({}));
    expect(out.AvailabilityZones?.map((z) => z.ZoneName)).toEqual(['us-east-1a', 'us-east-1b', 'us-east-1c']);
  });

  it('answers an empty list as an empty array', async () => {
    const out = await h.ec2.send(new DescribeVpcsCommand({ Filters: [{ Name: 'tag:none', Values: ['x'] }] }));
    expect(out.Vpcs).toEqual([]);
  });

  it('gives the SDK the request id', async () => {
    const out = await h.ec2.send(new DescribeVpcsCommand({}));
    expect(out.$metadata.requestId).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-a[0-9a-f]{3}-[0-9a-f]{12}$/);
  });
});
