import { describe, expect, it } from 'vitest';
import { table } from '../../cli/table.js';
import { parseScenarioArgs } from '../../local-cloud/scenario/options.js';
import type { PodDriver } from '../../local-cloud/scenario/pods.js';
import { renderReport, type ScenarioReport, summarize } from '../../local-cloud/scenario/report.js';
import { Workload } from '../../local-cloud/scenario/workload.js';
import type { LeaseStore } from '../../shared/lease-store/port.js';

describe('Function: parseScenarioArgs', () => {
  it('gives the one-minute defaults and resolves the local folder under the project', () => {
    const o = parseScenarioArgs([], '/repo');
    expect(o).toMatchObject({
      nodes: 3,
      pods: 24,
      instanceType: 'm5.large',
      prefixDelegation: false,
      ipFamily: 'ipv4',
      churnRounds: 2,
      parallel: 2,
      timeScale: 0.05,
      keep: false,
      json: false,
      localDir: '/repo/.local',
      hookless: false,
    });
    expect(o).not.toHaveProperty('podSubnet');
  });

  it('takes every option', () => {
    const o = parseScenarioArgs(
      [
        '--nodes',
        '5',
        '--pods',
        '0',
        '--instance-type',
        'c5.4xlarge',
        '--prefix-delegation',
        '--pod-subnet',
        '10.0.64.0/20',
        '--keep',
        '--json',
        '--churn',
        '0',
        '--time-scale',
        '1',
        '--local-dir',
        '/tmp/x',
        '--hookless',
      ],
      '/repo',
    );
    expect(o).toMatchObject({
      nodes: 5,
      pods: 0,
      instanceType: 'c5.4xlarge',
      prefixDelegation: true,
      podSubnet: '10.0.64.0/20',
      keep: true,
      json: true,
      churnRounds: 0,
      timeScale: 1,
      localDir: '/tmp/x',
      hookless: true,
    });
    expect(parseScenarioArgs(['-h'], '/repo')).toBe('help');
  });

  it.each([
    [['--nodes', '0'], '--nodes: expected an integer from 1 to 20, got "0"'],
    [['--pods', '2.5'], '--pods: expected an integer'],
    [['--instance-type', 'x9.huge'], '--instance-type: unknown instance type "x9.huge"'],
    [['--pod-subnet', '10.0.0.0/20'], '--pod-subnet: expected a /20../28 CIDR in 10.0.48.0'],
    [['--pod-subnet', '192.168.0.0/24'], '--pod-subnet'],
    [['--time-scale', '0'], '--time-scale: expected a number in (0, 1]'],
    [['--ip-family', 'ipv5'], '--ip-family: expected one of ipv4, ipv6, dual, got "ipv5"'],
    [['--frobnicate'], "Unknown option '--frobnicate'"],
    [['extra'], 'extra'],
  ])('refuses %j naming the option', (argv, message) => {
    expect(() => parseScenarioArgs(argv, '/repo')).toThrow(message);
  });
});

describe('Function: summarize', () => {
  it('reports nearest-rank percentiles: real samples, never interpolations', () => {
    expect(summarize([50, 10, 30, 20, 40])).toEqual({ count: 5, failed: 0, p50Ms: 30, p90Ms: 50, maxMs: 50 });
    expect(summarize([1, 2, 3, 4, 5, 6, 7, 8, 9, 10], 2)).toMatchObject({ p50Ms: 5, p90Ms: 9, maxMs: 10, failed: 2 });
  });

  it('reports nothing measured as null', () => {
    expect(summarize([])).toEqual({ count: 0, failed: 0, p50Ms: null, p90Ms: null, maxMs: null });
  });
});

