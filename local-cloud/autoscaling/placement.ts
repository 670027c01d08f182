import type { Group, GroupInstance } from './model.js';

/** Instances that count toward the desired capacity: everything not on its way out. */
export function activeInstances(group: Group): GroupInstance[] {
  return [...group.instances.values()].filter(
    (i) => !i.lifecycleState.startsWith('Terminating') && i.lifecycleState !== 'Terminated',
  );
}

/** Default termination policy, simplified: the Availability Zone with the most instances, then the oldest. */
export function pickVictim(active: readonly GroupInstance[]): GroupInstance | undefined {
  const candidates = active.filter((i) => !i.protectedFromScaleIn);
  const perZone = new Map<string, number>();
  for (const i of candidates) perZone.set(i.availabilityZone, (perZone.get(i.availabilityZone) ?? 0) + 1);
  return [...candidates].sort(
    (a, b) =>
      (perZone.get(b.availabilityZone) ?? 0) - (perZone.get(a.availabilityZone) ?? 0) || a.launchedMs - b.launchedMs,
  )[0];
}

/** Spreads launches over the group's subnets: the one with the fewest live instances first. */
export function pickSubnet(group: Group): string {
  const counts = new Map(group.subnetIds.map((s) => [s, 0]));
  for (const i of activeInstances(group)) counts.set(i.subnetId, (counts.get(i.subnetId) ?? 0) + 1);
  return [...group.subnetIds].sort((a, b) => (counts.get(a) ?? 0) - (counts.get(b) ?? 0))[0]!;
}
