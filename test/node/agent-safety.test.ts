import { execFileSync } from 'node:child_process';
import { chmodSync, mkdirSync, mkdtempSync, statSync } from 'node:fs';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { Journal } from '../../node/journal/journal.js';
import { missing } from '../support/capabilities.js';
import { type AgentProcess, loggedPids, rawRequest, shimBeside, startAgent } from './support/agent-process.js';
import { NodeFixture } from './support/node-fixture.js';

/**
 * The agent's socket admits only root in the host's mount view, and an ADD the agent half did before it was
 * killed is finished (or undone) by the next call for that attachment, whichever process takes it.
 */
const skip = missing('root', 'netns', 'go-plugins');

/** Connects to a unix socket from a child process; prints `ok` or the errno code. */
const PROBE = `const s=require('net').connect(process.argv[1]);s.on('connect',()=>{process.stdout.write('ok');s.destroy()});s.on('error',e=>process.stdout.write(e.code))`;

function probeAs(socket: string, options: { uid?: number; netns?: string; privateRun?: string } = {}): string {
  const argv = [process.execPath, '-e', PROBE, socket];
  // A pod's view: its own network namespace, and a mount namespace whose /run (or the directory above the socket)
  // is its own tmpfs, as a container runtime gives it. Paths reach the shell only as positional parameters.
  const wrapped = options.privateRun
    ? [
        'unshare',
        '--mount',
        '--propagation',
        'private',
        '--',
        'sh',
        '-c',
        'mount -t tmpfs pod "$1"; shift; exec "$@"',
        'sh',
        options.privateRun,
        ...argv,
      ]
    : argv;
  const full = options.netns ? ['ip', 'netns', 'exec', options.netns.split('/').pop()!, ...wrapped] : wrapped;
  return execFileSync(full[0]!, full.slice(1), {
    encoding: 'utf8',
    ...(options.uid !== undefined ? { uid: options.uid, gid: options.uid } : {}),
  });
}

