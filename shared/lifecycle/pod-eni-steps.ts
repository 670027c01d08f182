import { ADDRESSES_PER_PREFIX } from '../domain/limits.js';
import type { EniRecord, EniStep, NodePhase, NodeRecord } from '../domain/node.js';
import { Ec2ApiError, isEc2Error } from '../ec2/errors.js';
import type { Ec2Instance, Ec2Subnet } from '../ec2/port.js';
import { LIFECYCLE_OWNER, podEniTags } from '../ec2/tags.js';
import { errorMessage, VersionConflictError } from '../errors.js';
import { leaseCapFor } from '../planner/max-pods.js';
import { isSubnetFullCode } from '../planner/subnet-choice.js';
import { sleepMs } from '../sleep.js';
import { ForeignEniError, occupiedIndexReason } from './foreign-enis.js';
import { expectedLeases } from './pod-eni.js';
import {
  type EniWriter,
  type PodEniDeps,
  type PodEniOutcome,
  type PodEniProgress,
  type PodEniStepOptions,
  type StepFailure,
  strictWriter,
} from './pod-eni-outcome.js';
import { SubnetFallback } from './subnet-fallback.js';
import { podSecurityGroups } from './subnets.js';
import { withdrawLeasesIfNodeLeft } from './withdraw-leases.js';

/** Phases in which a node's leases may exist; anything else means a terminate got there first. */
const LEASING_PHASES: ReadonlySet<NodePhase> = new Set(['PROVISIONING', 'READY']);

/**
 * Passes of the ENI steps one invocation makes at most: a launch needs five (create, attach,
 * DeleteOnTermination, verify, lease), plus a few per subnet replan or re-attach; past this something keeps
 * undoing the work, and the caller waits instead of spinning.
 */
const MAX_PASSES = 32;

/**
 * One ENI step's result: its progress `saved` on the node item (the next pass looks at it), or an outcome that
 * ends this call (wait, refused, gone).
 */
type EniStepResult = { readonly kind: 'saved'; readonly node: NodeRecord } | PodEniOutcome;

interface EniStepEntry {
  /** The ENIs this step works on now; none: the step has nothing to do. */
  readonly at: (node: NodeRecord) => EniRecord[];
  readonly run: (node: NodeRecord, enis: readonly EniRecord[]) => Promise<EniStepResult>;
}

function enisAt(node: NodeRecord, ...steps: EniStep[]): EniRecord[] {
  return node.enis.filter((e) => steps.includes(e.step));
}

/** Attachments take seconds in EC2; polling faster only spends DescribeNetworkInterfaces tokens. */
export const ATTACH_POLL_MS = 250;

/**
 * Takes a node's in-progress pod ENIs on, whatever the node's phase (PROVISIONING for a launch, READY for the
 * pool): PLANNED → create (ClientToken) → CREATED → attach → ATTACHING → DeleteOnTermination → attached →
 * ATTACHED → leases → LEASED. Never completes or abandons anything: the caller decides what an outcome means.
 *
 * Each step runs over all ENIs at once (parallel EC2 calls through the adapter's concurrency cap) followed by
 * ONE node write — fewer writes, and the write is what serializes two invocations racing on the same node.
 * Every step's result is written before the next EC2 call, so a crash resumes from the recorded step and a
 * step that ran but was not recorded is repeated harmlessly (ClientToken for creates, attachment read-back
 * for attaches, idempotent modifies and lease puts).
 */
export async function advancePodEnis(
  deps: PodEniDeps,
  node: NodeRecord,
  instance: Ec2Instance | undefined,
  options: PodEniStepOptions = {},
): Promise<PodEniOutcome> {
  return new PodEniSteps(deps, node.instanceId, instance, options).advance(node);
}

/**
 * The creates and attaches the steps still have to make, by action (the rate budget's keys). Not the
 * DeleteOnTermination modify: it follows the attach, so a ticket reserved for it now would always be late.
 */
