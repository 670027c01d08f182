import { claimEgressAddress } from '../../../node/datapath/egress4.js';

/**
 * A plugin process's worth of egress claims, for egress4-index.test.ts's races: `node --import tsx
 * egress-claimer.ts DIR ID,ID,…` claims an address for each container id (ifName eth0) and prints
 * `{"ID": "169.254.…", …}`.
 */
const [dir, ids] = process.argv.slice(2) as [string, string];
const claimed: Record<string, string> = {};
for (const id of ids.split(',')) claimed[id] = claimEgressAddress(dir, id, 'eth0');
process.stdout.write(JSON.stringify(claimed));
