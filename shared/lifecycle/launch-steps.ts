import { ADDRESSES_PER_PREFIX } from '../domain/limits.js';
import type { NodeRecord } from '../domain/node.js';
import { Ec2ApiError, isEc2Error } from '../ec2/errors.js';
import type { Ec2Instance } from '../ec2/port.js';
import { eniClientToken, podEniTags } from '../ec2/tags.js';
import { errorMessage, VersionConflictError } from '../errors.js';
import { rankSubnets } from '../planner/subnets.js';
import { abandonLaunch } from './abandon.js';
import { done, type LifecycleDeps, type StepOutcome, wait } from './deps.js';
import type { LaunchEvent } from './events.js';
import { asPodEni, expectedLeases, type PodEniRecord } from './pod-eni.js';
import { candidateSubnets, podSecurityGroups } from './subnets.js';

/** EC2 refused the create for lack of room in the subnet: the ENI may go to another candidate subnet. */
const SUBNET_FULL = new Set(['InsufficientFreeAddressesInSubnet', 'InsufficientCidrBlocks']);

interface Failure {
  readonly eni: PodEniRecord;
  readonly err: unknown;
}

/**
 * Runs the ENI steps of a PROVISIONING node, each step over all its ENIs at once (parallel EC2 calls through
 * the adapter's concurrency cap) followed by ONE conditional node write — fewer writes, and the write is what
 * serializes two invocations racing on the same node (the loser gets VersionConflictError and re-enqueues).
 */
export async function advanceEnis(
  deps: LifecycleDeps,
  event: LaunchEvent,
  start: NodeRecord,
  instance: Ec2Instance | undefined,
): Promise<StepOutcome> {
  const run = new LaunchSteps(deps, event, instance);
  return run.advance(start);
}

class LaunchSteps {
  private readonly excludedSubnets = new Set<string>();
  private subnetCidrs: Map<string, string> | undefined;

  private readonly instanceId: string;
  private described: Promise<Ec2Instance> | undefined;

  /** `known`: the instance as this invocation already described it; otherwise read on first need only. */
  constructor(
    private readonly deps: LifecycleDeps,
    private readonly event: LaunchEvent,
    known: Ec2Instance | undefined,
  ) {
    this.instanceId = event.instanceId;
    if (known) this.described = Promise.resolve(known);
  }

  private instance(): Promise<Ec2Instance> {
    this.described ??= this.deps.ec2.describeInstance(this.instanceId).then((found) => {
      if (!found)
        throw new Ec2ApiError(
          'DescribeInstances',
          'InvalidInstanceID.NotFound',
          'not-found-yet',
          `failed to describe instance ${this.instanceId}: not visible`,
        );
      return found;
    });
    return this.described;
  }

  async advance(start: NodeRecord): Promise<StepOutcome> {
    let node = start;
    // Each pass makes progress or returns; replanning a full subnet excludes it, which bounds the passes.
    for (let pass = 0; pass < 32; pass += 1) {
      const enis = node.enis.map(asPodEni);
      const step = (name: string) => enis.filter((e) => e.step === name);

      if (step('PLANNED').length > 0) {
        const result = await this.createStep(node, step('PLANNED'));
        if ('kind' in result) return result;
        node = result;
        continue;
      }
      if (step('CREATED').length > 0) {
        const result = await this.stepOver(node, step('CREATED'), (e) => this.attach(e));
        if ('kind' in result) return result;
        node = result;
      }
      const needDot = node.enis
        .map(asPodEni)
        .filter((e) => (e.step === 'ATTACHING' || e.step === 'ATTACHED') && e.deleteOnTermination !== true);
      if (needDot.length > 0) {
        const result = await this.stepOver(node, needDot, (e) => this.deleteOnTermination(e));
        if ('kind' in result) return result;
        node = result;
      }
      const attaching = node.enis.map(asPodEni).filter((e) => e.step === 'ATTACHING');
      if (attaching.length > 0) {
        const result = await this.verifyAttachments(node, attaching);
        if ('kind' in result) return result;
        node = result;
        if (node.enis.some((e) => e.step === 'CREATED')) continue;
        if (node.enis.some((e) => e.step === 'ATTACHING')) return wait('attachments in progress', 'attaching');
      }
      if (node.enis.some((e) => e.step === 'ATTACHED')) {
        const result = await this.leaseStep(node);
        if ('kind' in result) return result;
        node = result;
      }
      return this.complete(node);
    }
    return wait('launch made no progress in this invocation');
  }