export function podEniCallsAhead(enis: readonly EniRecord[]): Record<string, number> {
  const count = (steps: readonly EniStep[]) => enis.filter((e) => steps.includes(e.step)).length;
  return { CreateNetworkInterface: count(['PLANNED']), AttachNetworkInterface: count(['PLANNED', 'CREATED']) };
}

class PodEniSteps {
  private readonly fallback: SubnetFallback;
  private subnets: Map<string, Ec2Subnet> | undefined;
  private described: Promise<Ec2Instance> | undefined;
  private readonly write: EniWriter;
  private readonly leased: string[] = [];
  private readonly dropped: EniRecord[] = [];
  /** Attachments given DeleteOnTermination by this call. */
  private readonly protectedAttachments = new Set<string>();

  /** `known`: the instance as the caller already described it; otherwise read on first need only. */
  constructor(
    private readonly deps: PodEniDeps,
    private readonly instanceId: string,
    known: Ec2Instance | undefined,
    private readonly options: PodEniStepOptions,
  ) {
    if (known) this.described = Promise.resolve(known);
    this.write = options.write ?? strictWriter(deps);
    this.fallback = new SubnetFallback(deps, instanceId, () => this.instance());
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

  private progress(): PodEniProgress {
    return { leased: [...this.leased], dropped: [...this.dropped] };
  }

  private wait(node: NodeRecord, reason: string, delay: 'attaching' | 'backoff', failures: StepFailure[] = []) {
    return { kind: 'wait', node, reason, delay, failures, ...this.progress() } as const;
  }

  /**
   * The ENI steps in order, each applying to the ENIs its `at` selects: each pass runs the first step that has
   * ENIs to work on, and the next pass looks again at what it wrote. With none left, every ENI is LEASED.
   */
  private readonly steps: readonly EniStepEntry[] = [
    { at: (n) => enisAt(n, 'PLANNED'), run: (n, planned) => this.createStep(n, planned) },
    { at: (n) => enisAt(n, 'CREATED'), run: (n, created) => this.stepOver(n, created, (e) => this.attach(e)) },
    {
      // Also by what this call did: a writer may keep the stored record when only the flag changed (the pool's
      // writer drops a same-step write as stale), and the flag is set once per attachment.
      at: (n) =>
        enisAt(n, 'ATTACHING', 'ATTACHED').filter(
          (e) => e.deleteOnTermination !== true && !this.protectedAttachments.has(e.attachmentId ?? ''),
        ),
      run: (n, attached) => this.stepOver(n, attached, (e) => this.deleteOnTermination(e)),
    },
    { at: (n) => enisAt(n, 'ATTACHING'), run: (n) => this.verifyAttachments(n) },
    { at: (n) => enisAt(n, 'ATTACHED'), run: (n) => this.leaseStep(n) },
  ];

  async advance(start: NodeRecord): Promise<PodEniOutcome> {
    let node = start;
    // Every pass writes progress or returns; replanning a full subnet excludes it, which bounds the passes.
    for (let pass = 0; pass < MAX_PASSES; pass += 1) {
      const next = this.steps.map((s) => ({ s, enis: s.at(node) })).find(({ enis }) => enis.length > 0);
      if (!next) return { kind: 'done', node, ...this.progress() };
      const result = await next.s.run(node, next.enis);
      if (result.kind !== 'saved') return result;
      node = result.node;
    }
    return this.wait(node, 'pod ENIs made no progress in this invocation', 'backoff');
  }

  /** The writer's answer as a step result: undefined means the node item is gone or left its phase. */
  private saved(node: NodeRecord | undefined): EniStepResult {
    return node ? { kind: 'saved', node } : { kind: 'gone', ...this.progress() };
  }

  /** Applies `act` to every ENI in parallel, records what succeeded in one write, then judges the failures. */
  private async stepOver(
    node: NodeRecord,
    targets: readonly EniRecord[],
    act: (eni: EniRecord) => Promise<EniRecord>,
  ): Promise<EniStepResult> {
    const results = await Promise.allSettled(targets.map(act));
    const updated = new Map<number, EniRecord>();
    const failures: StepFailure[] = [];
    results.forEach((r, i) => {
      const eni = targets[i]!;
      if (r.status === 'fulfilled') updated.set(eni.deviceIndex, r.value);
      else failures.push({ eni, err: r.reason });
    });
    const saved = updated.size > 0 ? await this.write(node, updated) : node;
    if (!saved || failures.length === 0) return this.saved(saved);
    return this.judge(saved, failures);
  }

  /** Unrecoverable EC2 answers refuse; throttling and eventual consistency wait; anything else is thrown. */
  private judge(node: NodeRecord, failures: StepFailure[]): PodEniOutcome {
    const foreign = failures.map((f) => f.err).find((e) => e instanceof ForeignEniError);
    if (foreign) return { kind: 'refused', node, reason: foreign.reason, failures, ...this.progress() };
    const ec2Errors = failures.map((f) => f.err).filter((e): e is Ec2ApiError => isEc2Error(e));
    const unrecoverable = ec2Errors.find((e) => !e.retryable);
    if (unrecoverable)
      return {
        kind: 'refused',
        node,
        reason: `${unrecoverable.kind === 'limit' ? 'limits' : 'fatal'}: ${unrecoverable.action} ${unrecoverable.code}: ${errorMessage(unrecoverable.cause ?? unrecoverable)}`,
        failures,
        ...this.progress(),
      };
    const other = failures.find((f) => !isEc2Error(f.err));
    if (other) throw other.err;
    const first = ec2Errors[0]!;
    return this.wait(node, `EC2 ${first.action}: ${first.code} (${failures.length} ENI(s))`, 'backoff', failures);
  }

  private async createStep(node: NodeRecord, planned: readonly EniRecord[]): Promise<EniStepResult> {
    const results = await Promise.allSettled(planned.map((e) => this.create(node, e)));
    const replaced = new Map<number, EniRecord | undefined>();
    const failures: StepFailure[] = [];
    for (const [i, r] of results.entries()) {
      const eni = planned[i]!;
      if (r.status === 'fulfilled') replaced.set(eni.deviceIndex, r.value);
      else if (isEc2Error(r.reason) && isSubnetFullCode(r.reason.code)) {
        const moved = await this.fallback.replan(eni, r.reason.code, node.limits);
        if (!moved) this.dropped.push(eni);
        replaced.set(eni.deviceIndex, moved);
      } else failures.push({ eni, err: r.reason });
    }
    // The refusals ride on the same write: the node item says which subnet was full and why.
    const saved = replaced.size > 0 ? await this.write(this.fallback.noted(node), replaced) : node;
    if (!saved) return this.saved(saved);
    if (failures.length > 0) return this.judge(saved, failures);
    const { minLeases } = this.options;
    if (minLeases === undefined || !this.fallback.refusedAny()) return this.saved(saved);
    const possible = Math.min(
      leaseCapFor(saved.maxPods, this.deps.config.maxPods),
      saved.enis.reduce(
        (sum, e) => sum + (e.plannedIpCount ?? 0) + (e.plannedPrefixCount ?? 0) * ADDRESSES_PER_PREFIX,
        0,
      ),
    );
    if (possible >= minLeases) return this.saved(saved);
    return {
      kind: 'refused',
      node: saved,
      reason: this.fallback.exhaustedReason(possible, minLeases),
      failures: [],
      ...this.progress(),
    };
  }

  private async create(node: NodeRecord, e: EniRecord): Promise<EniRecord> {
    const { config } = this.deps;
    const ipv6PrefixCount = e.plannedIpv6PrefixCount ?? 0;
    const eni = await this.deps.ec2.createNetworkInterface({
      subnetId: e.subnetId,
      securityGroupIds: podSecurityGroups(config, await this.instance()),
      ipCount: e.plannedIpCount ?? 0,
      prefixCount: e.plannedPrefixCount ?? 0,
      // The /80 rides on the create like the IPv4 addresses: no extra mutating call, and the ClientToken covers it.
      ...(ipv6PrefixCount > 0 ? { ipv6PrefixCount } : {}),
      // createdAt comes from the records, not the clock: a retried create must send identical parameters.
      tags: podEniTags(
        config.clusterName,
        this.instanceId,
        e.deviceIndex,
        e.plannedAtMs ?? node.createdAtMs,
        this.options.owner ?? LIFECYCLE_OWNER,
      ),
      clientToken: e.clientToken,
      description: `vpc-lease pod ENI of ${this.instanceId}`,
    });
    const known = e.subnetCidr && (ipv6PrefixCount === 0 || e.ipv6SubnetCidr);
    const subnet = known ? undefined : await this.subnet(eni.subnetId);
    const ipv6SubnetCidr = e.ipv6SubnetCidr ?? subnet?.ipv6Cidr;
    if (ipv6PrefixCount > 0 && !ipv6SubnetCidr)
      throw new Ec2ApiError(
        'DescribeSubnets',
        'InvalidSubnetID.NotFound',
        'not-found-yet',
        `failed to read the IPv6 CIDR of subnet ${eni.subnetId}: not visible yet`,
      );
    return {
      ...e,
      step: 'CREATED',
      eniId: eni.eniId,
      mac: eni.mac,
      subnetCidr: e.subnetCidr ?? subnet!.cidr,
      addresses: [...eni.secondaryIps],
      prefixes: [...eni.prefixes],
      ...(ipv6PrefixCount > 0 ? { ipv6Prefixes: [...(eni.ipv6Prefixes ?? [])], ipv6SubnetCidr } : {}),
    };
  }

  private async subnet(subnetId: string): Promise<Ec2Subnet> {
    if (!this.subnets?.has(subnetId)) {
      this.subnets ??= new Map();
      for (const s of await this.deps.ec2.describeSubnets({ subnetIds: [subnetId] })) this.subnets.set(s.subnetId, s);
    }
    const subnet = this.subnets.get(subnetId);
    if (!subnet)
      throw new Ec2ApiError(
        'DescribeSubnets',
        'InvalidSubnetID.NotFound',
        'not-found-yet',
        `failed to read subnet ${subnetId} of a new ENI: not visible yet`,
      );
    return subnet;
  }

  private async attach(e: EniRecord): Promise<EniRecord> {
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
      // An attach that succeeded before a crash (or in a racing invocation) answers "in use" now: read the
      // attachment back instead.
      const [current] = await this.deps.ec2.describeNetworkInterfaces({ eniIds: [eniId] });
      const att = current?.attachment;
      if (att && att.instanceId === this.instanceId && att.deviceIndex === e.deviceIndex)
        return {
          ...e,
          step: att.status === 'attached' ? 'ATTACHED' : 'ATTACHING',
          attachmentId: att.attachmentId,
          ...(att.deleteOnTermination ? { deleteOnTermination: true } : {}),
        };
      // Someone else's ENI took the planned index after the plan (aws-node attaches as soon as it runs).
      const occupant = (await this.deps.ec2.describeNetworkInterfaces({ attachedTo: this.instanceId })).find(
        (o) => o.eniId !== eniId && o.attachment?.deviceIndex === e.deviceIndex,
      );
      if (occupant)
        throw new ForeignEniError(occupiedIndexReason(this.instanceId, e.deviceIndex, occupant), { cause: err });
      throw err;
    }
  }

