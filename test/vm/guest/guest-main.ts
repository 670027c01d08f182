/**
 * The frame every in-guest suite runs in (bundled to one file and run with plain node inside the VM): its
 * arguments, the guest node its cases share, the results file and the exit status.
 */
import { copyFileSync, existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { GuestNode } from './guest-node.js';
import { type GuestCase, runGuestCases } from './runner.js';

/**
 * A suite's cases. `start` starts the shared guest node with the plugin at `cni` (default: the suite's binary) and
 * is called by one of the cases; `node` is that node. The host calls it with inert callbacks for the names.
 */
export type GuestCaseList = (
  start: (cni?: string) => Promise<void>,
  node: () => GuestNode,
  binary: string,
) => GuestCase[];

/** Runs the suite's cases in order, keeps the node's plugin log beside the results, and exits 1 if any failed. */
export async function guestMain(list: GuestCaseList): Promise<never> {
  const [resultFile, binary, policyFile] = process.argv.slice(2);
  if (!resultFile || !binary || !policyFile) {
    console.error('usage: guest.mjs <result-file> <path of the plugin binary> <synthesized node policy JSON>');
    process.exit(2);
  }
  let node: GuestNode | undefined;
  const cases = list(
    async (cni = binary) => {
      node = await GuestNode.start(cni, policyFile);
    },
    () => {
      if (!node) throw new Error('the guest node did not start');
      return node;
    },
    binary,
  );
  const failed = await runGuestCases(cases, resultFile);
  // The guest's files vanish with it: the plugin's own account of every call is what explains a failure.
  if (node && existsSync(node.logFile)) copyFileSync(node.logFile, join(dirname(resultFile), 'cni.log'));
  await node?.close();
  process.exit(failed > 0 ? 1 : 0);
}