describe.skipIf(skip)('the agent socket and an agent killed mid-ADD', () => {
  let f: NodeFixture;
  let shim: string;
  let agent: AgentProcess | undefined;
  beforeAll(async () => {
    f = await NodeFixture.start();
    await f.seed(32);
    shim = shimBeside(f.cni);
  });
  afterEach(async () => {
    if (agent && agent.child.exitCode === null) await agent.kill();
    agent = undefined;
  });
  afterAll(async () => {
    await f?.close();
  });

  const newSocket = () => join(mkdtempSync(join(f.dir, 'run-')), 'vpc-lease', 'agent.sock');
  const viaShim = (socket: string) => ({ executable: shim, env: { VPC_LEASE_AGENT_SOCKET: socket } });
  const claimedBy = async (containerId: string) =>
    (await f.store.listLeases(f.arn, { state: 'CLAIMED' })).filter((l) => l.holder?.containerId === containerId);

  it('is root-owned, 0600 in a 0700 directory, and refuses nobody and a pod’s view', async () => {
    const socket = newSocket();
    agent = await startAgent(f.cni, socket, f.baseEnv());
    const st = statSync(socket);
    expect(st.isSocket()).toBe(true);
    expect([st.uid, st.mode & 0o777]).toEqual([0, 0o600]);
    const dir = statSync(join(socket, '..'));
    expect([dir.uid, dir.mode & 0o777]).toEqual([0, 0o700]);
    // f.dir is created 0700 by mkdtemp: open the path down to the agent's directory, so only its modes decide.
    for (const up of [f.dir, join(socket, '..', '..')]) chmodSync(up, 0o755);

    expect(probeAs(socket)).toBe('ok');
    expect(probeAs(socket, { uid: 65534 })).toBe('EACCES');
    // Control: the same probe as nobody reaches a socket whose modes admit it, so EACCES above is the modes' doing.
    const openDir = join(f.dir, 'open');
    mkdirSync(openDir, { mode: 0o755 });
    chmodSync(openDir, 0o755);
    const open = createServer();
    const openSocket = join(openDir, 'open.sock');
    await new Promise<void>((resolve) => open.listen(openSocket, resolve));
    chmodSync(openSocket, 0o666);
    try {
      expect(probeAs(openSocket, { uid: 65534 })).toBe('ok');
    } finally {
      open.close();
    }

    // A pod: its own netns and mount view (a private tmpfs where the host's socket directory is) cannot name it.
    const podNetns = f.addNetns();
    const hostDir = join(socket, '..', '..');
    expect(probeAs(socket, { netns: podNetns, privateRun: hostDir })).toBe('ENOENT');
    // Control: in the pod's netns but with the host's mount view it would connect: a filesystem socket is not
    // per-netns, which is why the directory must never be mounted into a pod (node/README.md, "Agent").
    expect(probeAs(socket, { netns: podNetns })).toBe('ok');
    expect(agent.child.exitCode).toBeNull();
  });

  // The points where a dying agent leaves different remains: a claim and only an intent on disk (the record's
  // write is still in flight); the link made in the pod under its temp name; the link with its address but not
  // up and without a route.
  it.each(['claim', 'create-link', 'add-address'])(
    'an ADD the agent was killed in after %s is finished by the plugin the shim falls back to',
    async (step) => {
      const socket = newSocket();
      agent = await startAgent(f.cni, socket, { ...f.baseEnv(), VPC_LEASE_TEST_HANG_AT: step });
      const netns = f.addNetns();
      const containerId = `half-${step}`;
      const pending = f.run('ADD', { netns, containerId, ...viaShim(socket) }, f.netconf('1.0.0'));
      // The agent blocks right after the step: wait until its remains are visible, then kill it.
      const hasAddress = () =>
        f
          .ipJson(netns, 'addr', 'show')
          .some((l) =>
            ((l['addr_info'] ?? []) as { family: string }[]).some((a) => a.family === 'inet' && l['ifname'] !== 'lo'),
          );
      const reached = async () =>
        step === 'claim'
          ? (await claimedBy(containerId)).length === 1
          : step === 'create-link'
            ? f.podLinks(netns).length > 0
            : hasAddress();
      for (const deadline = Date.now() + 60_000; !(await reached()); ) {
        if (Date.now() > deadline) throw new Error(`the agent never reached ${step}`);
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
      await agent.kill();
      const add = await pending;
      expect(add.code, add.stdout).toBe(0);
      const address = (add.json as { ips: { address: string }[] }).ips[0]!.address;
      expect(loggedPids(f.logFile, 'added', containerId)).not.toContain(agent.pid);
      expect((await claimedBy(containerId)).map((l) => `${l.ip}/24`)).toEqual([address]);
      const [link] = f.ipJson(netns, 'addr', 'show', 'eth0');
      expect((link?.['flags'] ?? []) as string[]).toContain('UP');
      expect(f.ipJson(netns, 'route', 'show', 'default')).toHaveLength(1);
      const del = await f.run('DEL', { netns, containerId, ...viaShim(socket) }, f.netconf('1.0.0'));
      expect(del.code, del.stdout).toBe(0);
      expect(await claimedBy(containerId)).toEqual([]);
    },
    120_000,
  );

  it('an ADD the agent was killed in is undone by a DEL, the runtime’s next call', async () => {
    const socket = newSocket();
    agent = await startAgent(f.cni, socket, { ...f.baseEnv(), VPC_LEASE_TEST_HANG_AT: 'add-address' });
    const netns = f.addNetns();
    const containerId = 'half-undone';
    const env = {
      ...f.baseEnv(),
      CNI_COMMAND: 'ADD',
      CNI_CONTAINERID: containerId,
      CNI_IFNAME: 'eth0',
      CNI_NETNS: netns,
      CNI_PATH: '/usr/lib/cni',
    };
    // Sent as the shim would, but this client never falls back: the ADD stays half done when the agent dies.
    const sent = rawRequest(socket, env, JSON.stringify(f.netconf('1.0.0')));
    for (const deadline = Date.now() + 60_000; f.podLinks(netns).length === 0; ) {
      if (Date.now() > deadline) throw new Error('the agent never made the link');
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    expect(await claimedBy(containerId)).toHaveLength(1);
    await agent.kill();
    expect((await sent).answer.length).toBe(0);
    const del = await f.run('DEL', { netns, containerId, ...viaShim(socket) }, f.netconf('1.0.0'));
    expect(del.code, del.stdout).toBe(0);
    expect(f.podLinks(netns)).toEqual([]);
    expect(await claimedBy(containerId)).toEqual([]);
    expect(new Journal(f.dataDir).read(containerId, 'eth0')).toBeUndefined();
  }, 120_000);
});
