import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LAUNCHING } from '../../local-cloud/autoscaling/simulator.js';
import { type LocalCloud, startLocalCloud } from '../../local-cloud/cloud.js';
import type { AutoScalingPort, LifecycleActionRef } from '../../shared/autoscaling/port.js';
import { SdkAutoScaling } from '../../shared/autoscaling/sdk-autoscaling.js';
import { eventually } from './support/cloud.js';
import { RecordingAutoScaling } from './support/recording-autoscaling.js';

interface Subject {
  readonly port: AutoScalingPort;
  /** A lifecycle action Auto Scaling holds right now. */
  pendingAction(): Promise<LifecycleActionRef>;
}

/** The same contract for the SDK adapter (against the Auto Scaling simulator) and the tests' recording fake. */
function autoScalingContract(name: string, setup: () => Promise<Subject>, teardown: () => Promise<void>): void {
  describe(`AutoScalingPort contract: ${name}`, () => {
    let subject: Subject;
    beforeAll(async () => {
      subject = await setup();
    });
    afterAll(teardown);

    it('completes an action once and answers gone for the same token afterwards', async () => {
      const ref = await subject.pendingAction();
      await expect(subject.port.completeLifecycleAction(ref, 'CONTINUE')).resolves.toBe('done');
      await expect(subject.port.completeLifecycleAction(ref, 'CONTINUE')).resolves.toBe('gone');
      await expect(subject.port.completeLifecycleAction(ref, 'ABANDON')).resolves.toBe('gone');
    });

    it('records heartbeats while the action is held and answers gone once it is completed', async () => {
      const ref = await subject.pendingAction();
      await expect(subject.port.recordLifecycleActionHeartbeat(ref)).resolves.toBe('done');
      await expect(subject.port.completeLifecycleAction(ref, 'ABANDON')).resolves.toBe('done');
      await expect(subject.port.recordLifecycleActionHeartbeat(ref)).resolves.toBe('gone');
    });
  });
}

let cloud: LocalCloud;
let launched = 0;
autoScalingContract(
  'SdkAutoScaling',
  async () => {
    cloud = await startLocalCloud({ timeScale: 0.01, seedNetwork: true });
    const port = new SdkAutoScaling({
      clientConfig: {
        region: cloud.region,
        endpoint: cloud.endpoints.autoScaling,
        credentials: { accessKeyId: 'l', secretAccessKey: 'l' },
      },
    });
    cloud.autoScaling.simulator.createGroup({
      name: 'contract',
      minSize: 0,
      maxSize: 10,
      desiredCapacity: 0,
      instanceTypes: ['t3.medium'],
      subnetIds: [cloud.network!.subnetIds[0]!],
      hooks: [{ name: 'hold', transition: LAUNCHING, heartbeatTimeoutS: 7200, defaultResult: 'ABANDON' }],
    });
    return {
      port,
      pendingAction: async () => {
        launched += 1;
        cloud.autoScaling.simulator.setDesiredCapacity('contract', launched);
        return eventually('an instance held in Pending:Wait', () => {
          for (const i of cloud.autoScaling.simulator.getGroup('contract')?.instances.values() ?? []) {
            const action = i.actions.get('hold');
            if (i.lifecycleState === 'Pending:Wait' && action && !action.result)
              return {
                autoScalingGroupName: 'contract',
                hookName: 'hold',
                token: action.token,
                instanceId: i.instanceId,
              };
          }
          return undefined;
        });
      },
    };
  },
  async () => {
    await cloud.close();
  },
);

autoScalingContract(
  'RecordingAutoScaling (test fake)',
  async () => ({
    port: new RecordingAutoScaling(),
    pendingAction: async () => ({
      autoScalingGroupName: 'g',
      hookName: 'h',
      token: randomUUID(),
      instanceId: 'i-0123456789abcdef0',
    }),
  }),
  async () => {},
);
