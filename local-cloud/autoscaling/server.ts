import { randomUUID } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { AutoScalingError, asgErrors } from './errors.js';
import type { Activity, Group, GroupInstance, LaunchTemplateSpec, LifecycleHook } from './model.js';
import type { QueryNode, XmlValue } from './query.js';
import { bool, child, errorXml, int, parseQuery, responseXml, stringMembers, structMembers, text } from './query.js';
import type { PutHookInput } from './rules.js';
import type { AutoScalingSimulator } from './simulator.js';

type Action = (sim: AutoScalingSimulator, input: QueryNode) => Record<string, XmlValue> | undefined;

function required(input: QueryNode, key: string): string {
  const value = text(input, key);
  if (value === undefined || value === '') {
    throw asgErrors.validation(
      `1 validation error detected: Value null at '${key.charAt(0).toLowerCase() + key.slice(1)}' failed to satisfy constraint: Member must not be null`,
    );
  }
  return value;
}

function requiredInt(input: QueryNode, key: string): number {
  const value = int(input, key);
  if (value === undefined) required(input, key);
  if (!Number.isInteger(value)) throw asgErrors.validation(`Invalid value for ${key}: ${text(input, key)}`);
  return value as number;
}

function launchTemplateOf(node: QueryNode | undefined): LaunchTemplateSpec | undefined {
  if (!node) return undefined;
  const id = text(node, 'LaunchTemplateId');
  const name = text(node, 'LaunchTemplateName');
  const version = text(node, 'Version');
  if (id === undefined && name === undefined) return undefined;
  return {
    ...(id !== undefined ? { LaunchTemplateId: id } : {}),
    ...(name !== undefined ? { LaunchTemplateName: name } : {}),
    ...(version !== undefined ? { Version: version } : {}),
  };
}

function hookInput(groupName: string, node: QueryNode): PutHookInput {
  const heartbeatTimeoutS = int(node, 'HeartbeatTimeout');
  return {
    groupName,
    name: required(node, 'LifecycleHookName'),
    ...(text(node, 'LifecycleTransition') !== undefined ? { transition: text(node, 'LifecycleTransition')! } : {}),
    ...(heartbeatTimeoutS !== undefined ? { heartbeatTimeoutS } : {}),
    ...(text(node, 'DefaultResult') !== undefined ? { defaultResult: text(node, 'DefaultResult')! } : {}),
    ...(text(node, 'NotificationMetadata') !== undefined
      ? { notificationMetadata: text(node, 'NotificationMetadata')! }
      : {}),
    ...(text(node, 'NotificationTargetARN') !== undefined
      ? { notificationTargetArn: text(node, 'NotificationTargetARN')! }
      : {}),
    ...(text(node, 'RoleARN') !== undefined ? { roleArn: text(node, 'RoleARN')! } : {}),
  };
}

function subnetsOf(input: QueryNode): string[] {
  return (text(input, 'VPCZoneIdentifier') ?? '')
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);
}

function instanceXml(group: Group, instance: GroupInstance): Record<string, XmlValue> {
  return {
    InstanceId: instance.instanceId,
    InstanceType: instance.instanceType,
    AvailabilityZone: instance.availabilityZone,
    LifecycleState: instance.lifecycleState,
    HealthStatus: instance.healthStatus,
    ...(group.launchTemplate ? { LaunchTemplate: { ...group.launchTemplate } } : {}),
    ProtectedFromScaleIn: instance.protectedFromScaleIn,
  };
}

