import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { afterAll, describe, expect, it } from 'vitest';
import { runCli } from '../../cli/cli.js';
import { readLocalState } from '../../cli/local-state.js';
import { scrapeAgentCounts } from '../../local-cloud/scenario/node-agents.js';
import type { ScenarioReport } from '../../local-cloud/scenario/report.js';
import { SdkDynamoApi } from '../../shared/dynamo/sdk-client.js';
import { DynamoLeaseStore } from '../../shared/lease-store/dynamo-lease-store.js';
import { missing } from '../support/capabilities.js';
import { startDynalite } from '../support/dynalite.js';

/**
 * `npm start` end to end at small size, as a user runs it (tsx local-cloud/start.ts, a separate process): the
 * report's figures must agree with each other and with the data it leaves on disk, every invariant it checks
 * must hold, and no namespace or link may outlive it — not even after Ctrl-C.
 */
const ROOT = join(import.meta.dirname, '..', '..');
const TSX = join(ROOT, 'node_modules', '.bin', 'tsx');
const dirs: string[] = [];
afterAll(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

interface Started {
  readonly child: ChildProcess;
  readonly done: Promise<{ code: number | null; stdout: string; stderr: string }>;
}

/**
 * `tsx local-cloud/start.ts`, what `npm start` runs; `direct` runs it in node with tsx's loader instead, with no
 * tsx CLI in between to relay (or, when the child answers late, SIGKILL) on a signal.
 */
function start(args: readonly string[], direct = false): Started {
  const command = direct ? process.execPath : TSX;
  const prefix = direct ? ['--import', 'tsx'] : [];
  const child = spawn(command, [...prefix, 'local-cloud/start.ts', ...args], {
    cwd: ROOT,
    env: { ...process.env, CI: '' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  child.stdout?.on('data', (c: Buffer) => (stdout += c.toString('utf8')));
  child.stderr?.on('data', (c: Buffer) => (stderr += c.toString('utf8')));
  const done = new Promise<{ code: number | null; stdout: string; stderr: string }>((resolve) =>
    child.on('close', (code) => resolve({ code, stdout, stderr })),
  );
  return { child, done };
}

function localDir(): string {
  const dir = mkdtempSync(join(tmpdir(), 'vpc-lease-e2e-'));
  dirs.push(dir);
  return dir;
}

/** Our namespaces and host links currently on this machine (names from local-cloud/scenario/host-net.ts). */
function leftovers(): string[] {
  if (process.getuid?.() !== 0) return [];
  const ns = execFileSync('ip', ['netns', 'list'], { encoding: 'utf8' })
    .split('\n')
    .map((l) => l.split(' ')[0] ?? '')
    .filter((n) => /^vlns-[0-9a-f]{4}-\d+$/.test(n));
  const links = (JSON.parse(execFileSync('ip', ['-j', 'link', 'show'], { encoding: 'utf8' })) as { ifname: string }[])
    .map((l) => l.ifname)
    // Exactly host-net.ts's shapes (`vlh`/`vlp` + 4 hex run id + counter, `vlx` + run id + a|b|i), so links other
    // suites make at the same time (vitest runs two files at once) are not mistaken for ours.
    .filter((n) => /^vl[hp][0-9a-f]{4}\d{1,4}$|^vlx[0-9a-f]{4}[abi]$/.test(n));
  return [...ns, ...links];
}

async function openStore(dir: string) {
  const dynalite = await startDynalite({ path: join(dir, 'dynamodb') });
  const client = new DynamoDBClient({
    region: 'us-east-1',
    endpoint: dynalite.endpoint,
    credentials: { accessKeyId: 'local', secretAccessKey: 'local' },
  });
  const store = new DynamoLeaseStore({ api: new SdkDynamoApi(client), tableName: 'vpc-lease' });
  return {
    store,
    close: async () => {
      client.destroy();
      await dynalite.close();
    },
  };
}

const datapathMissing = missing('root', 'netns');

describe('npm start (the local scenario)', () => {
  it('runs the whole system at small size: report consistent, invariants hold, nothing left behind', async () => {
    const before = leftovers();
    const dir = localDir();
    const { done } = start(['--json', '--nodes', '2', '--pods', '8', '--churn', '1', '--local-dir', dir]);
    const { code, stdout, stderr } = await done;
    expect(code, stderr).toBe(0);
    const lines = stdout.trim().split('\n');
    expect(lines).toHaveLength(1); // one JSON object on stdout, progress on stderr
    const report = JSON.parse(lines[0]!) as ScenarioReport;
    expect(stderr).toMatch(/^\[\s*\d+\.\d+s\] Auto Scaling group vpc-lease-nodes: scaling out to 2 × m5\.large$/m);

    expect(report.ok).toBe(true);
    expect(report.invariants).toEqual({ '1': true, '2': true, '3': true, '4': true, '5': true, '6': true, '7': true });
    expect(report.violations).toEqual([]);
    expect(report.datapath.mode).toBe(datapathMissing ? 'lease-store' : 'cni');
    if (!datapathMissing) expect(['ipvlan', 'macvlan']).toContain(report.datapath.podLinkKind);

    // Two launches, one termination: one node READY, the other's item kept GONE (the audit trail the reconciler
    // prunes after its retention) with no lease left.
    expect(report.lifecycle.launch.count).toBe(2);
    expect(report.lifecycle.terminate.count).toBe(1);
    expect(report.nodes.map((n) => n.phase).sort()).toEqual(['GONE', 'READY']);
    const ready = report.nodes.find((n) => n.phase === 'READY')!;
    const gone = report.nodes.find((n) => n.phase === 'GONE')!;
    expect(ready.instanceType).toBe('m5.large');
    expect(gone.leases).toBe(0);
    // Each m5.large gets two pod ENIs at launch, created once each (duplicated events create no extra ENI).
    expect(report.ec2CallsByAction['CreateNetworkInterface']).toBeGreaterThanOrEqual(4);
    expect(report.ec2CallsByAction['AttachNetworkInterface']).toBeGreaterThanOrEqual(4);
    expect(report.enis.total).toBe(ready.enis); // the GONE node's ENIs went with its instance
    expect(report.dlqMessages).toBe(0);

    // Pods: every call counted, and what is still running is exactly what is CLAIMED.
    expect(report.pods.started).toBe(report.cni.add.count);
    expect(report.pods.deleted).toBe(report.cni.del.count);
    expect(report.cni.add.failed + report.cni.del.failed).toBe(0);
    expect(report.pods.started - report.pods.deleted).toBe(report.pods.running);
    expect(report.leasesByState['CLAIMED']).toBe(report.pods.running);
    expect(report.cni.add.p50Ms!).toBeLessThanOrEqual(report.cni.add.p90Ms!);
    expect(report.cleanup.done).toBe(true);

    // The data stays on disk for queries after the run.
    const { store, close } = await openStore(dir);
    try {
      const nodes = await store.listNodes();
      expect(nodes.map((n) => n.instanceId).sort()).toEqual([ready.instanceId, gone.instanceId].sort());
      const readyArn = nodes.find((n) => n.instanceId === ready.instanceId)!.instanceArn;
      expect(await store.listLeases(readyArn, { state: 'CLAIMED' })).toHaveLength(report.pods.running);
    } finally {
      await close();
    }
    expect(leftovers()).toEqual(before);
  }, 240_000);

  it.skipIf(datapathMissing)(
    'keeps an agent per node under --keep: state.json has each metricsUrl, whose counters match the pods started',
    async () => {
      const before = leftovers();
      const dir = localDir();
      const { child, done } = start([
        '--json',
        '--keep',
        '--nodes',
        '2',
        '--pods',
        '6',
        '--churn',
        '1',
        '--local-dir',
        dir,
      ]);
      let stdout = '';
      child.stdout?.on('data', (c: Buffer) => (stdout += c.toString('utf8')));
      const exited = done.then((r) => `npm start exited (${r.code}) before keeping: ${r.stderr.slice(-2000)}`);
      // The report line comes before the state file; the state file is what says the cloud is kept.
      const kept = new Promise<void>((resolve) => {
        const timer = setInterval(() => {
          if (stdout.includes('\n') && existsSync(join(dir, 'state.json'))) {
            clearInterval(timer);
            resolve();
          }
        }, 100);
        void exited.then(() => clearInterval(timer));
      });
      const early = await Promise.race([kept.then(() => undefined), exited]);
      expect(early).toBeUndefined();
      try {
        const report = JSON.parse(stdout.split('\n')[0]!) as ScenarioReport;
        expect(report.ok).toBe(true);
        const state = readLocalState(dir);
        const live = report.agents.filter((a) => a.running);
        // One agent per node still in service (the terminated node's agent stopped with it), each on its own port.
        expect(state.nodes?.map((n) => n.instanceId).sort()).toEqual(live.map((a) => a.instanceId).sort());
        expect(new Set(state.nodes?.map((n) => new URL(n.metricsUrl).port)).size).toBe(live.length);
        // Every pod call of the run reached an agent: the agents' counters add up to the report's calls.
        const sum = (pick: (a: ScenarioReport['agents'][number]) => number) =>
          report.agents.reduce((s, a) => s + pick(a), 0);
        expect(report.agents).toHaveLength(2);
        // What was sent includes the holder check's repeated ADDs, which the timed latencies leave out.
        const sentAdd = sum((a) => a.sent.add);
        const sentDel = sum((a) => a.sent.del);
        expect(sentAdd).toBeGreaterThanOrEqual(report.cni.add.count);
        expect(sentDel).toBeGreaterThanOrEqual(report.cni.del.count);
        expect(sum((a) => a.add)).toBe(sentAdd);
        expect(sum((a) => a.del)).toBe(sentDel);
        expect(sum((a) => a.viaAgent) + sum((a) => a.fallback)).toBe(sentAdd + sentDel);
        process.stderr.write(`npm start --keep: ${sum((a) => a.fallback)} fallbacks of ${sentAdd + sentDel} calls\n`);
        for (const node of state.nodes ?? []) {
          // Reachable now, and what it serves is what the report counted for that node.
          const scraped = await scrapeAgentCounts(node.metricsUrl);
          const line = live.find((a) => a.instanceId === node.instanceId)!;
          expect(scraped.add).toBe(line.add);
          let out = '';
          const code = await runCli(['--local', '--json', 'node', node.instanceId], {
            out: (t) => (out += t),
            err: () => undefined,
            env: { VPC_LEASE_LOCAL_DIR: dir },
          });
          expect(code).toBe(0);
          const story = JSON.parse(out) as { agentMetrics: Record<string, number> };
          const adds = Object.entries(story.agentMetrics)
            .filter(([k]) => k.startsWith('vpc_lease_cni_requests_total{command="ADD"'))
            .reduce((s, [, v]) => s + v, 0);
          expect(adds).toBe(line.add);
        }
      } finally {
        child.kill('SIGINT');
      }
      const { code } = await done;
      expect(code).toBe(130);
      expect(existsSync(join(dir, 'state.json'))).toBe(false);
      expect(leftovers()).toEqual(before);
    },
    300_000,
  );

  it('runs the control plane alone with prefix delegation in a dedicated pod subnet', async () => {
    const dir = localDir();
    const { done } = start([
      '--json',
      '--control-plane-only',
      '--prefix-delegation',
      '--pod-subnet',
      '10.0.64.0/20',
      '--nodes',
      '1',
      '--pods',
      '6',
      '--churn',
      '1',
      '--local-dir',
      dir,
    ]);
    const { code, stdout, stderr } = await done;
    expect(code, stderr).toBe(0);
    const report = JSON.parse(stdout) as ScenarioReport;
    expect(report.datapath).toEqual({
      mode: 'lease-store',
      podLinkKind: null,
      reason: 'asked for --control-plane-only',
    });
    expect(report.settings).toMatchObject({ prefixDelegation: true, podSubnet: '10.0.64.0/20', nodes: 1 });
    expect(Object.values(report.invariants).every(Boolean)).toBe(true);
    // Without the plugin, the pods' claims and releases still go as the node's own session: judged, never denied.
    expect(report.iam.nodeRequestsAllowed).toBeGreaterThanOrEqual(report.pods.running * 2);
    expect(report.iam.deniedDuringRun).toBe(0);
    expect(report.lifecycle.terminate.count).toBe(0); // one node: nothing to terminate
    expect(report.cleanup).toEqual({ links: 0, namespaces: 0, done: true });
    const { store, close } = await openStore(dir);
    try {
      const [node] = await store.listNodes();
      const leases = await store.listLeases(node!.instanceArn);
      expect(leases.length).toBeGreaterThan(0);
      expect(leases.every((l) => l.prefix !== undefined && l.subnetCidr === '10.0.64.0/20')).toBe(true);
      expect(leases.filter((l) => l.state === 'CLAIMED')).toHaveLength(report.pods.running);
    } finally {
      await close();
    }
    expect(readdirSync(dir)).toContain('dynamodb');
  }, 240_000);

  /** Waits until `check` holds (the reaper works on its own schedule). */
  async function eventually(check: () => boolean, timeoutMs = 10_000): Promise<boolean> {
    const deadline = Date.now() + timeoutMs;
    while (!check() && Date.now() < deadline) await new Promise((r) => setTimeout(r, 100));
    return check();
  }

  async function interruptWhileStartingPods(signal: NodeJS.Signals, direct: boolean) {
    const before = leftovers();
    const dir = localDir();
    const { child, done } = start(['--nodes', '2', '--pods', '40', '--local-dir', dir], direct);
    let stderr = '';
    child.stderr?.on('data', (c: Buffer) => (stderr += c.toString('utf8')));
    // Interrupt while pods are being started: namespaces and host links exist by then.
    for (let i = 0; i < 1200 && !/pods: real CNI binary/.test(stderr); i += 1)
      await new Promise((r) => setTimeout(r, 50));
    expect(await eventually(() => leftovers().length > before.length, 30_000)).toBe(true);
    child.kill(signal);
    const { code } = await done;
    return { before, dir, code, stderr };
  }

  it.skipIf(datapathMissing)(
    'removes every namespace and link it made when interrupted with Ctrl-C',
    async () => {
      const { before, dir, code, stderr } = await interruptWhileStartingPods('SIGINT', true);
      expect(code, stderr.slice(-2000)).toBe(130);
      expect(stderr).toMatch(/SIGINT: stopping; removed \d+ namespaces and \d+ host links/);
      expect(leftovers()).toEqual(before);
      expect(existsSync(join(dir, 'state.json'))).toBe(false);
    },
    240_000,
  );

  it.skipIf(datapathMissing)(
    'leaves nothing behind even when killed outright (its reaper cleans up)',
    async () => {
      const { before, code } = await interruptWhileStartingPods('SIGKILL', true);
      expect(code).toBeNull(); // killed: no handler ran
      expect(await eventually(() => leftovers().length === before.length)).toBe(true);
      expect(leftovers()).toEqual(before);
    },
    240_000,
  );

  it('refuses bad options with the usage (exit 2)', async () => {
    const { done } = start(['--nodes', 'many']);
    const { code, stderr } = await done;
    expect(code).toBe(2);
    expect(stderr).toContain('--nodes: expected an integer from 1 to 20, got "many"');
    expect(stderr).toContain('usage: npm start -- [options]');
  }, 60_000);
});
