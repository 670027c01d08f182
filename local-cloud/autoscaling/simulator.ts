import { randomUUID } from 'node:crypto';
import { partitionIdOfRegion } from '../../shared/domain/partition.js';
import { errorMessage } from '../../shared/errors.js';
import type { Logger } from '../../shared/log.js';
import { silentLogger } from '../../shared/log.js';
import type { BusEvent } from '../events/event.js';
import type { SimScheduler } from '../events/scheduler.js';
import type { InstanceStateChange } from '../ports.js';
import { finishActivity, startActivity } from './activities.js';
import { asgErrors } from './errors.js';
import { type InstanceSource, launchGroupInstance } from './launch-instance.js';
import type { ActionRef } from './lifecycle-actions.js';
import { LAUNCHING, LifecycleActions, TERMINATING } from './lifecycle-actions.js';
import type { Activity, Group, GroupInstance, GroupTag, LaunchTemplateSpec, LifecycleHook } from './model.js';
import { activeInstances, pickSubnet, pickVictim } from './placement.js';
import type { PutHookInput } from './rules.js';
import { buildHook, validateSizes } from './rules.js';

export type { ActionRef } from './lifecycle-actions.js';
export { LAUNCHING, TERMINATING } from './lifecycle-actions.js';
export type { PutHookInput } from './rules.js';

export interface AutoScalingSimulatorOptions extends InstanceSource {
  readonly scheduler: SimScheduler;
  /** Where lifecycle-action events go (the EventBridge bus). */
  readonly emit?: (event: BusEvent) => void;
  /** Direct hook notifications to a NotificationTargetARN (an SQS queue), in Auto Scaling's message format. */
  readonly notify?: (targetArn: string, body: string) => void;
  /** Simulated seconds before a failed launch is retried. */
  readonly launchRetryS?: number;
  readonly log?: Logger;
}

export interface CreateGroupInput {
  readonly name: string;
  readonly minSize: number;
  readonly maxSize: number;
  readonly desiredCapacity?: number;
  readonly launchTemplate?: LaunchTemplateSpec;
  readonly instanceTypes?: readonly string[];
  readonly subnetIds: readonly string[];
  readonly defaultCooldownS?: number;
  readonly healthCheckType?: string;
  readonly healthCheckGracePeriodS?: number;
  readonly newInstancesProtectedFromScaleIn?: boolean;
  readonly tags?: readonly GroupTag[];
  readonly hooks?: readonly Omit<PutHookInput, 'groupName'>[];
}

/**
 * EC2 Auto Scaling's group and lifecycle machine over the EC2 simulator. Launch: Pending → (launch hooks)
 * Pending:Wait → Pending:Proceed → InService once EC2 reports running; ABANDON (or a timed-out hook whose
 * DefaultResult is ABANDON) terminates the instance and a replacement is launched. Terminate: Terminating →
 * (terminate hooks) Terminating:Wait → Terminating:Proceed → Terminated, then the EC2 instance is terminated.
 * Each hook action emits the EventBridge event, times out after HeartbeatTimeout unless a heartbeat extends it
 * (never past the global timeout), and completes only with its own token or instance id.
 */
export class AutoScalingSimulator {
  readonly region: string;
  readonly accountId: string;
  private readonly groups = new Map<string, Group>();
  private readonly instanceGroup = new Map<string, string>();
  private readonly retryTimers = new Map<string, () => void>();
  private readonly unsubscribe: () => void;
  private readonly log: Logger;
  private readonly actions: LifecycleActions;

  constructor(private readonly options: AutoScalingSimulatorOptions) {
    this.region = options.ec2.region;
    this.accountId = options.ec2.accountId;
    this.log = options.log ?? silentLogger;
    this.actions = new LifecycleActions({
      scheduler: options.scheduler,
      region: this.region,
      accountId: this.accountId,
      groups: this.groups,
      log: this.log,
      ...(options.emit ? { emit: options.emit } : {}),
      ...(options.notify ? { notify: options.notify } : {}),
      onLaunchResolved: (group, instance, result, hookName) => this.onLaunchResolved(group, instance, result, hookName),
      onTerminateResolved: (group, instance) => this.finishTermination(group, instance),
    });
    this.unsubscribe = options.ec2.onInstanceStateChange((change) => this.onEc2StateChange(change));
  }

  close(): void {
    this.unsubscribe();
    for (const cancel of this.retryTimers.values()) cancel();
    for (const group of this.groups.values()) {
      for (const instance of group.instances.values()) this.actions.cancelAll(instance);
    }
  }

