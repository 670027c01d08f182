/**
 * What each EC2 instance state means for a node's pod ENIs and leases, decided here once. Two questions are
 * asked of a state, and they have different answers:
 *
 * - **Does the instance still hold its ENIs?** (the reconciler may delete a tagged ENI or a stray lease only
 *   when not). Yes in every state before `terminated`: a stopped instance keeps its attached ENIs and their
 *   addresses and gets them back on start, and a shutting-down one keeps them until EC2 reports it
 *   terminated, which is when DeleteOnTermination acts. Deleting earlier would take addresses from a node
 *   that may still run pods (stopping) or run again (stopped).
 * - **May vpc-lease give it more?** (a launch provisions, the pool adds ENIs or addresses). Only while it
 *   is `pending` or `running`: a stopping or stopped instance runs no kubelet to use them, a shutting-down or
 *   terminated one never will, and an attach to it would only leave an ENI for the terminate flow to clean up.
 *
 * A state this table does not know (a future EC2 state) counts as holding its ENIs and taking nothing more:
 * the cautious answer to both questions. An instance EC2 does not know at all (`undefined`) holds nothing.
 */
export const EC2_INSTANCE_STATES = [
  'pending',
  'running',
  'stopping',
  'stopped',
  'shutting-down',
  'terminated',
] as const;
export type Ec2InstanceState = (typeof EC2_INSTANCE_STATES)[number];

interface StateMeaning {
  readonly holdsEnis: boolean;
  readonly provisionable: boolean;
}

export const INSTANCE_STATE_MEANING: Readonly<Record<Ec2InstanceState, StateMeaning>> = {
  pending: { holdsEnis: true, provisionable: true },
  running: { holdsEnis: true, provisionable: true },
  stopping: { holdsEnis: true, provisionable: false },
  stopped: { holdsEnis: true, provisionable: false },
  'shutting-down': { holdsEnis: true, provisionable: false },
  terminated: { holdsEnis: false, provisionable: false },
};

function meaningOf(state: string): StateMeaning {
  return (INSTANCE_STATE_MEANING as Record<string, StateMeaning | undefined>)[state] ?? UNKNOWN_STATE;
}

const UNKNOWN_STATE: StateMeaning = { holdsEnis: true, provisionable: false };

/** The instance still owns its ENIs and the leases on them: nothing of it may be collected. */
export function isInstanceLive(state: string | undefined): boolean {
  return state !== undefined && meaningOf(state).holdsEnis;
}

/** A launch may provision the instance and the pool may add to it. */
export function isInstanceProvisionable(state: string | undefined): boolean {
  return state !== undefined && meaningOf(state).provisionable;
}
