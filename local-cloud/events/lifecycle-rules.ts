import { STATE_CHANGE_DETAIL_TYPE } from '../../shared/lifecycle/events.js';
import { HOOKLESS_LAUNCH_STATES } from '../../shared/lifecycle/hookless.js';
import type { EventPattern } from './pattern.js';

/** The construct's `hooklessLaunches` rule (infra/construct/lifecycle-events.ts) in the local bus's terms. */
export const HOOKLESS_LAUNCH_PATTERN: EventPattern = {
  source: ['aws.ec2'],
  'detail-type': [STATE_CHANGE_DETAIL_TYPE],
  detail: { state: [...HOOKLESS_LAUNCH_STATES] },
};