describe('Function: renderReport', () => {
  const base: ScenarioReport = {
    ok: false,
    durationMs: 1234,
    settings: {
      nodes: 1,
      pods: 2,
      instanceType: 'm5.large',
      prefixDelegation: false,
      podSubnet: null,
      churnRounds: 0,
      parallel: 2,
      timeScale: 0.05,
      sqsDuplicateRate: 0.1,
      hookless: false,
    },
    datapath: { mode: 'lease-store', podLinkKind: null, reason: 'not running as root' },
    nodes: [
      {
        instanceId: 'i-1',
        instanceType: 'm5.large',
        availabilityZone: 'us-east-1a',
        phase: 'READY',
        enis: 1,
        leases: 8,
        claimed: 2,
        maxPods: 20,
      },
    ],
    enis: { total: 1, attached: 1 },
    leasesByState: { FREE: 6, CLAIMED: 2 },
    ec2CallsByAction: { CreateNetworkInterface: 1 },
    ec2Throttled: 0,
    lifecycle: { launchLabel: 'launch hook→InSvc', launch: summarize([900]), terminate: summarize([]) },
    cni: { add: summarize([10, 20]), del: summarize([]) },
    agents: [],
    pods: { started: 2, deleted: 0, running: 2 },
    reconcile: { marked: 0, deleted: 0, partitionsRemoved: 0, drift: 0 },
    dlqMessages: 0,
    lifecycleInvocations: 1,
    invariants: { '1': true, '2': false, '3': true, '4': true, '5': true, '6': true, '7': true },
    iam: { nodeRequestsAllowed: 40, deniedDuringRun: 0, probes: 4 },
    violations: ['invariant 2: lease 10.0.0.9 is not assigned to eni-1'],
    errors: ['ADD pod-3 on i-1: CNI error 11: no claimable lease'],
    notChecked: {},
    cleanup: { links: 0, namespaces: 0, done: true },
  };

  it('says FAILED, which invariant broke and why, and labels store calls as such without the datapath', () => {
    const text = renderReport(base);
    expect(text).toMatch(/^vpc-lease local run: FAILED in 1\.2 s$/m);
    expect(text).toContain('control plane only, pods claimed on the lease store (not running as root)');
    expect(text).toMatch(/^ {2}2\. VIOLATED {2}every non-RELEASING lease/m);
    expect(text).toContain('! invariant 2: lease 10.0.0.9 is not assigned to eni-1');
    expect(text).toContain('ADD pod-3 on i-1: CNI error 11');
    expect(text).toMatch(/^ {2}store claim /m);
    expect(text).not.toContain('CNI ADD');
  });

  it('names macvlan as the stand-in for ipvlan when the datapath ran on a kernel without it', () => {
    const text = renderReport({ ...base, ok: true, datapath: { mode: 'cni', podLinkKind: 'macvlan', reason: null } });
    expect(text).toContain('pod links: macvlan, standing in for ipvlan, which this kernel lacks');
    expect(text).toMatch(/^ {2}CNI ADD /m);
  });

  it('labels the latencies as through the agent and sums what the agents counted', () => {
    const agent = (instanceId: string, add: number, fallback: number) => ({
      instanceId,
      metricsUrl: `http://127.0.0.1:1/${instanceId}`,
      running: true,
      sent: { add: add + 1, del: 1 },
      add,
      del: 1,
      viaAgent: add + 1 - fallback,
      fallback,
    });
    const text = renderReport({
      ...base,
      datapath: { mode: 'cni', podLinkKind: 'macvlan', reason: null },
      agents: [agent('i-1', 3, 0), agent('i-2', 2, 1)],
    });
    expect(text).toMatch(/^ {2}CNI ADD → agent {4}n=2 /m);
    expect(text).toContain(
      'agents: 2 (one per node) counted ADD 5/7 sent, DEL 2/2; 6 ran in the agent, 1 fell back to the plugin',
    );
  });
});

describe('Function: table', () => {
  it('pads columns to the widest cell and trims trailing blanks', () => {
    expect(
      table(
        ['A', 'BB'],
        [
          ['xxx', 'y'],
          ['z', ''],
        ],
      ),
    ).toEqual(['A    BB', 'xxx  y', 'z']);
  });
});

describe('Class: Workload (scenario pods)', () => {
  /** A node at its address ceiling: every lease in the reuse wait until `freeAfterMs` from the first ADD. */
  function ceilingDriver(freeAfterMs: number): { driver: PodDriver; attempts: number[] } {
    const attempts: number[] = [];
    let firstMs: number | undefined;
    const driver: PodDriver = {
      kind: 'lease-store',
      prepareNode: async () => undefined,
      add: async (pod) => {
        const now = performance.now();
        firstMs ??= now;
        attempts.push(now - firstMs);
        if (now - firstMs < freeAfterMs) return { ok: false, latencyMs: 1, error: 'no claimable lease on x' };
        pod.netns = `/var/run/netns/${pod.name}`;
        return { ok: true, latencyMs: 1, ip: '10.0.0.9' };
      },
      del: async () => ({ ok: true, latencyMs: 1 }),
      podAddress: async () => undefined,
      forgetNode: async () => undefined,
      close: async () => undefined,
    };
    return { driver, attempts };
  }

  const workload = (driver: PodDriver, retryDelayMs: number) =>
    new Workload({
      driver,
      store: {} as LeaseStore,
      region: 'us-east-1',
      accountId: '123456789012',
      topUp: async () => undefined,
      runId: 't',
      concurrency: 1,
      retryDelayMs,
    });

  it('retries "no claimable lease" after growing delays, so a lease leaving its reuse wait is found however fast the calls are', async () => {
    const { driver, attempts } = ceilingDriver(50);
    const w = workload(driver, 20);
    await w.start(1, new Map([['i-1', 1]]));
    expect(w.errors).toEqual([]);
    expect(w.started).toBe(1);
    expect(attempts.length).toBeGreaterThan(1);
    expect(attempts.at(-1)!).toBeGreaterThanOrEqual(50);
  });

  it('gives up after four tries when the node never frees a lease, and reports it', async () => {
    const { driver, attempts } = ceilingDriver(10_000);
    const w = workload(driver, 1);
    await w.start(1, new Map([['i-1', 1]]));
    expect(attempts).toHaveLength(4);
    expect(w.errors).toEqual([expect.stringMatching(/no claimable lease/)]);
  });
});