function groupXml(group: Group): Record<string, XmlValue> {
  const zones = [...new Set([...group.instances.values()].map((i) => i.availabilityZone))].sort();
  const template = group.launchTemplate ? { ...group.launchTemplate } : undefined;
  return {
    AutoScalingGroupName: group.name,
    AutoScalingGroupARN: group.arn,
    ...(template && group.instanceTypes.length === 0 ? { LaunchTemplate: template } : {}),
    ...(group.instanceTypes.length > 0
      ? {
          MixedInstancesPolicy: {
            LaunchTemplate: {
              ...(template ? { LaunchTemplateSpecification: template } : {}),
              Overrides: group.instanceTypes.map((t) => ({ InstanceType: t })),
            },
          },
        }
      : {}),
    MinSize: group.minSize,
    MaxSize: group.maxSize,
    DesiredCapacity: group.desiredCapacity,
    DefaultCooldown: group.defaultCooldownS,
    AvailabilityZones: zones,
    LoadBalancerNames: [],
    TargetGroupARNs: [],
    HealthCheckType: group.healthCheckType,
    HealthCheckGracePeriod: group.healthCheckGracePeriodS,
    Instances: [...group.instances.values()].map((i) => instanceXml(group, i)),
    CreatedTime: new Date(group.createdMs),
    SuspendedProcesses: [],
    VPCZoneIdentifier: group.subnetIds.join(','),
    EnabledMetrics: [],
    Tags: [...group.tags.values()].map((t) => ({
      ResourceId: group.name,
      ResourceType: 'auto-scaling-group',
      Key: t.Key,
      Value: t.Value,
      PropagateAtLaunch: t.PropagateAtLaunch,
    })),
    TerminationPolicies: ['Default'],
    NewInstancesProtectedFromScaleIn: group.newInstancesProtectedFromScaleIn,
    ServiceLinkedRoleARN: `arn:${group.arn.split(':')[1]}:iam::${group.arn.split(':')[4]}:role/aws-service-role/autoscaling.amazonaws.com/AWSServiceRoleForAutoScaling`,
    ...(group.deleting ? { Status: 'Delete in progress' } : {}),
  };
}

function hookXml(hook: LifecycleHook): Record<string, XmlValue> {
  return {
    LifecycleHookName: hook.name,
    AutoScalingGroupName: hook.groupName,
    LifecycleTransition: hook.transition,
    NotificationTargetARN: hook.notificationTargetArn,
    RoleARN: hook.roleArn,
    NotificationMetadata: hook.notificationMetadata,
    HeartbeatTimeout: hook.heartbeatTimeoutS,
    GlobalTimeout: hook.globalTimeoutS,
    DefaultResult: hook.defaultResult,
  };
}

function activityXml(activity: Activity): Record<string, XmlValue> {
  return { ...activity };
}

/** A page of `items` per MaxRecords/NextToken (the token is the next offset, opaque to callers). */
function page<T>(items: T[], input: QueryNode, max = 50): { items: T[]; nextToken: string | undefined } {
  const limit = Math.min(int(input, 'MaxRecords') ?? max, 100);
  const token = text(input, 'NextToken');
  const start = token ? Number(Buffer.from(token, 'base64').toString()) : 0;
  if (!Number.isInteger(start) || start < 0) throw new AutoScalingError('InvalidNextToken', 'The token is invalid.');
  const slice = items.slice(start, start + limit);
  return {
    items: slice,
    nextToken: start + limit < items.length ? Buffer.from(String(start + limit)).toString('base64') : undefined,
  };
}

function matchesFilters(group: Group, input: QueryNode): boolean {
  return structMembers(input, 'Filters').every((filter) => {
    const name = text(filter, 'Name') ?? '';
    const values = stringMembers(filter, 'Values');
    const tags = [...group.tags.values()];
    if (name === 'tag-key') return tags.some((t) => values.includes(t.Key));
    if (name === 'tag-value') return tags.some((t) => values.includes(t.Value));
    if (name.startsWith('tag:')) return tags.some((t) => t.Key === name.slice(4) && values.includes(t.Value));
    throw asgErrors.validation(`Filter name ${name} is not supported.`);
  });
}

