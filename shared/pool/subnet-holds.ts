import type { NodeRecord, SubnetRefusal } from '../domain/node.js';
import { METRIC_DIMENSIONS, METRIC_NAMES } from '../metrics.js';
import { mergeRefusals, type SubnetFullCode } from '../planner/subnet-choice.js';
import type { PoolDeps } from './deps.js';
import { editNode } from './node-record.js';
import type { ClosedSubnets } from './topup-plan.js';

/**
 * How long the pool stays away from a subnet EC2 refused for room. Longer than the sweep's minute, so a full
 * subnet costs a node one refused call per hold rather than one per pass; short enough that addresses freed
 * elsewhere in the subnet (or a subnet added by tags) are used again the same hour.
 */
export const DEFAULT_SUBNET_REFUSAL_HOLD_MS = 600_000;

/**
 * A node's subnet refusals as the pool's top-up reads them: those younger than the hold close their subnet —
 * to /28s for `InsufficientCidrBlocks` (fragmented: single addresses may remain), to both kinds for
 * `InsufficientFreeAddressesInSubnet`. A refusal in this pass is recorded on the node item (what
 * `vpc-lease nodes` and later passes read) and counted (`SubnetFull`, the alarm's metric).
 */
export class SubnetHolds {
  private readonly prefixes = new Set<string>();
  private readonly addresses = new Set<string>();

  constructor(
    private readonly deps: PoolDeps,
    private readonly instanceArn: string,
    refusals: readonly SubnetRefusal[] | undefined,
  ) {
    const since = deps.clock.nowMs() - (deps.subnetRefusalHoldMs ?? DEFAULT_SUBNET_REFUSAL_HOLD_MS);
    for (const r of refusals ?? []) if (r.atMs > since) this.close(r.subnetId, r.code);
  }

  get closed(): ClosedSubnets {
    return { prefixes: this.prefixes, addresses: this.addresses };
  }

  /** Subnets closed to any kind of request, sorted. */
  onHold(): string[] {
    return [...new Set([...this.prefixes, ...this.addresses])].sort();
  }

  /**
   * True when no subnet the node item knows (its launch's candidates in the AZ, its ENIs' subnets) is open to
   * what a top-up would ask: the pass then makes no EC2 call at all until a hold runs out.
   */
  closeAllOf(node: NodeRecord): boolean {
    const known = new Set([...node.podSubnetIds, ...node.enis.map((e) => e.subnetId)]);
    const { prefixDelegation, prefixFallbackToAddresses } = this.deps.config;
    const open = (s: string) =>
      prefixDelegation
        ? !this.prefixes.has(s) || (prefixFallbackToAddresses && !this.addresses.has(s))
        : !this.addresses.has(s);
    return known.size > 0 && ![...known].some(open);
  }

  /** EC2 refused `subnetId` for room in this pass: close it to what was asked, record and count the refusal. */
  async refuse(subnetId: string, code: SubnetFullCode, forPrefixes: boolean): Promise<void> {
    const { store, clock, config, logger, metrics } = this.deps;
    // The kind asked is always closed, so a replan can never send the same request to the same subnet again.
    if (!forPrefixes) this.addresses.add(subnetId);
    this.close(subnetId, code);
    metrics?.add(METRIC_NAMES.subnetFull, {
      [METRIC_DIMENSIONS.cluster]: config.clusterName,
      [METRIC_DIMENSIONS.reason]: code,
      [METRIC_DIMENSIONS.subnet]: subnetId,
    });
    logger.warn('subnet out of room for a top-up; planning around it', {
      instanceArn: this.instanceArn,
      subnetId,
      code,
    });
    const refusal: SubnetRefusal = { subnetId, code, atMs: clock.nowMs() };
    await editNode(store, this.instanceArn, clock.nowMs(), (node) =>
      node.phase === 'READY' ? { ...node, subnetRefusals: mergeRefusals(node.subnetRefusals, [refusal]) } : undefined,
    );
  }

  private close(subnetId: string, code: string): void {
    this.prefixes.add(subnetId);
    if (code !== 'InsufficientCidrBlocks') this.addresses.add(subnetId);
  }
}
