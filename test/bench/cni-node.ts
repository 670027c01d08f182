import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { buildSea } from '../../packaging/build.js';
import { shimBeside } from '../node/support/agent-process.js';
import { NodeFixture, type PluginRun } from '../node/support/node-fixture.js';
import { execPlugin } from './exec.js';
import { type RequestCounter, startRequestCounter } from './request-counter.js';

/**
 * One simulated node for the CNI benchmarks: the plugin's test fixture (dynalite, IMDS, a host link carrying
 * the ENI's MAC, a private build) plus a request-counting proxy in front of dynalite, a trap standing in for
 * EC2 (every request it sees is a pod-path EC2 call, which must never happen), and the Go reference chain.
 */
/** Which attachment a call is about (CNI_CONTAINERID, CNI_IFNAME, CNI_NETNS). */
export interface Attachment {
  readonly containerId?: string;
  readonly ifName?: string;
  readonly netns?: string;
}

export class CniBenchNode {
  readonly hostLocalDir = mkdtempSync(join(tmpdir(), 'vpc-lease-bench-hl-'));

  private constructor(
    readonly fixture: NodeFixture,
    readonly dynamoCounter: RequestCounter,
    readonly ec2Trap: RequestCounter,
    /** What a node runs: the single executable (`npm run build`'s dist/vpc-lease-cni), natives beside it. */
    readonly binary: string,
    private readonly binDir: string,
  ) {}

  static async start(): Promise<CniBenchNode> {
    const fixture = await NodeFixture.start();
    const binDir = mkdtempSync(join(tmpdir(), 'vpc-lease-bench-sea-'));
    try {
      const binary = await buildSea(binDir, { reuse: true });
      // In front of the IAM-enforcing endpoint, as every node request goes: the node policy judges the counted runs too.
      const dynamoCounter = await startRequestCounter(fixture.iam.endpoint);
      const ec2Trap = await startRequestCounter();
      return new CniBenchNode(fixture, dynamoCounter, ec2Trap, binary, binDir);
    } catch (err) {
      await fixture.close();
      rmSync(binDir, { recursive: true, force: true });
      throw err;
    }
  }

  /** The plugin's netconf as a node would carry it (log level info, no cooldown so leases cycle). */
  netconf(counted: boolean, extra: Record<string, unknown> = {}): Record<string, unknown> {
    return this.fixture.netconf('1.0.0', {
      logLevel: 'info',
      ...(counted ? { dynamoEndpoint: this.dynamoCounter.endpoint } : {}),
      ...extra,
    });
  }

  /**
   * Runs the plugin with the fixture's environment (test link kind, CNI_*), and the EC2 trap where an EC2 SDK, if
   * one ever crept into the binary, would look for its endpoint.
   */
  run(command: string, options: Attachment, netconf: Record<string, unknown>): Promise<PluginRun> {
    if (this.agentSocket)
      return execPlugin(
        shimBeside(this.binary),
        [],
        { ...this.env(command, options), VPC_LEASE_AGENT_SOCKET: this.agentSocket },
        JSON.stringify(netconf),
      );
    return execPlugin(this.binary, [], this.env(command, options), JSON.stringify(netconf));
  }

  /** Set: run() executes the shim, which forwards to the agent listening here (the runtime's path since #22). */
  agentSocket?: string;

  env(command: string, options: Attachment): Record<string, string> {
    return {
      ...this.fixture.baseEnv(),
      AWS_ENDPOINT_URL_EC2: this.ec2Trap.endpoint,
      AWS_ENDPOINT_URL: this.ec2Trap.endpoint,
      CNI_COMMAND: command,
      CNI_CONTAINERID: options.containerId ?? 'c0',
      CNI_IFNAME: options.ifName ?? 'eth0',
      CNI_PATH: '/usr/lib/cni',
      ...(options.netns !== undefined ? { CNI_NETNS: options.netns } : {}),
    };
  }

  goNetconf(extra: Record<string, unknown> = {}): Record<string, unknown> {
    return {
      cniVersion: '1.0.0',
      name: 'bench-go',
      type: 'macvlan',
      master: this.fixture.masterName,
      mode: 'bridge',
      ipam: { type: 'host-local', subnet: '10.78.0.0/24', dataDir: this.hostLocalDir },
      ...extra,
    };
  }

  /** The reference chain: macvlan with host-local IPAM, exec'd the way a runtime does. */
  runGo(
    command: string,
    options: { containerId: string; netns?: string; ifName: string },
    netconf: Record<string, unknown>,
  ): Promise<PluginRun> {
    return execPlugin('/usr/lib/cni/macvlan', [], this.goEnv(command, options), JSON.stringify(netconf));
  }

  goEnv(command: string, options: { containerId: string; netns?: string; ifName: string }): Record<string, string> {
    return {
      PATH: process.env['PATH'] ?? '/usr/bin:/bin',
      CNI_COMMAND: command,
      CNI_CONTAINERID: options.containerId,
      CNI_IFNAME: options.ifName,
      CNI_PATH: '/usr/lib/cni',
      ...(options.netns ? { CNI_NETNS: options.netns } : {}),
    };
  }

  async close(): Promise<void> {
    await this.dynamoCounter.close();
    await this.ec2Trap.close();
    await this.fixture.close();
    rmSync(this.hostLocalDir, { recursive: true, force: true });
    rmSync(this.binDir, { recursive: true, force: true });
  }
}

/** Throws with the plugin's own words when a run did not succeed: a failed run's latency is not a figure. */
export function expectOk(what: string, run: PluginRun): PluginRun {
  if (run.code !== 0) throw new Error(`${what} failed (exit ${run.code}): ${run.stdout.trim()} ${run.stderr.trim()}`);
  return run;
}