  private async save(node: NodeRecord, enis: readonly PodEniRecord[]): Promise<NodeRecord> {
    return this.deps.store.updateNode({ ...node, enis, updatedAtMs: this.deps.clock.nowMs() }, node.version);
  }

  /** Applies `act` to every ENI in parallel, records what succeeded in one write, then judges the failures. */
  private async stepOver(
    node: NodeRecord,
    targets: readonly PodEniRecord[],
    act: (eni: PodEniRecord) => Promise<PodEniRecord>,
  ): Promise<NodeRecord | StepOutcome> {
    const results = await Promise.allSettled(targets.map(act));
    const updated = new Map<number, PodEniRecord>();
    const failures: Failure[] = [];
    results.forEach((r, i) => {
      const eni = targets[i]!;
      if (r.status === 'fulfilled') updated.set(eni.deviceIndex, r.value);
      else failures.push({ eni, err: r.reason });
    });
    const saved =
      updated.size > 0
        ? await this.save(
            node,
            node.enis.map((e) => updated.get(e.deviceIndex) ?? asPodEni(e)),
          )
        : node;
    return failures.length > 0 ? this.judge(saved, failures) : saved;
  }

  /** Unrecoverable EC2 answers abandon; throttling and eventual consistency wait; anything else fails the record. */
  private async judge(node: NodeRecord, failures: readonly Failure[]): Promise<StepOutcome> {
    const ec2Errors = failures.map((f) => f.err).filter((e): e is Ec2ApiError => isEc2Error(e));
    const unrecoverable = ec2Errors.find((e) => !e.retryable);
    if (unrecoverable)
      return abandonLaunch(
        this.deps,
        this.event,
        node,
        `${unrecoverable.kind === 'limit' ? 'limits' : 'fatal'}: ${unrecoverable.action} ${unrecoverable.code}: ${errorMessage(unrecoverable.cause ?? unrecoverable)}`,
      );
    const other = failures.find((f) => !isEc2Error(f.err));
    if (other) throw other.err;
    const first = ec2Errors[0]!;
    return wait(`EC2 ${first.action}: ${first.code} (${failures.length} ENI(s))`);
  }

  private async createStep(node: NodeRecord, planned: readonly PodEniRecord[]): Promise<NodeRecord | StepOutcome> {
    const results = await Promise.allSettled(planned.map((e) => this.create(node, e)));
    const replaced = new Map<number, PodEniRecord | undefined>();
    const failures: Failure[] = [];
    for (const [i, r] of results.entries()) {
      const eni = planned[i]!;
      if (r.status === 'fulfilled') replaced.set(eni.deviceIndex, r.value);
      else if (isEc2Error(r.reason) && SUBNET_FULL.has(r.reason.code))
        replaced.set(eni.deviceIndex, await this.replan(eni));
      else failures.push({ eni, err: r.reason });
    }
    const enis = node.enis
      .map(asPodEni)
      .flatMap((e) => (replaced.has(e.deviceIndex) ? (replaced.get(e.deviceIndex) ?? []) : [e]));
    const saved = replaced.size > 0 ? await this.save(node, enis) : node;
    if (failures.length > 0) return this.judge(saved, failures);
    const plannedLeases = Math.min(
      this.deps.config.maxPods,
      enis.reduce((sum, e) => sum + e.plannedIpCount + e.plannedPrefixCount * ADDRESSES_PER_PREFIX, 0),
    );
    if (plannedLeases < this.deps.config.minLeases)
      return abandonLaunch(
        this.deps,
        this.event,
        saved,
        `subnets-exhausted: every candidate subnet (${[...this.excludedSubnets].join(', ')}) is out of addresses; ${plannedLeases} of minLeases ${this.deps.config.minLeases} possible`,
      );
    return saved;
  }