  private async deleteOnTermination(e: EniRecord): Promise<EniRecord> {
    await this.deps.ec2.setDeleteOnTermination(e.eniId!, e.attachmentId!, true);
    this.protectedAttachments.add(e.attachmentId!);
    return { ...e, deleteOnTermination: true };
  }

  /**
   * One Describe for all ENIs still attaching, repeated up to `attachPolls` times while any still is (the
   * launch looks once and re-enqueues; the pool waits a few seconds inline, since pods wait on it). ENIs found
   * detached go back to CREATED and are attached again; ENIs still attaching after the last look: wait.
   */
  private async verifyAttachments(start: NodeRecord): Promise<EniStepResult> {
    const node = await this.pollAttachments(start);
    if (!node) return this.saved(node);
    if (enisAt(node, 'ATTACHING').length > 0 && enisAt(node, 'CREATED').length === 0)
      return this.wait(node, 'attachments in progress', 'attaching');
    return this.saved(node);
  }

  private async pollAttachments(start: NodeRecord): Promise<NodeRecord | undefined> {
    const polls = Math.max(1, this.options.attachPolls ?? 1);
    let node = start;
    for (let poll = 1; ; poll += 1) {
      const attaching = node.enis.filter((e) => e.step === 'ATTACHING');
      // A concurrent pass may have moved them on meanwhile (and an empty id list would describe every ENI).
      if (attaching.length === 0) return node;
      if (poll === 1 && this.options.sleepBeforeFirstLook) await (this.options.sleep ?? sleepMs)(ATTACH_POLL_MS);
      // By the id filter, not an id list: a list cannot be paginated, so at a scale-out's rate every look would
      // draw on EC2's small unpaginated DescribeNetworkInterfaces bucket (50 tokens at 10/s) that no account
      // raise of Attach touches.
      const seen = await this.deps.ec2.describeNetworkInterfaces({ filterEniIds: attaching.map((e) => e.eniId!) });
      const byId = new Map(seen.map((s) => [s.eniId, s]));
      const updated = new Map<number, EniRecord>();
      for (const e of attaching) {
        const eni = byId.get(e.eniId!);
        // Not shown yet (eventual consistency): look again, as an id list's NotFound would have made us.
        if (!eni) continue;
        const att = eni.attachment;
        if (att?.instanceId === this.instanceId && att.status === 'attached')
          updated.set(e.deviceIndex, { ...e, step: 'ATTACHED' });
        else if (!att || att.status === 'detached' || att.status === 'detaching')
          // Detached behind our back (an operator, a failed attach): attach again.
          updated.set(e.deviceIndex, { ...e, step: 'CREATED', deleteOnTermination: false });
      }
      if (updated.size > 0) {
        const saved = await this.write(node, updated);
        if (!saved) return undefined;
        node = saved;
      }
      if (updated.size === attaching.length || poll >= polls) return node;
      // Bounded by polls, not by the injected clock: the clock stamps leases (tests hold it still), while
      // this is a real wait on EC2.
      await (this.options.sleep ?? sleepMs)(ATTACH_POLL_MS);
    }
  }

