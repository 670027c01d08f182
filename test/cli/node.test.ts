import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { readLocalState, writeLocalState } from '../../cli/local-state.js';
import { NodeMetrics } from '../../node/metrics/node-metrics.js';
import { type MetricsServer, startMetricsServer } from '../../node/metrics/server.js';
import { CliFixture } from './support.js';

interface Story {
  instanceId: string;
  phase: string;
  launch: { lifecycleHook: string | null; maxPods: number; hookHeldS: number | null; hookCompletedAt: string | null };
  enis: { eniId: string | null; step: string; addresses: number; planned: { addresses: number } }[];
  leases: Record<string, number>;
  recentReleases: { ip: string; state: string; reason: string }[];
  deadLetters: unknown;
  agentMetrics: Record<string, number> | string;
}

/** `vpc-lease node <id>` against the local cloud, on a node the real lifecycle handler brought up. */
describe('vpc-lease node', () => {
  let f: CliFixture;
  let id: string;
  let released: string;
  let server: MetricsServer | undefined;

  beforeAll(async () => {
    f = await CliFixture.start(1);
    id = f.instanceIds[0]!;
    const holder = (n: number) => ({ containerId: `c-${n}`, ifName: 'eth0', netns: `/var/run/netns/p${n}` });
    for (const n of [0, 1, 2]) await f.store.claim(f.arnOf(id), holder(n), Date.now());
    released = (await f.store.release(f.arnOf(id), holder(1), Date.now(), 30_000))!.ip;
  }, 60_000);
  afterAll(async () => {
    await server?.close();
    await f?.close();
  });

  it('tells the launch, ENIs, leases by state and the recent release with its reason', async () => {
    // The real lifecycle handler completed the hook and recorded when: held from the node item's creation. The
    // record lands just after the completion call returns, so InService can be seen a moment before it.
    let node = (await f.store.getNode(f.arnOf(id)))!;
    let polls = 0;
    for (; node.hookCompletedAtMs === undefined && polls < 300; polls += 1) {
      await new Promise((resolve) => setTimeout(resolve, 100));
      node = (await f.store.getNode(f.arnOf(id)))!;
    }
    if (polls > 0) process.stderr.write(`hook completion record: ${polls} polls after InService\n`);
    const run = await f.cli('--local', '--json', 'node', id);
    expect(run.code, run.err).toBe(0);
    const story = run.json as Story;
    expect(story.phase).toBe('READY');
    expect(story.launch.lifecycleHook).toMatch(/\//);
    expect(story.launch.maxPods).toBeGreaterThan(0);
    expect(node.hookCompletedAtMs).toBeGreaterThanOrEqual(node.createdAtMs);
    expect(story.launch.hookHeldS).toBe(Math.round((node.hookCompletedAtMs! - node.createdAtMs) / 100) / 10);
    expect(Date.parse(story.launch.hookCompletedAt!)).toBe(Math.floor(node.hookCompletedAtMs! / 1000) * 1000);
    expect(story.enis.length).toBeGreaterThan(0);
    for (const eni of story.enis) {
      expect(eni.eniId).toMatch(/^eni-/);
      expect(eni.step).toBe('LEASED');
      expect(eni.addresses).toBeGreaterThan(0);
    }
    const leases = await f.store.listLeases(f.arnOf(id));
    expect(story.leases['CLAIMED']).toBe(2);
    expect(story.leases['COOLDOWN']).toBe(leases.filter((l) => l.state === 'COOLDOWN').length);
    expect(story.recentReleases[0]).toMatchObject({ ip: released, state: 'COOLDOWN' });
    expect(story.recentReleases[0]!.reason).toMatch(/DEL or GC/);
    expect(story.deadLetters).toEqual([]);
    expect(story.agentMetrics).toBe('no agent recorded for this node in the local state');

    const text = await f.cli('--local', 'node', id);
    expect(text.code).toBe(0);
    expect(text.out).toMatch(new RegExp(`^${id} \\(m5\\.large, \\S+\\) READY`));
    expect(text.out).toMatch(/Leases {2}FREE \d+ {2}CLAIMED 2 {2}COOLDOWN \d+ {2}RELEASING 0/);
    expect(text.out).toContain(released);
    expect(text.out).toMatch(/hook held {4}\d+(\.\d)? s \(completed /);
  });

  it('shows the agent’s metrics from the local state’s metricsUrl', async () => {
    const metrics = new NodeMetrics({ version: 'cli-test', nowMs: Date.now });
    metrics.observeCommand({ command: 'ADD', path: 'agent', code: 0, durationS: 0.01 });
    metrics.observeCommand({ command: 'ADD', path: 'agent', code: 0, durationS: 0.01 });
    server = await startMetricsServer(metrics.registry, { host: '127.0.0.1', port: 0 });
    const state = readLocalState(f.localDir);
    writeLocalState(f.localDir, { ...state, nodes: [{ instanceId: id, metricsUrl: server.url }] });
    const story = (await f.cli('--local', '--json', 'node', id)).json as Story;
    expect(story.agentMetrics).toMatchObject({
      'vpc_lease_cni_requests_total{command="ADD",result="success",code="0"}': 2,
    });
  });

  it('says the hook still holds a launch in progress', async () => {
    const arn = f.arnOf(id);
    const node = (await f.store.getNode(arn))!;
    const { hookCompletedAtMs: _completed, ...held } = node;
    await f.store.updateNode({ ...held, phase: 'PROVISIONING' }, node.version);
    try {
      const story = (await f.cli('--local', '--json', 'node', id)).json as Story;
      expect(story.launch.hookHeldS).toBeNull();
      expect((await f.cli('--local', 'node', id)).out).toMatch(/hook held {4}still held \(\d+ s so far\)/);
    } finally {
      const now = (await f.store.getNode(arn))!;
      await f.store.updateNode({ ...node }, now.version);
    }
  });

  it('answers 1 for an instance without a node item and 2 for something that is not an instance id', async () => {
    const unknown = await f.cli('--local', 'node', 'i-0123456789abcdef0');
    expect(unknown.code).toBe(1);
    expect(unknown.err).toContain('no node i-0123456789abcdef0');
    const bad = await f.cli('--local', 'node', 'web-1');
    expect(bad.code).toBe(2);
    expect((await f.cli('--local', 'node')).code).toBe(2);
  });
});
