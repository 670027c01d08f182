/**
 * A quick start-up measurement (the benchmark suite proper lives in test/bench): medians of VERSION, ADD and DEL
 * of the development launcher (bundle + V8 code cache on the running Node) and of the single executable in
 * both startup modes (code cache, what a node runs, and V8 startup snapshot), next to bare `node -e ''` and the Go reference (macvlan + host-local),
 * measured in the same run, sequentially, as root. `npx tsx test/node/measure-startup.ts [rounds]`. Prints JSON.
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { buildSea } from '../../packaging/build.js';
import { NodeFixture, runProcess } from './support/node-fixture.js';

const rounds = Number(process.argv[2] ?? 30);

function median(values: number[]): number {
  const s = [...values].sort((a, b) => a - b);
  return Math.round(((s[Math.floor((s.length - 1) / 2)]! + s[Math.ceil((s.length - 1) / 2)]!) / 2) * 10) / 10;
}

async function timed(fn: () => Promise<{ code: number | null; stdout: string }>): Promise<number> {
  const t0 = process.hrtime.bigint();
  const r = await fn();
  const ms = Number(process.hrtime.bigint() - t0) / 1e6;
  if (r.code !== 0) throw new Error(`failed: ${r.stdout}`);
  return ms;
}

const f = await NodeFixture.start();
const hostLocalDir = mkdtempSync(join(tmpdir(), 'vpc-lease-hl-'));
const seaDir = mkdtempSync(join(tmpdir(), 'vpc-lease-sea-measure-'));
try {
  // High in the fixture subnet: other suites on this host route its low addresses in the host table.
  await f.seed(8, 170);
  const env = { PATH: process.env['PATH'] ?? '/usr/bin:/bin' };
  const samples: Record<string, number[]> = {
    'node -e ""': [],
    'vpc-lease VERSION': [],
    'vpc-lease ADD': [],
    'vpc-lease DEL': [],
    'sea VERSION': [],
    'sea ADD': [],
    'sea DEL': [],
    'sea-snapshot VERSION': [],
    'sea-snapshot ADD': [],
    'sea-snapshot DEL': [],
    'go macvlan VERSION': [],
    'go macvlan+host-local ADD': [],
    'go macvlan+host-local DEL': [],
  };
  const netns = f.addNetns();
  const goConf = {
    cniVersion: '1.0.0',
    name: 'bench',
    type: 'macvlan',
    master: f.masterName,
    mode: 'bridge',
    ipam: { type: 'host-local', subnet: '10.78.0.0/24', dataDir: hostLocalDir },
  };
  const goEnv = (command: string) => ({
    ...env,
    CNI_COMMAND: command,
    CNI_CONTAINERID: 'bench',
    CNI_IFNAME: 'eth1',
    CNI_NETNS: netns,
    CNI_PATH: '/usr/lib/cni',
  });
  // Warm the identity cache and the page cache once, as on a node that has run pods before.
  await f.run('ADD', { netns, containerId: 'warm' }, f.netconf('1.0.0'));
  await f.run('DEL', { netns, containerId: 'warm' }, f.netconf('1.0.0'));
  const sea = await buildSea(join(seaDir, 'code-cache'), { reuse: true });
  const seaSnapshot = await buildSea(join(seaDir, 'snapshot'), { reuse: true, startup: 'snapshot' });
  const seaEnv = (command: string, containerId: string): Record<string, string> => ({
    ...f.baseEnv(),
    CNI_COMMAND: command,
    CNI_CONTAINERID: containerId,
    CNI_IFNAME: 'eth0',
    CNI_NETNS: netns,
    CNI_PATH: '/usr/lib/cni',
  });
  const seaConf = JSON.stringify(f.netconf('1.0.0'));
  for (let i = 0; i < rounds; i++) {
    samples['sea VERSION']!.push(await timed(() => runProcess(sea, [], seaEnv('VERSION', 'v'), '{}')));
    samples['sea ADD']!.push(await timed(() => runProcess(sea, [], seaEnv('ADD', `s${i}`), seaConf)));
    samples['sea DEL']!.push(await timed(() => runProcess(sea, [], seaEnv('DEL', `s${i}`), seaConf)));
    const snap = (command: string, id: string, stdin: string) =>
      runProcess(seaSnapshot, [], seaEnv(command, id), stdin);
    samples['sea-snapshot VERSION']!.push(await timed(() => snap('VERSION', 'v', '{}')));
    samples['sea-snapshot ADD']!.push(await timed(() => snap('ADD', `p${i}`, seaConf)));
    samples['sea-snapshot DEL']!.push(await timed(() => snap('DEL', `p${i}`, seaConf)));
    samples['node -e ""']!.push(await timed(() => runProcess(process.execPath, ['-e', ''], env, '')));
    samples['vpc-lease VERSION']!.push(await timed(() => f.run('VERSION', {}, {})));
    samples['vpc-lease ADD']!.push(
      await timed(() => f.run('ADD', { netns, containerId: `b${i}` }, f.netconf('1.0.0'))),
    );
    samples['vpc-lease DEL']!.push(
      await timed(() => f.run('DEL', { netns, containerId: `b${i}` }, f.netconf('1.0.0'))),
    );
    samples['go macvlan VERSION']!.push(
      await timed(() => runProcess('/usr/lib/cni/macvlan', [], { ...env, CNI_COMMAND: 'VERSION' }, '{}')),
    );
    samples['go macvlan+host-local ADD']!.push(
      await timed(() => runProcess('/usr/lib/cni/macvlan', [], goEnv('ADD'), JSON.stringify(goConf))),
    );
    samples['go macvlan+host-local DEL']!.push(
      await timed(() => runProcess('/usr/lib/cni/macvlan', [], goEnv('DEL'), JSON.stringify(goConf))),
    );
  }
  const medians = Object.fromEntries(Object.entries(samples).map(([k, v]) => [k, median(v)]));
  const bare = medians['node -e ""']!;
  console.log(
    JSON.stringify(
      {
        rounds,
        mediansMs: medians,
        ratioToBareNode: {
          ADD: Math.round((medians['vpc-lease ADD']! / bare) * 100) / 100,
          DEL: Math.round((medians['vpc-lease DEL']! / bare) * 100) / 100,
          VERSION: Math.round((medians['vpc-lease VERSION']! / bare) * 100) / 100,
          seaADD: Math.round((medians['sea ADD']! / bare) * 100) / 100,
          seaDEL: Math.round((medians['sea DEL']! / bare) * 100) / 100,
          seaVERSION: Math.round((medians['sea VERSION']! / bare) * 100) / 100,
          seaSnapshotADD: Math.round((medians['sea-snapshot ADD']! / bare) * 100) / 100,
          seaSnapshotDEL: Math.round((medians['sea-snapshot DEL']! / bare) * 100) / 100,
          seaSnapshotVERSION: Math.round((medians['sea-snapshot VERSION']! / bare) * 100) / 100,
        },
      },
      null,
      2,
    ),
  );
  execFileSync('true');
} finally {
  rmSync(hostLocalDir, { recursive: true, force: true });
  rmSync(seaDir, { recursive: true, force: true });
  await f.close();
}
