/** Entry point of the in-guest IPv6 suite (bundled to one file and run with plain node inside the VM). */
import { GuestNode } from './guest-node.js';
import { ipv6Cases } from './ipv6-cases.js';
import { runGuestCases } from './runner.js';

const [resultFile, cni, policyFile] = process.argv.slice(2);
if (!resultFile || !cni || !policyFile) {
  console.error('usage: guest.mjs <result-file> <path of the built vpc-lease-cni> <synthesized node policy JSON>');
  process.exit(2);
}
let node: GuestNode | undefined;
const cases = ipv6Cases(
  async () => {
    node = await GuestNode.start(cni, policyFile);
  },
  () => {
    if (!node) throw new Error('the guest node did not start');
    return node;
  },
);
const failed = await runGuestCases(cases, resultFile);
await node?.close();
process.exit(failed > 0 ? 1 : 0);
