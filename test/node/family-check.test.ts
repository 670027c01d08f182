import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { missing } from '../support/capabilities.js';
import { NodeFixture } from './support/node-fixture.js';

/**
 * The node's ADD against the family the launch provisioned (the node item's `ipFamily`): a netconf of another
 * family finds no lease of its own and is refused with code 7 naming both families, not left to look like a
 * full pool (which the runtime would retry forever). Nothing is claimed and no link is left.
 */
const skip = missing('root', 'netns', 'go-plugins');

describe.skipIf(skip)('vpc-lease-cni ADD: netconf ipFamily against the node item', () => {
  let f: NodeFixture;
  beforeAll(async () => {
    f = await NodeFixture.start();
    await f.seed(4);
    // Written as pendingNodeRecord writes it: an ipv4 node (the item says so).
    await f.setPhase('READY');
  }, 300_000);
  afterAll(async () => {
    await f?.close();
  });

  it.each([
    ['ipv6', { ipFamily: 'ipv6', hostVeth: false }],
    ['dual', { ipFamily: 'dual' }],
  ])('refuses a %s netconf on an ipv4 node with code 7, claiming nothing', async (family, extra) => {
    const netns = f.addNetns();
    const add = await f.run('ADD', { netns, containerId: `mismatch-${family}` }, f.netconf('1.1.0', extra));
    expect(add.code).toBe(1);
    expect(add.json).toMatchObject({ code: 7 });
    expect((add.json as { msg: string }).msg).toMatch(
      new RegExp(`netconf ipFamily ${family} does not match this node's ipv4`),
    );
    // The fix names what the node reads: the netconf's field, not the control plane's environment variable.
    expect((add.json as { msg: string }).msg).toContain(`set "ipFamily": "ipv4" in the node's netconf`);
    expect(await f.store.listLeases(f.arn, { state: 'CLAIMED' })).toEqual([]);
    expect(f.podLinks(netns)).toEqual([]);
  });

  it('an ipv4 netconf on the same node is served (the positive control of the fixture)', async () => {
    const netns = f.addNetns();
    const add = await f.run('ADD', { netns, containerId: 'match' }, f.netconf('1.1.0'));
    expect(add.code, add.stdout).toBe(0);
    expect((await f.run('DEL', { netns, containerId: 'match' }, f.netconf('1.1.0'))).code).toBe(0);
  });
});
