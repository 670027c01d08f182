import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { CniRequest } from '../../node/cni/skel.js';
import type { NodeIdentity } from '../../node/identity/identity.js';
import { ImdsClient } from '../../node/identity/imds.js';
import { CallContext, type PluginDeps } from '../../node/plugin/context.js';
import { openLeaseStore } from '../../node/store/open-store.js';
import { instanceArn } from '../../shared/domain/arn.js';
import { dnsSuffixOfRegion } from '../../shared/domain/partition.js';
import { Battlefield, TABLE } from './battlefield.js';

/**
 * The suite each partition's test file runs (one local cloud per file: the Lambda handlers keep their clients
 * per process). Node requests outside the `aws` partition, as the IAM-enforcing endpoint sees them: the node learns who it is
 * from its own IMDS and claims through the store the plugin opens, against the node policy synthesized from the
 * construct. The policy binds `dynamodb:LeadingKeys` to `${ec2:SourceInstanceARN}`, which IAM forms with the
 * instance's real partition, so a key built as `arn:aws:…` in aws-cn or aws-us-gov is another node's key.
 */
export function describePartition(region: string, partition: string): void {
  describe(`Partition: a node in ${region}`, () => {
    let field: Battlefield;
    let dataDir: string;
    let seq = 0;

    beforeAll(async () => {
      field = await Battlefield.start(1, region);
      dataDir = mkdtempSync(join(tmpdir(), 'vpc-lease-partition-'));
    }, 120_000);
    afterAll(async () => {
      await field?.close();
      if (dataDir) rmSync(dataDir, { recursive: true, force: true });
    });

    /** A CNI ADD's call context as the plugin builds it: netconf, IMDS of the node, the node's lease store. */
    async function nodeContext(forcedIdentity?: (real: NodeIdentity) => NodeIdentity): Promise<CallContext> {
      seq += 1;
      const node = field.nodes[0]!;
      const request: CniRequest = {
        command: 'ADD',
        containerId: `partition-${seq}`,
        netns: `/var/run/netns/partition-${seq}`,
        ifName: 'eth0',
        args: { K8S_POD_NAMESPACE: 'default', K8S_POD_NAME: `partition-${seq}` },
        path: [],
        version: '1.1.0',
        netconf: {
          cniVersion: '1.1.0',
          name: 'vpc-lease',
          type: 'vpc-lease-cni',
          dataDir: join(dataDir, String(seq)),
          logFile: join(dataDir, `${seq}.log`),
          tableName: TABLE,
          imdsEndpoint: await field.cloud.imds.endpointFor(node.instanceId),
          dynamoEndpoint: field.cloud.endpoints.dynamodb,
        },
      };
      const deps: PluginDeps = {
        // Test mode lets the netconf name loopback endpoints (the local IMDS and the IAM endpoint).
        env: { VPC_LEASE_TEST_MODE: '1' },
        nowMs: () => Date.now(),
        bootId: () => 'partition-suite-boot',
        openStore: (config, identity) => openLeaseStore(config, forcedIdentity ? forcedIdentity(identity) : identity),
        openDatapath: () => Promise.reject(new Error('no datapath in this test')),
      };
      return new CallContext(request, deps);
    }

    it(`reads ${partition} from IMDS and claims and releases a lease of its own`, async () => {
      const ctx = await nodeContext();
      // IMDS itself answers (the Region fallback would give the same id, so read the paths directly).
      const imds = new ImdsClient(String(ctx.config.imdsEndpoint), 2_000);
      expect(await imds.get('/latest/meta-data/services/partition')).toBe(partition);
      expect(await imds.get('/latest/meta-data/services/domain')).toBe(dnsSuffixOfRegion(region));
      const identity = await ctx.identity();
      expect(identity.partition).toBe(partition);
      expect(identity.instanceArn).toBe(field.nodes[0]!.arn);
      expect(identity.instanceArn.startsWith(`arn:${partition}:ec2:${region}:`)).toBe(true);
      const store = await ctx.store();
      const deniedBefore = field.cloud.iam.counts.denied;
      const lease = await store.claim(identity.instanceArn, ctx.holder, Date.now());
      expect(field.holdings(field.nodes[0]!).addresses.has(lease.ip)).toBe(true);
      await store.release(identity.instanceArn, ctx.holder, Date.now(), 1_000, lease.ip);
      expect(field.cloud.iam.counts.denied).toBe(deniedBefore);
      expect(field.cloud.iam.counts.allowed).toBeGreaterThan(0);
    });

    it('is denied with the partition forced to aws (negative control)', async () => {
      const asAws = (real: NodeIdentity): NodeIdentity => {
        const { region: r, accountId, instanceId } = real.document;
        return { ...real, partition: 'aws', instanceArn: instanceArn(r, accountId, instanceId, 'aws') };
      };
      const ctx = await nodeContext(asAws);
      const identity = asAws(await ctx.identity());
      const store = await ctx.store();
      const deniedBefore = field.cloud.iam.counts.denied;
      const err = await store.claim(identity.instanceArn, ctx.holder, Date.now()).then(
        () => undefined,
        (e: Error) => e,
      );
      expect(err?.message).toMatch(/AccessDenied|not authorized/);
      expect(field.cloud.iam.counts.denied).toBeGreaterThan(deniedBefore);
      expect(field.cloud.iam.denials.at(-1)).toMatchObject({ principal: field.nodes[0]!.instanceId, allowed: false });
    });
  });
}