  createGroup(input: CreateGroupInput): Group {
    if (this.groups.has(input.name)) throw asgErrors.alreadyExists(input.name);
    const desired = input.desiredCapacity ?? input.minSize;
    validateSizes(input.minSize, input.maxSize, desired);
    if (input.subnetIds.length === 0) {
      throw asgErrors.validation('At least one Availability Zone or VPC Subnet is required.');
    }
    if (!input.launchTemplate && (input.instanceTypes ?? []).length === 0) {
      throw asgErrors.validation(
        'Valid requests must contain either LaunchTemplate, LaunchConfigurationName, InstanceId or MixedInstancesPolicy parameter.',
      );
    }
    const group: Group = {
      name: input.name,
      arn: `arn:${partitionIdOfRegion(this.region)}:autoscaling:${this.region}:${this.accountId}:autoScalingGroup:${randomUUID()}:autoScalingGroupName/${input.name}`,
      createdMs: this.nowMs(),
      minSize: input.minSize,
      maxSize: input.maxSize,
      desiredCapacity: desired,
      launchTemplate: input.launchTemplate,
      instanceTypes: [...(input.instanceTypes ?? [])],
      subnetIds: [...input.subnetIds],
      defaultCooldownS: input.defaultCooldownS ?? 300,
      healthCheckType: input.healthCheckType ?? 'EC2',
      healthCheckGracePeriodS: input.healthCheckGracePeriodS ?? 0,
      newInstancesProtectedFromScaleIn: input.newInstancesProtectedFromScaleIn ?? false,
      tags: new Map((input.tags ?? []).map((t) => [t.Key, t])),
      hooks: new Map(),
      instances: new Map(),
      activities: [],
      deleting: false,
    };
    // Hooks given at creation apply to the very first launches, as LifecycleHookSpecificationList promises.
    const hooks = (input.hooks ?? []).map((h) => buildHook({ ...h, groupName: input.name }));
    for (const hook of hooks) group.hooks.set(hook.name, hook);
    this.groups.set(group.name, group);
    this.reconcile(group);
    return group;
  }

  updateGroup(
    name: string,
    changes: Partial<
      Pick<CreateGroupInput, 'minSize' | 'maxSize' | 'desiredCapacity' | 'launchTemplate' | 'subnetIds'>
    >,
  ): Group {
    const group = this.group(name);
    const minSize = changes.minSize ?? group.minSize;
    const maxSize = changes.maxSize ?? group.maxSize;
    // Like AWS, a new min/max without a desired capacity drags the desired capacity into range.
    const desired = changes.desiredCapacity ?? Math.min(maxSize, Math.max(minSize, group.desiredCapacity));
    validateSizes(minSize, maxSize, desired);
    group.minSize = minSize;
    group.maxSize = maxSize;
    group.desiredCapacity = desired;
    if (changes.launchTemplate) group.launchTemplate = changes.launchTemplate;
    if (changes.subnetIds && changes.subnetIds.length > 0) group.subnetIds = [...changes.subnetIds];
    this.reconcile(group);
    return group;
  }

  deleteGroup(name: string, force: boolean): void {
    const group = this.group(name);
    if (!force && group.instances.size > 0) {
      throw asgErrors.resourceInUse(
        'You cannot delete an AutoScalingGroup while there are instances or pending Spot instance request(s) still in the group.',
      );
    }
    group.deleting = true;
    for (const instance of [...group.instances.values()]) {
      this.actions.cancelAll(instance);
      this.terminateEc2(instance.instanceId);
      this.instanceGroup.delete(instance.instanceId);
    }
    this.retryTimers.get(name)?.();
    this.groups.delete(name);
  }

  describeGroups(names?: readonly string[]): Group[] {
    const all = [...this.groups.values()];
    return names && names.length > 0 ? all.filter((g) => names.includes(g.name)) : all;
  }

  getGroup(name: string): Group | undefined {
    return this.groups.get(name);
  }

  setDesiredCapacity(name: string, desired: number): void {
    const group = this.group(name);
    if (desired > group.maxSize) {
      throw asgErrors.validation(
        `New SetDesiredCapacity value ${desired} is above max value ${group.maxSize} for the AutoScalingGroup.`,
      );
    }
    if (desired < group.minSize) {
      throw asgErrors.validation(
        `New SetDesiredCapacity value ${desired} is below min value ${group.minSize} for the AutoScalingGroup.`,
      );
    }
    group.desiredCapacity = desired;
    this.reconcile(group);
  }

