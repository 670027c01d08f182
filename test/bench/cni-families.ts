import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import { instanceArn } from '../../shared/domain/arn.js';
import type { IpFamilySetting } from '../../shared/domain/node.js';
import type { FakeImds } from '../node/support/fake-imds.js';
import { writeLaunchLeases } from '../node/support/launch-leases.js';
import type { PluginRun } from '../node/support/node-fixture.js';
import type { AgentBench } from './cni-agent.js';
import { type CniBenchNode, expectOk } from './cni-node.js';
import { childrenCpuMs } from './cpu.js';
import { elapsedMs, round, summarize } from './stats.js';

/** The address families the bench runs beside the fixture's own ipv4 node. */
export type BenchFamily = Exclude<IpFamilySetting, 'ipv4'>;

interface FamilyNode {
  readonly family: BenchFamily;
  readonly imds: FakeImds;
  readonly conf: Record<string, unknown>;
  readonly samples: { add: number[]; del: number[]; agentAdd: number[]; agentDel: number[] };
}

/** Pods each family's node can hold at once: the bench runs one at a time, the rest is headroom. */
const LEASES_PER_NODE = 16;

/**
 * `dual` (and `ipv6`) pods beside the ipv4 ones in `npm run bench -- cni`. Each family is its own instance on the
 * bench's host link — its IMDS, its partition with the node item and leases a launch of that family writes
 * (writeLaunchLeases), its dataDir and log — so no family's claim can take another's lease and the ipv4 phase
 * marks stay ipv4's. Blocks join the bench's shuffled rounds, so load hits every family alike.
 */
export class FamilyBench {
  private constructor(
    private readonly node: CniBenchNode,
    private readonly agent: AgentBench,
    private readonly nodes: readonly FamilyNode[],
  ) {}

  static async start(node: CniBenchNode, agent: AgentBench, families: readonly BenchFamily[]): Promise<FamilyBench> {
    const nodes: FamilyNode[] = [];
    try {
      for (const [i, family] of families.entries()) {
        const instanceId = `i-0${randomBytes(8).toString('hex')}`;
        const imds = await node.fixture.startOtherImds(instanceId);
        nodes.push({
          family,
          imds,
          conf: node.netconf(false, {
            ipFamily: family,
            imdsEndpoint: imds.endpoint,
            dataDir: join(node.fixture.dir, `data-${family}`),
            logFile: join(node.fixture.dir, `cni-${family}.log`),
          }),
          samples: { add: [], del: [], agentAdd: [], agentDel: [] },
        });
        const launched = { instanceArn: instanceArn('us-east-1', '123456789012', instanceId, 'aws'), instanceId };
        const eni = { eniId: node.fixture.eniId, mac: node.fixture.masterMac };
        // IPv4 above the ipv4 node's .160–.175: each family's pods get addresses of their own on the shared link.
        await writeLaunchLeases(node.fixture.store, { ...launched, ...eni }, family, LEASES_PER_NODE, 176 + 16 * i);
      }
    } catch (err) {
      for (const n of nodes) await n.imds.close();
      throw err;
    }
    return new FamilyBench(node, agent, nodes);
  }

  /** Per family, one pod run as a process (the plugin, as `pod`) and one through the agent (as `agentPod`). */
  blocks(netns: string): Record<string, (i: number) => Promise<void>> {
    const timed = async (what: string, run: () => Promise<PluginRun>): Promise<number> => {
      const start = process.hrtime.bigint();
      const result = await run();
      const ms = elapsedMs(start);
      expectOk(what, result);
      return ms;
    };
    const out: Record<string, (i: number) => Promise<void>> = {};
    for (const { family, conf, samples } of this.nodes) {
      out[`${family}Pod`] = async (i) => {
        const ids = { netns, containerId: `${family}${i}` };
        samples.add.push(await timed(`${family} ADD`, () => this.node.run('ADD', ids, conf)));
        samples.del.push(await timed(`${family} DEL`, () => this.node.run('DEL', ids, conf)));
      };
      out[`${family}AgentPod`] = async (i) => {
        const ids = { netns, containerId: `${family}agent${i}` };
        samples.agentAdd.push(await timed(`${family} agent ADD`, () => this.agent.viaAgent('ADD', ids, conf)));
        samples.agentDel.push(await timed(`${family} agent DEL`, () => this.agent.viaAgent('DEL', ids, conf)));
      };
    }
    return out;
  }

  /** Forgets the warm-up's samples. */
  resetSamples(): void {
    for (const { samples } of this.nodes) for (const list of Object.values(samples)) list.length = 0;
  }

  /**
   * Per family: latency of ADD and DEL on both paths, CPU per pod (ADD + DEL) as a process, through the agent and
   * by the fallback, and the DynamoDB requests per ADD and DEL counted on the wire over `countedPods` pods.
   */
  async figures(netns: string, cpuPods: number, countedPods: number): Promise<Record<string, unknown>> {
    const out: Record<string, unknown> = {};
    for (const { family, conf, samples } of this.nodes) {
      const before = childrenCpuMs();
      for (let i = 0; i < cpuPods; i++) {
        const ids = { netns, containerId: `${family}cpu${i}` };
        expectOk(`${family} cpu ADD`, await this.node.run('ADD', ids, conf));
        expectOk(`${family} cpu DEL`, await this.node.run('DEL', ids, conf));
      }
      const plugin = round((childrenCpuMs() - before) / cpuPods);
      const agentCpu = await this.agent.cpuMsPerPod(netns, conf, cpuPods);
      const counted = { ...conf, dynamoEndpoint: this.node.dynamoCounter.endpoint };
      const requests = { ADD: 0, DEL: 0 };
      for (let i = 0; i < countedPods; i++)
        for (const command of ['ADD', 'DEL'] as const) {
          this.node.dynamoCounter.reset();
          expectOk(
            `${family} counted ${command}`,
            await this.node.run(command, { netns, containerId: `${family}n${i}` }, counted),
          );
          requests[command] += this.node.dynamoCounter.total();
        }
      out[family] = {
        latencyMs: {
          add: summarize(samples.add),
          del: summarize(samples.del),
          agentAdd: summarize(samples.agentAdd),
          agentDel: summarize(samples.agentDel),
        },
        cpuMsPerPod: { ours: plugin, throughAgent: agentCpu.agent, fallback: agentCpu.fallback },
        dynamoRequestsPerAdd: round(requests.ADD / countedPods),
        dynamoRequestsPerDel: round(requests.DEL / countedPods),
      };
    }
    return out;
  }

  async close(): Promise<void> {
    for (const n of this.nodes) await n.imds.close();
  }
}
