import type { IamAnswer } from './attack-requests.js';
import { NODE_ITEM_ATTACKS } from './attacks-node-item.js';
import { OTHER_PARTITION_ATTACKS } from './attacks-other-partitions.js';
import { OWN_PARTITION_ATTACKS } from './attacks-own-partition.js';
import type { Battlefield } from './battlefield.js';

/**
 * One attack of a compromised node. Every attack must leave the other nodes untouched (their ADDs succeed, no
 * EC2 mutation names their instance, ENIs, addresses or prefixes, the control plane's runs succeed); `iam` is
 * what the node policy answers each of its requests — refused, or accepted because the request stays inside
 * the attacker's own partition and names only what a node may write.
 */
export interface Attack {
  readonly name: string;
  /** IAM's answer to each request, in order; a single answer stands for every request. */
  readonly iam: IamAnswer | readonly IamAnswer[];
  run(field: Battlefield): Promise<IamAnswer[]>;
  /** What else this attack must leave as it was, checked after the control plane ran. */
  unchanged?(field: Battlefield): Promise<unknown>;
}

export const ATTACKS: readonly Attack[] = [...OTHER_PARTITION_ATTACKS, ...NODE_ITEM_ATTACKS, ...OWN_PARTITION_ATTACKS];