  terminateInstance(instanceId: string, shouldDecrementDesiredCapacity: boolean): Activity {
    const found = this.find(instanceId);
    if (!found) throw asgErrors.instanceNotFound(instanceId);
    const { group, instance } = found;
    if (shouldDecrementDesiredCapacity && group.desiredCapacity <= group.minSize) {
      throw asgErrors.validation(
        `Currently, desiredSize equals minSize (${group.minSize}). Terminating instance without replacement will violate group's min size constraint. Either set shouldDecrementDesiredCapacity flag to false or lower group's min size.`,
      );
    }
    if (shouldDecrementDesiredCapacity) group.desiredCapacity -= 1;
    const activity = this.activity(
      group,
      `Terminating EC2 instance: ${instanceId}`,
      `At ${new Date(this.nowMs()).toISOString()} instance ${instanceId} was taken out of service in response to a user request${shouldDecrementDesiredCapacity ? ', shrinking the capacity from ' + (group.desiredCapacity + 1) + ' to ' + group.desiredCapacity : ''}.`,
      instance,
    );
    if (!instance.lifecycleState.startsWith('Terminating') && instance.lifecycleState !== 'Terminated') {
      this.beginTermination(group, instance, activity);
    }
    return activity;
  }

  putLifecycleHook(input: PutHookInput): LifecycleHook {
    const group = this.group(input.groupName);
    const existing = group.hooks.get(input.name);
    const hook = buildHook(input, existing);
    if (!existing && group.hooks.size >= 50) throw asgErrors.limitExceeded('Lifecycle hooks limit of 50 exceeded.');
    group.hooks.set(hook.name, hook);
    return hook;
  }

  deleteLifecycleHook(groupName: string, hookName: string): void {
    const group = this.group(groupName);
    if (!group.hooks.delete(hookName)) {
      throw asgErrors.validation(`No Lifecycle Hook found with name ${hookName} for group ${groupName}`);
    }
  }

  describeLifecycleHooks(groupName: string, names?: readonly string[]): LifecycleHook[] {
    const hooks = [...this.group(groupName).hooks.values()];
    return names && names.length > 0 ? hooks.filter((h) => names.includes(h.name)) : hooks;
  }

  completeLifecycleAction(ref: ActionRef, result: string): void {
    this.actions.complete(ref, result);
  }

  recordLifecycleActionHeartbeat(ref: ActionRef): void {
    this.actions.heartbeat(ref);
  }

  /** Every group instance (optionally only the given ids), with its group. */
  describeInstances(instanceIds?: readonly string[]): { group: Group; instance: GroupInstance }[] {
    const out: { group: Group; instance: GroupInstance }[] = [];
    for (const group of this.groups.values()) {
      for (const instance of group.instances.values()) {
        if (!instanceIds || instanceIds.length === 0 || instanceIds.includes(instance.instanceId))
          out.push({ group, instance });
      }
    }
    return out;
  }

  private nowMs(): number {
    return this.options.scheduler.clock.nowMs();
  }

  private group(name: string): Group {
    const group = this.groups.get(name);
    if (!group) throw asgErrors.groupNotFound(name);
    return group;
  }

  private find(instanceId: string): { group: Group; instance: GroupInstance } | undefined {
    const name = this.instanceGroup.get(instanceId);
    const group = name ? this.groups.get(name) : undefined;
    const instance = group?.instances.get(instanceId);
    return group && instance ? { group, instance } : undefined;
  }

  private activity(group: Group, description: string, cause: string, instance?: GroupInstance): Activity {
    return startActivity(group, description, cause, this.nowMs(), instance);
  }

  private finishActivity(activity: Activity, status: 'Successful' | 'Failed', message?: string): void {
    finishActivity(activity, status, this.nowMs(), message);
  }

  /** Launches or terminates until the group's live instances equal its desired capacity. */
  private reconcile(group: Group): void {
    if (group.deleting || !this.groups.has(group.name)) return;
    let active = activeInstances(group);
    while (active.length < group.desiredCapacity) {
      if (!this.launch(group)) return;
      active = activeInstances(group);
    }
    while (active.length > group.desiredCapacity) {
      const victim = pickVictim(active);
      if (!victim) return;
      const activity = this.activity(
        group,
        `Terminating EC2 instance: ${victim.instanceId}`,
        `At ${new Date(this.nowMs()).toISOString()} a user request explicitly set group desired capacity changing the desired capacity, shrinking the capacity to ${group.desiredCapacity}.`,
        victim,
      );
      this.beginTermination(group, victim, activity);
      active = activeInstances(group);
    }
  }