  private async create(node: NodeRecord, e: PodEniRecord): Promise<PodEniRecord> {
    const { config } = this.deps;
    const eni = await this.deps.ec2.createNetworkInterface({
      subnetId: e.subnetId,
      securityGroupIds: podSecurityGroups(config, await this.instance()),
      ipCount: e.plannedIpCount,
      prefixCount: e.plannedPrefixCount,
      // createdAt comes from the node item, not the clock: a retried create must send identical parameters.
      tags: podEniTags(config.clusterName, this.instanceId, e.deviceIndex, node.createdAtMs),
      clientToken: e.clientToken,
      description: `vpc-lease pod ENI of ${this.instanceId}`,
    });
    const subnetCidr = e.subnetCidr ?? (await this.subnetCidr(eni.subnetId));
    return {
      ...e,
      step: 'CREATED',
      eniId: eni.eniId,
      mac: eni.mac,
      subnetCidr,
      addresses: [...eni.secondaryIps],
      prefixes: [...eni.prefixes],
    };
  }

  /** Moves an ENI refused for lack of room to the candidate subnet with the most room left, or drops it. */
  private async replan(e: PodEniRecord): Promise<PodEniRecord | undefined> {
    this.excludedSubnets.add(e.subnetId);
    const instance = await this.instance();
    const subnets = rankSubnets(
      await candidateSubnets(this.deps.ec2, this.deps.config, instance),
      instance.availabilityZone,
    ).filter((s) => !this.excludedSubnets.has(s.subnetId));
    for (const s of subnets) this.subnetCidrs?.set(s.subnetId, s.cidr);
    const best = subnets[0];
    if (!best) return undefined;
    const room = best.availableIpCount - 1;
    const request =
      e.plannedPrefixCount > 0
        ? { ipCount: 0, prefixCount: Math.min(e.plannedPrefixCount, Math.floor(room / ADDRESSES_PER_PREFIX)) }
        : { ipCount: Math.min(e.plannedIpCount, room), prefixCount: 0 };
    if (request.ipCount + request.prefixCount <= 0) {
      // Even the roomiest candidate cannot hold this ENI: try the next one on the next pass.
      this.excludedSubnets.add(best.subnetId);
      return this.replan(e);
    }
    this.deps.logger.warn('subnet out of addresses; ENI moved', {
      instanceId: this.instanceId,
      deviceIndex: e.deviceIndex,
      from: e.subnetId,
      to: best.subnetId,
    });
    return {
      ...e,
      subnetId: best.subnetId,
      subnetCidr: best.cidr,
      plannedIpCount: request.ipCount,
      plannedPrefixCount: request.prefixCount,
      clientToken: eniClientToken(this.instanceId, e.deviceIndex, { subnetId: best.subnetId, ...request }),
    };
  }

  private async subnetCidr(subnetId: string): Promise<string> {
    if (!this.subnetCidrs?.has(subnetId)) {
      this.subnetCidrs ??= new Map();
      for (const s of await this.deps.ec2.describeSubnets({ subnetIds: [subnetId] }))
        this.subnetCidrs.set(s.subnetId, s.cidr);
    }
    const cidr = this.subnetCidrs.get(subnetId);
    if (!cidr)
      throw new Ec2ApiError(
        'DescribeSubnets',
        'InvalidSubnetID.NotFound',
        'not-found-yet',
        `failed to read subnet ${subnetId} of a new ENI: not visible yet`,
      );
    return cidr;
  }

  private async attach(e: PodEniRecord): Promise<PodEniRecord> {
    const eniId = e.eniId!;
    try {
      const attachmentId = await this.deps.ec2.attachNetworkInterface({
        eniId,
        instanceId: this.instanceId,
        deviceIndex: e.deviceIndex,
        networkCardIndex: e.networkCardIndex,
      });
      return { ...e, step: 'ATTACHING', attachmentId };
    } catch (err) {
      if (isEc2Error(err, 'throttling', 'unavailable')) throw err;
      // An attach that succeeded before a crash answers "in use" now: read the attachment back instead.
      const [current] = await this.deps.ec2.describeNetworkInterfaces({ eniIds: [eniId] });
      const att = current?.attachment;
      if (att && att.instanceId === this.instanceId && att.deviceIndex === e.deviceIndex)
        return {
          ...e,
          step: att.status === 'attached' ? 'ATTACHED' : 'ATTACHING',
          attachmentId: att.attachmentId,
          ...(att.deleteOnTermination ? { deleteOnTermination: true } : {}),
        };
      throw err;
    }
  }

