import { hostVethName } from '../../../node/datapath/host-veth.js';
import { ROUTING_STEPS } from '../../../node/datapath/pod-routing.js';
import { FAULT_STEPS } from '../../../node/datapath/test-hooks.js';
import { assert, type GuestNode, type PluginRun } from './guest-node.js';
import type { GuestCase } from './runner.js';
import { leftovers, snapshot } from './snapshot.js';

/** Every step ADD can fail at, in the order ADD runs them: the tables, rule and veth come after the pod's route. */
export const ADD_STEPS: readonly string[] = (() => {
  const at = FAULT_STEPS.indexOf('add-route') + 1;
  return [...FAULT_STEPS.slice(0, at), ...ROUTING_STEPS, ...FAULT_STEPS.slice(at)];
})();

/**
 * ADDs failing at once, each in a pod namespace of its own: the guest has two vCPUs, and a plugin call is mostly
 * its process starting and its store round trips (cni.log's sinceStartMs), which overlap instead of queueing.
 */
export const FAULT_GROUP_SIZE = 3;

/** A cooldown longer than the run: no address a failed ADD gave back is claimed again by another of the group. */
const NO_REUSE_MS = 3_600_000;

interface GroupOutcome {
  readonly runs: Map<string, PluginRun>;
  /** What the group's ADDs left on the node, line by line. */
  readonly left: string[];
}

/**
 * L3S with the host veth, an ADD failing right after each step: it must leave nothing — no link, veth, rule, table
 * route, mark or CLAIMED lease. A group's ADDs run at once; each case then owns the leftovers that name its pod
 * namespace or host veth, and a leftover no case owns (a rule or route names only the address) fails the whole group.
 */
export function faultCases(node: () => GuestNode): GuestCase[] {
  const groups = new Map<number, Promise<GroupOutcome>>();
  const groupOf = (index: number): Promise<GroupOutcome> => {
    const g = Math.floor(index / FAULT_GROUP_SIZE);
    const steps = ADD_STEPS.slice(g * FAULT_GROUP_SIZE, (g + 1) * FAULT_GROUP_SIZE);
    let outcome = groups.get(g);
    if (!outcome) {
      outcome = runGroup(node(), steps);
      groups.set(g, outcome);
    }
    return outcome;
  };
  return ADD_STEPS.map((step, index) => ({
    name: `plugin l3s: an ADD failing after ${step} leaves nothing`,
    async run(): Promise<void> {
      const { runs, left } = await groupOf(index);
      const run = runs.get(step)!;
      assert(run.code === 1, `ADD should fail, exited ${run.code}: ${run.stdout}`);
      assert(run.stdout.includes(`injected fault after ${step}`), `not our fault: ${run.stdout}`);
      const owner = (line: string): string | undefined =>
        [...runs.keys()].find((s) => line.includes(podNetns(s)) || line.includes(hostVethName(containerId(s), 'eth0')));
      const mine = left.filter((l) => owner(l) === step);
      assert(mine.length === 0, `left behind:\n${mine.join('\n')}`);
      const unowned = left.filter((l) => owner(l) === undefined);
      assert(unowned.length === 0, `left behind by one of ${[...runs.keys()].join(', ')}:\n${unowned.join('\n')}`);
      assert((await node().claimed()).length === 0, 'a lease is still CLAIMED');
    },
  }));
}

const containerId = (step: string): string => `fault-${step}`;
/** Named after the step, never a prefix of another pod's name (the owner of a leftover is found by it). */
const podNetns = (step: string): string => `fault-${step}-ns`;

async function runGroup(n: GuestNode, steps: readonly string[]): Promise<GroupOutcome> {
  for (const step of steps) n.addNetns(podNetns(step));
  const pods = steps.map(podNetns);
  const before = snapshot(pods);
  const conf = n.netconf('l3s', { reuseWaitMs: NO_REUSE_MS });
  const runs = await Promise.all(
    steps.map((step) =>
      n.run(
        'ADD',
        {
          containerId: containerId(step),
          netns: podNetns(step),
          env: { VPC_LEASE_TEST_MODE: '1', VPC_LEASE_TEST_FAIL_AT: step },
        },
        conf,
      ),
    ),
  );
  return { runs: new Map(steps.map((s, i) => [s, runs[i]!])), left: leftovers(before, snapshot(pods)) };
}
