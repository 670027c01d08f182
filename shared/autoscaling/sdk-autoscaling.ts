import {
  AutoScalingClient,
  type AutoScalingClientConfig,
  CompleteLifecycleActionCommand,
  RecordLifecycleActionHeartbeatCommand,
} from '@aws-sdk/client-auto-scaling';
import { errorMessage, VpcLeaseError } from '../errors.js';
import type { Metrics } from '../metrics.js';
import type { AutoScalingPort, LifecycleActionRef, LifecycleCallOutcome, LifecycleResult } from './port.js';

export class AutoScalingCallError extends VpcLeaseError {
  constructor(
    readonly action: string,
    readonly code: string,
    message: string,
    options?: { cause?: unknown },
  ) {
    super(message, options);
  }
}

// Auto Scaling answers a token it no longer holds with a ValidationError whose message says so; AWS has no
// dedicated code for it. Any other ValidationError (malformed name) is a real error.
const NO_ACTIVE_ACTION = /no active lifecycle action/i;

function isGone(err: unknown): boolean {
  const e = err as { name?: string; Code?: string; message?: string };
  return (e?.name === 'ValidationError' || e?.Code === 'ValidationError') && NO_ACTIVE_ACTION.test(e.message ?? '');
}

export interface SdkAutoScalingOptions {
  readonly client?: AutoScalingClient;
  readonly clientConfig?: AutoScalingClientConfig;
  readonly metrics?: Metrics;
}

export class SdkAutoScaling implements AutoScalingPort {
  readonly client: AutoScalingClient;
  private readonly metrics: Metrics | undefined;

  constructor(options: SdkAutoScalingOptions = {}) {
    this.client =
      options.client ?? new AutoScalingClient({ retryMode: 'adaptive', maxAttempts: 5, ...options.clientConfig });
    this.metrics = options.metrics;
  }

  private async call(action: string, send: () => Promise<unknown>): Promise<LifecycleCallOutcome> {
    this.metrics?.add('AutoScalingCalls', { Action: action });
    try {
      await send();
      return 'done';
    } catch (err) {
      if (isGone(err)) return 'gone';
      const code = (err as { name?: string })?.name ?? 'Unknown';
      throw new AutoScalingCallError(action, code, `failed to call Auto Scaling ${action}: ${errorMessage(err)}`, {
        cause: err,
      });
    }
  }

  completeLifecycleAction(ref: LifecycleActionRef, result: LifecycleResult): Promise<LifecycleCallOutcome> {
    return this.call('CompleteLifecycleAction', () =>
      this.client.send(
        new CompleteLifecycleActionCommand({
          AutoScalingGroupName: ref.autoScalingGroupName,
          LifecycleHookName: ref.hookName,
          LifecycleActionToken: ref.token,
          InstanceId: ref.instanceId,
          LifecycleActionResult: result,
        }),
      ),
    );
  }

  recordLifecycleActionHeartbeat(ref: LifecycleActionRef): Promise<LifecycleCallOutcome> {
    return this.call('RecordLifecycleActionHeartbeat', () =>
      this.client.send(
        new RecordLifecycleActionHeartbeatCommand({
          AutoScalingGroupName: ref.autoScalingGroupName,
          LifecycleHookName: ref.hookName,
          LifecycleActionToken: ref.token,
          InstanceId: ref.instanceId,
        }),
      ),
    );
  }
}