  private async deleteOnTermination(e: PodEniRecord): Promise<PodEniRecord> {
    await this.deps.ec2.setDeleteOnTermination(e.eniId!, e.attachmentId!, true);
    return { ...e, deleteOnTermination: true };
  }

  /** One Describe for all ENIs still attaching; never waits inside the invocation. */
  private async verifyAttachments(
    node: NodeRecord,
    attaching: readonly PodEniRecord[],
  ): Promise<NodeRecord | StepOutcome> {
    const seen = await this.deps.ec2.describeNetworkInterfaces({ eniIds: attaching.map((e) => e.eniId!) });
    const byId = new Map(seen.map((s) => [s.eniId, s]));
    const updated = new Map<number, PodEniRecord>();
    for (const e of attaching) {
      const att = byId.get(e.eniId!)?.attachment;
      if (att?.instanceId === this.instanceId && att.status === 'attached')
        updated.set(e.deviceIndex, { ...e, step: 'ATTACHED' });
      else if (!att || att.status === 'detached' || att.status === 'detaching')
        // Detached behind our back (an operator, a failed attach): attach again.
        updated.set(e.deviceIndex, { ...e, step: 'CREATED', deleteOnTermination: false });
    }
    if (updated.size === 0) return node;
    return this.save(
      node,
      node.enis.map((e) => updated.get(e.deviceIndex) ?? asPodEni(e)),
    );
  }

  private async leaseStep(node: NodeRecord): Promise<NodeRecord | StepOutcome> {
    const attachedIdx = new Set(node.enis.filter((e) => e.step === 'ATTACHED').map((e) => e.deviceIndex));
    const leases = expectedLeases(node, this.deps.config.maxPods).filter((l) => attachedIdx.has(l.deviceIndex));
    const nowMs = this.deps.clock.nowMs();
    await this.deps.store.putLeases(leases, nowMs);
    try {
      return await this.save(
        node,
        node.enis.map((e) => (attachedIdx.has(e.deviceIndex) ? { ...asPodEni(e), step: 'LEASED' } : asPodEni(e))),
      );
    } catch (err) {
      if (err instanceof VersionConflictError)
        await this.dropLeasesIfTerminating(
          node,
          leases.map((l) => l.ip),
        );
      throw err;
    }
  }

  /**
   * A terminate that ran between our lease put and our node write has already removed the partition: the
   * leases just written would outlive the node, so take them out through the release handshake.
   */
  private async dropLeasesIfTerminating(node: NodeRecord, ips: readonly string[]): Promise<void> {
    const current = await this.deps.store.getNode(node.instanceArn);
    if (current && (current.phase === 'PROVISIONING' || current.phase === 'READY')) return;
    const nowMs = this.deps.clock.nowMs();
    for (const ip of ips) {
      try {
        await this.deps.store.markReleasing(node.instanceArn, ip, nowMs);
        await this.deps.store.deleteReleasing(node.instanceArn, ip);
      } catch {
        // Claimed or already gone: the terminate path or the reconciler owns it now.
      }
    }
  }

  private async complete(node: NodeRecord): Promise<StepOutcome> {
    const pending = node.enis.filter((e) => e.step !== 'LEASED');
    if (pending.length > 0) return wait(`ENIs not leased yet: ${pending.map((e) => e.deviceIndex).join(', ')}`);
    const ready = await this.deps.store.updateNode(
      { ...node, phase: 'READY', updatedAtMs: this.deps.clock.nowMs() },
      node.version,
    );
    this.deps.metrics?.add('LaunchCompleted', {});
    const outcome = await this.deps.autoScaling.completeLifecycleAction(this.event.lifecycle, 'CONTINUE');
    const leases = expectedLeases(ready, this.deps.config.maxPods).length;
    return done(`node READY with ${ready.enis.length} pod ENI(s) and ${leases} lease(s); lifecycle ${outcome}`);
  }
}
