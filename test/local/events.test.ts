import { describe, expect, it } from 'vitest';
import { EventBus } from '../../local-cloud/events/bus.js';
import type { BusEvent } from '../../local-cloud/events/event.js';
import { instanceStateChangeEvent, lifecycleActionEvent } from '../../local-cloud/events/event.js';
import type { EventPattern } from '../../local-cloud/events/pattern.js';
import { InvalidEventPatternError, matchesPattern } from '../../local-cloud/events/pattern.js';
import { ACCOUNT, REGION } from './helpers.js';

const launch = lifecycleActionEvent({
  region: REGION,
  accountId: ACCOUNT,
  groupArn: 'arn:aws:autoscaling:us-east-1:123456789012:autoScalingGroup:x:autoScalingGroupName/nodes',
  atMs: Date.UTC(2026, 0, 2, 3, 4, 5, 678),
  detail: {
    LifecycleActionToken: 't-1',
    AutoScalingGroupName: 'nodes',
    LifecycleHookName: 'launch',
    EC2InstanceId: 'i-0123456789abcdef0',
    LifecycleTransition: 'autoscaling:EC2_INSTANCE_LAUNCHING',
  },
});

describe('lifecycleActionEvent / instanceStateChangeEvent', () => {
  it('writes time to the second and omits NotificationMetadata when the hook has none', () => {
    expect(launch.time).toBe('2026-01-02T03:04:05Z');
    expect(launch.detail).not.toHaveProperty('NotificationMetadata');
    expect(launch.detail).toMatchObject({ Origin: 'EC2', Destination: 'AutoScalingGroup' });
  });

  it('shapes an EC2 state change as EventBridge delivers it', () => {
    const event = instanceStateChangeEvent(
      { instanceId: 'i-0123456789abcdef0', previousState: 'pending', state: 'running', atMs: Date.UTC(2026, 0, 1) },
      REGION,
      ACCOUNT,
    );
    expect(event).toEqual({
      version: '0',
      id: expect.stringMatching(/^[0-9a-f-]{36}$/),
      'detail-type': 'EC2 Instance State-change Notification',
      source: 'aws.ec2',
      account: ACCOUNT,
      time: '2026-01-01T00:00:00Z',
      region: REGION,
      resources: [`arn:aws:ec2:${REGION}:${ACCOUNT}:instance/i-0123456789abcdef0`],
      detail: { 'instance-id': 'i-0123456789abcdef0', state: 'running' },
    });
  });
});

describe('matchesPattern', () => {
  const cases: [string, EventPattern, boolean][] = [
    ['exact source', { source: ['aws.autoscaling'] }, true],
    ['other source', { source: ['aws.ec2'] }, false],
    [
      'any-of',
      { 'detail-type': ['EC2 Instance State-change Notification', 'EC2 Instance-launch Lifecycle Action'] },
      true,
    ],
    ['nested exact', { detail: { LifecycleHookName: ['launch'] } }, true],
    ['nested mismatch', { detail: { LifecycleHookName: ['drain'] } }, false],
    ['prefix', { detail: { LifecycleTransition: [{ prefix: 'autoscaling:EC2_INSTANCE_' }] } }, true],
    ['prefix mismatch', { detail: { EC2InstanceId: [{ prefix: 'j-' }] } }, false],
    ['suffix', { detail: { LifecycleTransition: [{ suffix: 'LAUNCHING' }] } }, true],
    ['anything-but', { detail: { LifecycleHookName: [{ 'anything-but': ['drain'] }] } }, true],
    ['anything-but hit', { detail: { LifecycleHookName: [{ 'anything-but': 'launch' }] } }, false],
    ['exists true', { detail: { LifecycleActionToken: [{ exists: true }] } }, true],
    ['exists false on present', { detail: { LifecycleActionToken: [{ exists: false }] } }, false],
    ['exists false on absent', { detail: { NotificationMetadata: [{ exists: false }] } }, true],
    ['missing field', { detail: { Nope: ['x'] } }, false],
    ['array value matches any element', { resources: [{ prefix: 'arn:aws:autoscaling:' }] }, true],
    ['equals-ignore-case', { source: [{ 'equals-ignore-case': 'AWS.AUTOSCALING' }] }, true],
    [
      'all fields must match',
      { source: ['aws.autoscaling'], 'detail-type': ['EC2 Instance State-change Notification'] },
      false,
    ],
  ];
  it.each(cases)('%s', (_name, pattern, expected) => {
    expect(matchesPattern(pattern, launch)).toBe(expected);
  });
});

describe('EventBus', () => {
  const collect = (): { seen: BusEvent[]; target: { id: string; arn: string; deliver(json: string): void } } => {
    const seen: BusEvent[] = [];
    return {
      seen,
      target: { id: 't', arn: 'arn:test', deliver: (json) => void seen.push(JSON.parse(json) as BusEvent) },
    };
  };

  it('delivers to the targets of every matching rule, once per rule, and skips disabled rules', () => {
    const bus = new EventBus();
    const a = collect();
    const b = collect();
    bus.putRule({ name: 'lifecycle', eventPattern: { source: ['aws.autoscaling'] }, targets: [a.target, b.target] });
    bus.putRule({
      name: 'launch-only',
      eventPattern: { detail: { LifecycleHookName: ['launch'] } },
      targets: [a.target],
    });
    bus.putRule({ name: 'off', eventPattern: { source: ['aws.autoscaling'] }, targets: [b.target], enabled: false });
    bus.putRule({ name: 'ec2', eventPattern: { source: ['aws.ec2'] }, targets: [b.target] });
    bus.put(launch);
    expect(a.seen).toEqual([launch, launch]);
    expect(b.seen).toEqual([launch]);
    expect(bus.getStats()).toEqual({ put: 1, matched: 2, delivered: 3, failed: 0 });
  });

  it('counts a failing target without stopping delivery to the others', () => {
    const bus = new EventBus();
    const ok = collect();
    bus.putRule({
      name: 'r',
      eventPattern: { source: ['aws.autoscaling'] },
      targets: [
        {
          id: 'bad',
          arn: 'arn:bad',
          deliver: () => {
            throw new Error('queue gone');
          },
        },
        ok.target,
      ],
    });
    bus.put(launch);
    expect(ok.seen).toHaveLength(1);
    expect(bus.getStats().failed).toBe(1);
  });

  it('rejects patterns EventBridge rejects', () => {
    const bus = new EventBus();
    expect(() => bus.putRule({ name: 'x', eventPattern: {}, targets: [] })).toThrow(InvalidEventPatternError);
    expect(() => bus.putRule({ name: 'x', eventPattern: { source: [] }, targets: [] })).toThrow(
      InvalidEventPatternError,
    );
    expect(() =>
      bus.putRule({ name: 'x', eventPattern: { source: 'aws.ec2' } as unknown as EventPattern, targets: [] }),
    ).toThrow(InvalidEventPatternError);
  });
});