const actions: Record<string, Action> = {
  CreateAutoScalingGroup: (sim, input) => {
    const name = required(input, 'AutoScalingGroupName');
    const mixed = child(child(input, 'MixedInstancesPolicy'), 'LaunchTemplate');
    const desiredCapacity = int(input, 'DesiredCapacity');
    const defaultCooldownS = int(input, 'DefaultCooldown');
    const healthCheckType = text(input, 'HealthCheckType');
    const healthCheckGracePeriodS = int(input, 'HealthCheckGracePeriod');
    const newInstancesProtectedFromScaleIn = bool(input, 'NewInstancesProtectedFromScaleIn');
    const launchTemplate =
      launchTemplateOf(child(input, 'LaunchTemplate')) ?? launchTemplateOf(child(mixed, 'LaunchTemplateSpecification'));
    sim.createGroup({
      name,
      minSize: requiredInt(input, 'MinSize'),
      maxSize: requiredInt(input, 'MaxSize'),
      ...(desiredCapacity !== undefined ? { desiredCapacity } : {}),
      ...(launchTemplate ? { launchTemplate } : {}),
      instanceTypes: structMembers(mixed, 'Overrides')
        .map((o) => text(o, 'InstanceType'))
        .filter((t): t is string => t !== undefined),
      subnetIds: subnetsOf(input),
      ...(defaultCooldownS !== undefined ? { defaultCooldownS } : {}),
      ...(healthCheckType !== undefined ? { healthCheckType } : {}),
      ...(healthCheckGracePeriodS !== undefined ? { healthCheckGracePeriodS } : {}),
      ...(newInstancesProtectedFromScaleIn !== undefined ? { newInstancesProtectedFromScaleIn } : {}),
      tags: structMembers(input, 'Tags').map((t) => ({
        Key: required(t, 'Key'),
        Value: text(t, 'Value') ?? '',
        PropagateAtLaunch: bool(t, 'PropagateAtLaunch') ?? false,
      })),
      hooks: structMembers(input, 'LifecycleHookSpecificationList').map((h) => hookInput(name, h)),
    });
    return undefined;
  },
  UpdateAutoScalingGroup: (sim, input) => {
    const minSize = int(input, 'MinSize');
    const maxSize = int(input, 'MaxSize');
    const desiredCapacity = int(input, 'DesiredCapacity');
    const launchTemplate = launchTemplateOf(child(input, 'LaunchTemplate'));
    const subnetIds = subnetsOf(input);
    sim.updateGroup(required(input, 'AutoScalingGroupName'), {
      ...(minSize !== undefined ? { minSize } : {}),
      ...(maxSize !== undefined ? { maxSize } : {}),
      ...(desiredCapacity !== undefined ? { desiredCapacity } : {}),
      ...(launchTemplate ? { launchTemplate } : {}),
      ...(subnetIds.length > 0 ? { subnetIds } : {}),
    });
    return undefined;
  },
  DeleteAutoScalingGroup: (sim, input) => {
    sim.deleteGroup(required(input, 'AutoScalingGroupName'), bool(input, 'ForceDelete') ?? false);
    return undefined;
  },
  DescribeAutoScalingGroups: (sim, input) => {
    const groups = sim
      .describeGroups(stringMembers(input, 'AutoScalingGroupNames'))
      .filter((g) => matchesFilters(g, input));
    const { items, nextToken } = page(groups, input);
    return { AutoScalingGroups: items.map(groupXml), NextToken: nextToken };
  },
  SetDesiredCapacity: (sim, input) => {
    sim.setDesiredCapacity(required(input, 'AutoScalingGroupName'), requiredInt(input, 'DesiredCapacity'));
    return undefined;
  },
  TerminateInstanceInAutoScalingGroup: (sim, input) => {
    const decrement = bool(input, 'ShouldDecrementDesiredCapacity');
    if (decrement === undefined) required(input, 'ShouldDecrementDesiredCapacity');
    const activity = sim.terminateInstance(required(input, 'InstanceId'), decrement === true);
    return { Activity: activityXml(activity) };
  },
  DescribeScalingActivities: (sim, input) => {
    const name = text(input, 'AutoScalingGroupName');
    const ids = stringMembers(input, 'ActivityIds');
    const all = sim
      .describeGroups(name ? [name] : undefined)
      .flatMap((g) => g.activities)
      .filter((a) => ids.length === 0 || ids.includes(a.ActivityId));
    const { items, nextToken } = page(all, input, 100);
    return { Activities: items.map(activityXml), NextToken: nextToken };
  },
  PutLifecycleHook: (sim, input) => {
    sim.putLifecycleHook(hookInput(required(input, 'AutoScalingGroupName'), input));
    return {};
  },
  DeleteLifecycleHook: (sim, input) => {
    sim.deleteLifecycleHook(required(input, 'AutoScalingGroupName'), required(input, 'LifecycleHookName'));
    return {};
  },
  DescribeLifecycleHooks: (sim, input) => ({
    LifecycleHooks: sim
      .describeLifecycleHooks(required(input, 'AutoScalingGroupName'), stringMembers(input, 'LifecycleHookNames'))
      .map(hookXml),
  }),
  CompleteLifecycleAction: (sim, input) => {
    const token = text(input, 'LifecycleActionToken');
    const instanceId = text(input, 'InstanceId');
    sim.completeLifecycleAction(
      {
        groupName: required(input, 'AutoScalingGroupName'),
        hookName: required(input, 'LifecycleHookName'),
        ...(token !== undefined ? { token } : {}),
        ...(instanceId !== undefined ? { instanceId } : {}),
      },
      required(input, 'LifecycleActionResult'),
    );
    return {};
  },
  RecordLifecycleActionHeartbeat: (sim, input) => {
    const token = text(input, 'LifecycleActionToken');
    const instanceId = text(input, 'InstanceId');
    sim.recordLifecycleActionHeartbeat({
      groupName: required(input, 'AutoScalingGroupName'),
      hookName: required(input, 'LifecycleHookName'),
      ...(token !== undefined ? { token } : {}),
      ...(instanceId !== undefined ? { instanceId } : {}),
    });
    return {};
  },
  DescribeAutoScalingInstances: (sim, input) => {
    const found = sim.describeInstances(stringMembers(input, 'InstanceIds'));
    const { items, nextToken } = page(found, input);
    return {
      AutoScalingInstances: items.map(({ group, instance }) => ({
        InstanceId: instance.instanceId,
        InstanceType: instance.instanceType,
        AutoScalingGroupName: group.name,
        AvailabilityZone: instance.availabilityZone,
        LifecycleState: instance.lifecycleState,
        // This API spells health in capitals, unlike DescribeAutoScalingGroups.
        HealthStatus: instance.healthStatus.toUpperCase(),
        ...(group.launchTemplate ? { LaunchTemplate: { ...group.launchTemplate } } : {}),
        ProtectedFromScaleIn: instance.protectedFromScaleIn,
      })),
      NextToken: nextToken,
    };
  },
};

export function autoScalingRequestHandler(
  sim: AutoScalingSimulator,
): (request: IncomingMessage, body: Buffer, response: ServerResponse) => void {
  return (request, body, response) => {
    const requestId = randomUUID();
    const reply = (status: number, xml: string): void => {
      response.writeHead(status, {
        'content-type': 'text/xml',
        'content-length': String(Buffer.byteLength(xml)),
        'x-amzn-requestid': requestId,
      });
      response.end(xml);
    };
    const input = parseQuery(body.toString('utf8'));
    const name = text(input, 'Action') ?? '';
    const action = actions[name];
    if (request.method !== 'POST' || !action) {
      reply(
        400,
        errorXml(
          'InvalidAction',
          `The action ${name || '(none)'} is not valid for this web service.`,
          'Sender',
          requestId,
        ),
      );
      return;
    }
    try {
      reply(200, responseXml(name, action(sim, input), requestId));
    } catch (err) {
      if (err instanceof AutoScalingError) reply(err.statusCode, errorXml(err.code, err.message, err.fault, requestId));
      else reply(500, errorXml('InternalFailure', String(err), 'Receiver', requestId));
    }
  };
}
