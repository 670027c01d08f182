import type { InstanceLimits } from '../domain/limits.js';
import type { EniRecord, NodeRecord, SubnetRefusal } from '../domain/node.js';
import type { Ec2Instance } from '../ec2/port.js';
import { eniClientToken } from '../ec2/tags.js';
import { METRIC_DIMENSIONS, METRIC_NAMES } from '../metrics.js';
import {
  chooseSubnet,
  mergeRefusals,
  type RefusedSubnet,
  type SubnetFullCode,
  subnetsExhaustedReason,
} from '../planner/subnet-choice.js';
import type { PodEniDeps } from './pod-eni-outcome.js';
import { candidateSubnets } from './subnets.js';

/**
 * The pod-ENI steps' answer to a create refused for room (planner/subnet-choice.ts decides, this gathers its
 * inputs and reports): the ENI moves to the next candidate subnet of the AZ, or in prefix mode to single
 * addresses when configured; each refusal is counted (`SubnetFull`) and recorded on the node item.
 */
export class SubnetFallback {
  private readonly refused: RefusedSubnet[] = [];
  private readonly refusals: SubnetRefusal[] = [];

  constructor(
    private readonly deps: PodEniDeps,
    private readonly instanceId: string,
    private readonly instance: () => Promise<Ec2Instance>,
  ) {}

  refusedAny(): boolean {
    return this.refused.length > 0;
  }

  /** The ENI's record moved to another subnet (new ClientToken: other parameters), or undefined to drop it. */
  async replan(e: EniRecord, code: SubnetFullCode, known?: InstanceLimits): Promise<EniRecord | undefined> {
    const { config, clock, logger, metrics } = this.deps;
    const forPrefixes = (e.plannedPrefixCount ?? 0) > 0;
    this.refused.push({ subnetId: e.subnetId, code, forPrefixes });
    this.refusals.push({ subnetId: e.subnetId, code, atMs: clock.nowMs() });
    metrics?.add(METRIC_NAMES.subnetFull, {
      [METRIC_DIMENSIONS.cluster]: config.clusterName,
      [METRIC_DIMENSIONS.reason]: code,
      [METRIC_DIMENSIONS.subnet]: e.subnetId,
    });
    const instance = await this.instance();
    const limits = known ?? (await this.deps.ec2.describeInstanceLimits(instance.instanceType));
    const choice = chooseSubnet({
      wanted: { ipCount: e.plannedIpCount ?? 0, prefixCount: e.plannedPrefixCount ?? 0 },
      candidates: await candidateSubnets(this.deps.ec2, config, instance),
      availabilityZone: instance.availabilityZone,
      refused: this.refused,
      prefixFallbackToAddresses: config.prefixFallbackToAddresses,
      addressSlotsPerEni: limits.ipv4PerEni - 1,
    });
    const context = { instanceId: this.instanceId, deviceIndex: e.deviceIndex, from: e.subnetId, code };
    if (!choice) {
      logger.warn('subnet out of room and no other candidate subnet has any; ENI dropped', context);
      return undefined;
    }
    logger.warn(
      choice.fallback ? 'no /28 to be had; ENI asks for single addresses' : 'subnet out of addresses; ENI moved',
      {
        ...context,
        to: choice.subnetId,
        ipCount: choice.ipCount,
        prefixCount: choice.prefixCount,
      },
    );
    const request = { subnetId: choice.subnetId, ipCount: choice.ipCount, prefixCount: choice.prefixCount };
    return {
      ...e,
      subnetId: choice.subnetId,
      subnetCidr: choice.cidr,
      plannedIpCount: choice.ipCount,
      plannedPrefixCount: choice.prefixCount,
      clientToken: eniClientToken(this.instanceId, e.deviceIndex, request, e.plannedAtMs),
    };
  }

  /** `node` with this pass's refusals merged into those it records. */
  noted(node: NodeRecord): NodeRecord {
    if (this.refusals.length === 0) return node;
    return { ...node, subnetRefusals: mergeRefusals(node.subnetRefusals, this.refusals) };
  }

  exhaustedReason(possibleLeases: number, minLeases: number): string {
    return subnetsExhaustedReason(this.refused, possibleLeases, minLeases);
  }
}
