import { mkdtempSync } from 'node:fs';
import { createServer, type Server, type Socket } from 'node:net';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { ACCEPTED, type AgentRequest, decodeRequest, REFUSED } from '../../node/agent/protocol.js';
import { Journal } from '../../node/journal/journal.js';
import { missing } from '../support/capabilities.js';
import { type AgentProcess, loggedPids, rawRequest, shimBeside, startAgent } from './support/agent-process.js';
import { NodeFixture } from './support/node-fixture.js';

/**
 * The shim → agent path (node/shim/shim.c, node/agent/) against real network namespaces, dynalite behind the IAM
 * endpoint and an IMDS: who ran each call is read from the plugin log's `pid` field (the agent's, or a plugin
 * process's after the shim fell back).
 */
const skip = missing('root', 'netns', 'go-plugins');

describe.skipIf(skip)('the node agent behind the shim', () => {
  let f: NodeFixture;
  let shim: string;
  let agent: AgentProcess | undefined;
  const socketDir = () => mkdtempSync(join(f.dir, 'run-'));
  beforeAll(async () => {
    f = await NodeFixture.start();
    await f.seed(64);
    shim = shimBeside(f.cni);
  });
  afterEach(async () => {
    if (agent && agent.child.exitCode === null) await agent.kill();
    agent = undefined;
  });
  afterAll(async () => {
    await f?.close();
  });

  const viaShim = (socket: string) => ({ executable: shim, env: { VPC_LEASE_AGENT_SOCKET: socket } });
  const addressOf = (json: Record<string, unknown> | undefined) =>
    (json as { ips: { address: string }[] }).ips[0]!.address;
  const holders = async (containerId: string) =>
    (await f.store.listLeases(f.arn, { state: 'CLAIMED' })).filter((l) => l.holder?.containerId === containerId);

  it('runs ADD, CHECK and DEL in the agent, with the plugin’s result and lease', async () => {
    const socket = join(socketDir(), 'agent.sock');
    agent = await startAgent(f.cni, socket, f.baseEnv());
    const netns = f.addNetns();
    const containerId = 'agent-life';
    const conf = f.netconf('1.0.0');
    const add = await f.run('ADD', { netns, containerId, ...viaShim(socket) }, conf);
    expect(add.code, add.stdout).toBe(0);
    expect(loggedPids(f.logFile, 'added', containerId)).toEqual([agent.pid]);
    const address = addressOf(add.json);
    expect((await holders(containerId)).map((l) => `${l.ip}/24`)).toEqual([address]);
    expect(f.podLinks(netns).sort()).toEqual(['eth0', 'vh-eth0']);

    const check = await f.run('CHECK', { netns, containerId, ...viaShim(socket) }, { ...conf, prevResult: add.json });
    expect(check.code, check.stdout).toBe(0);
    const bad = await f.run('ADD', { netns, containerId: 'bad id!', ...viaShim(socket) }, conf);
    expect(bad.code).toBe(1);
    expect(bad.json).toMatchObject({ code: 4 });

    const del = await f.run('DEL', { netns, containerId, ...viaShim(socket) }, conf);
    expect(del.code, del.stdout).toBe(0);
    expect(loggedPids(f.logFile, 'deleted', containerId)).toEqual([agent.pid]);
    expect(f.podLinks(netns)).toEqual([]);
    expect(await holders(containerId)).toEqual([]);
  });

  it('serves concurrent ADDs into different netns, each link in its own pod', async () => {
    const socket = join(socketDir(), 'agent.sock');
    agent = await startAgent(f.cni, socket, f.baseEnv());
    const pods = Array.from({ length: 12 }, (_, i) => ({ netns: f.addNetns(), containerId: `conc-${i}` }));
    // Twelve claims at once against dynalite in this process on a loaded machine: a generous store timeout, so a
    // slow machine cannot fail what this test is about.
    const conf = f.netconf('1.0.0', { storeTimeoutMs: 60_000 });
    const results = await Promise.all(pods.map((p) => f.run('ADD', { ...p, ...viaShim(socket) }, conf)));
    for (const [i, r] of results.entries()) {
      expect(r.code, r.stdout).toBe(0);
      const pod = pods[i]!;
      expect(loggedPids(f.logFile, 'added', pod.containerId)).toEqual([agent.pid]);
      // The address the result names is on the eth0 inside that pod's namespace, and nowhere else.
      const [link] = f.ipJson(pod.netns, 'addr', 'show', 'eth0');
      const addrs = ((link?.['addr_info'] ?? []) as { family: string; local: string; prefixlen: number }[])
        .filter((a) => a.family === 'inet')
        .map((a) => `${a.local}/${a.prefixlen}`);
      expect(addrs).toEqual([addressOf(r.json)]);
      expect(f.podLinks(pod.netns).sort()).toEqual(['eth0', 'vh-eth0']);
    }
    expect(new Set(results.map((r) => addressOf(r.json))).size).toBe(pods.length);
    // A link created in the wrong namespace would stay on the host under its temp name (vl + 12 hex digits).
    expect(f.hostLinks().filter((n) => /^vl[0-9a-f]{12}$/.test(n))).toEqual([]);
    // The agent checks its thread's netns after every call and exits if one leaked: still alive means none did.
    expect(agent.child.exitCode).toBeNull();
    for (const p of pods) expect((await f.run('DEL', { ...p, ...viaShim(socket) }, conf)).code).toBe(0);
  }, 180_000);

  describe('falls back to the full plugin', () => {
    /** A stand-in at the agent's socket: `onRequest` gets each whole request the shim sent. */
    const fakeAgent = async (
      socket: string,
      onRequest: (conn: Socket, request: AgentRequest) => void | Promise<void>,
    ): Promise<Server> => {
      const server = createServer((conn) => {
        let buf = Buffer.alloc(0);
        conn.on('data', (c: Buffer) => {
          buf = Buffer.concat([buf, c]);
          const request = decodeRequest(buf);
          if (request) void onRequest(conn, request);
        });
        conn.on('error', () => undefined);
      });
      await new Promise<void>((resolve) => server.listen(socket, resolve));
      return server;
    };

    it.each([
      ['no socket', undefined],
      ['an agent that refuses', (conn: Socket) => void conn.end(Buffer.from([REFUSED]))],
      ['an agent that never accepts', () => undefined],
      ['an agent that accepts and drops the call', (conn: Socket) => void conn.end(Buffer.from([ACCEPTED]))],
    ])('with %s', async (label, behaviour) => {
      const socket = join(socketDir(), 'agent.sock');
      const server = behaviour ? await fakeAgent(socket, behaviour) : undefined;
      const netns = f.addNetns();
      const containerId = `fb-${label.replaceAll(' ', '-')}`;
      try {
        const add = await f.run('ADD', { netns, containerId, ...viaShim(socket) }, f.netconf('1.0.0'));
        expect(add.code, add.stdout).toBe(0);
        const pids = loggedPids(f.logFile, 'added', containerId);
        expect(pids).toHaveLength(1);
        expect(pids[0]).not.toBe(process.pid);
        expect((await holders(containerId)).map((l) => `${l.ip}/24`)).toEqual([addressOf(add.json)]);
        const del = await f.run('DEL', { netns, containerId, ...viaShim(socket) }, f.netconf('1.0.0'));
        expect(del.code, del.stdout).toBe(0);
      } finally {
        server?.close();
      }
    });

    it('re-runs an ADD the agent finished but whose answer was lost, and the journal makes it the same ADD', async () => {
      const realSocket = join(socketDir(), 'agent.sock');
      agent = await startAgent(f.cni, realSocket, f.baseEnv());
      // A proxy that passes the request to the real agent, reads its whole answer, and drops the shim's connection.
      let agentAnswer: Buffer = Buffer.alloc(0);
      const socket = join(socketDir(), 'proxy.sock');
      const server = await fakeAgent(socket, async (conn, request) => {
        agentAnswer = (await rawRequest(realSocket, request.env, request.stdin)).answer;
        conn.end(Buffer.from([ACCEPTED]));
      });
      const netns = f.addNetns();
      const containerId = 'lost-answer';
      try {
        const add = await f.run('ADD', { netns, containerId, ...viaShim(socket) }, f.netconf('1.0.0'));
        expect(add.code, add.stdout).toBe(0);
        // The agent did the ADD (its answer never reached the shim), then the plugin ran it again.
        const agentResult = JSON.parse(agentAnswer.subarray(5).toString('utf8')) as Record<string, unknown>;
        expect(loggedPids(f.logFile, 'added', containerId)).toEqual([agent.pid, expect.any(Number)]);
        expect(addressOf(add.json)).toBe(addressOf(agentResult));
        expect((await holders(containerId)).length).toBe(1);
        expect(f.podLinks(netns).sort()).toEqual(['eth0', 'vh-eth0']);
        expect(new Journal(f.dataDir).read(containerId, 'eth0')?.ip).toBe(addressOf(add.json).split('/')[0]);
      } finally {
        server.close();
      }
    });
  });
});