  private launch(group: Group): boolean {
    const subnetId = pickSubnet(group);
    let instance: GroupInstance;
    try {
      instance = launchGroupInstance(this.options, group, subnetId, this.nowMs());
    } catch (err) {
      const activity = this.activity(
        group,
        'Launching a new EC2 instance.  Status Reason: ' + errorMessage(err),
        `At ${new Date(this.nowMs()).toISOString()} an instance was started in response to a difference between desired and actual capacity.`,
      );
      this.finishActivity(activity, 'Failed', errorMessage(err));
      this.log.warn('failed to launch instance for group', { group: group.name, err });
      this.scheduleRetry(group);
      return false;
    }
    group.instances.set(instance.instanceId, instance);
    this.instanceGroup.set(instance.instanceId, group.name);
    const activity = this.activity(
      group,
      `Launching a new EC2 instance: ${instance.instanceId}`,
      `At ${new Date(this.nowMs()).toISOString()} an instance was started in response to a difference between desired and actual capacity, increasing the capacity to ${group.desiredCapacity}.`,
      instance,
    );
    this.finishActivity(activity, 'Successful');
    const hooks = [...group.hooks.values()].filter((h) => h.transition === LAUNCHING);
    if (hooks.length === 0) this.maybeInService(instance);
    else {
      instance.lifecycleState = 'Pending:Wait';
      for (const hook of hooks) this.actions.start(group, instance, hook);
    }
    return true;
  }

  private scheduleRetry(group: Group): void {
    if (this.retryTimers.has(group.name)) return;
    const cancel = this.options.scheduler.after((this.options.launchRetryS ?? 10) * 1000, () => {
      this.retryTimers.delete(group.name);
      this.reconcile(group);
    });
    this.retryTimers.set(group.name, cancel);
  }

  private maybeInService(instance: GroupInstance): void {
    if (
      (instance.lifecycleState === 'Pending' || instance.lifecycleState === 'Pending:Proceed') &&
      instance.ec2Running
    ) {
      instance.lifecycleState = 'InService';
    }
  }

  private onLaunchResolved(
    group: Group,
    instance: GroupInstance,
    result: 'CONTINUE' | 'ABANDON',
    hookName: string,
  ): void {
    if (result === 'CONTINUE') {
      instance.lifecycleState = 'Pending:Proceed';
      this.maybeInService(instance);
      return;
    }
    const activity = this.activity(
      group,
      `Terminating EC2 instance: ${instance.instanceId}`,
      `At ${new Date(this.nowMs()).toISOString()} instance ${instance.instanceId} was abandoned by lifecycle hook ${hookName}.`,
      instance,
    );
    this.finishTermination(group, instance, activity);
  }

  private beginTermination(group: Group, instance: GroupInstance, activity?: Activity): void {
    this.actions.cancelAll(instance);
    instance.lifecycleState = 'Terminating';
    const hooks = [...group.hooks.values()].filter((h) => h.transition === TERMINATING);
    if (hooks.length === 0) {
      this.finishTermination(group, instance, activity);
      return;
    }
    instance.lifecycleState = 'Terminating:Wait';
    for (const hook of hooks) this.actions.start(group, instance, hook);
    if (activity) this.finishActivity(activity, 'Successful');
  }

  private finishTermination(group: Group, instance: GroupInstance, activity?: Activity): void {
    instance.lifecycleState = 'Terminating:Proceed';
    this.terminateEc2(instance.instanceId);
    instance.lifecycleState = 'Terminated';
    group.instances.delete(instance.instanceId);
    this.instanceGroup.delete(instance.instanceId);
    if (activity) this.finishActivity(activity, 'Successful');
    this.reconcile(group);
  }

  private terminateEc2(instanceId: string): void {
    const current = this.options.ec2.getInstance(instanceId);
    if (!current || current.state === 'terminated' || current.state === 'shutting-down') return;
    try {
      this.options.ec2.terminateInstance(instanceId);
    } catch (err) {
      this.log.warn('failed to terminate instance', { instanceId, err });
    }
  }

  private onEc2StateChange(change: InstanceStateChange): void {
    const found = this.find(change.instanceId);
    if (!found) return;
    const { group, instance } = found;
    if (change.state === 'running') {
      instance.ec2Running = true;
      this.maybeInService(instance);
      return;
    }
    if (instance.lifecycleState.startsWith('Terminating') || instance.lifecycleState === 'Terminated') return;
    if (
      change.state === 'shutting-down' ||
      change.state === 'terminated' ||
      change.state === 'stopped' ||
      change.state === 'stopping'
    ) {
      // Terminated or stopped behind Auto Scaling's back: EC2 health checks mark it unhealthy and replace it.
      instance.healthStatus = 'Unhealthy';
      const activity = this.activity(
        group,
        `Terminating EC2 instance: ${instance.instanceId}`,
        `At ${new Date(this.nowMs()).toISOString()} an instance was taken out of service in response to an EC2 health check indicating it has been terminated or stopped.`,
        instance,
      );
      this.beginTermination(group, instance, activity);
    }
  }
}