  private async leaseStep(node: NodeRecord): Promise<EniStepResult> {
    const attachedIdx = new Set(node.enis.filter((e) => e.step === 'ATTACHED').map((e) => e.deviceIndex));
    const room = this.options.leaseRoom === undefined ? Infinity : this.options.leaseRoom - this.leased.length;
    const leases = expectedLeases(node, leaseCapFor(node.maxPods, this.deps.config.maxPods))
      .filter((l) => attachedIdx.has(l.deviceIndex))
      .slice(0, Math.max(0, room));
    await this.deps.store.putLeases(leases, this.deps.clock.nowMs());
    const ips = leases.map((l) => l.ip);
    let saved: NodeRecord | undefined;
    try {
      saved = await this.write(
        node,
        new Map(
          node.enis.filter((e) => attachedIdx.has(e.deviceIndex)).map((e) => [e.deviceIndex, { ...e, step: 'LEASED' }]),
        ),
      );
    } catch (err) {
      if (err instanceof VersionConflictError) await this.withdrawIfNodeLeft(node, ips);
      throw err;
    }
    if (!saved) await this.withdrawIfNodeLeft(node, ips);
    else this.leased.push(...ips);
    return this.saved(saved);
  }

  /** The lease put raced a terminate (our node write lost to it): take the leases out again. */
  private async withdrawIfNodeLeft(node: NodeRecord, ips: readonly string[]): Promise<void> {
    await withdrawLeasesIfNodeLeft(this.deps.store, this.deps.clock.nowMs(), node.instanceArn, ips, LEASING_PHASES);
  }
}
