import type { ChaosSchedule } from './schedule.js';

/** One line naming a schedule's faults, for the chaos log. */
export function describeSchedule(s: ChaosSchedule): string {
  const faults = [
    s.ec2Faults.length > 0
      ? `ec2 ${s.ec2Faults.map((f) => `${f.action}:${f.code}@${f.probability}${f.phase === 'after' ? '/lost' : ''}`).join(',')}`
      : '',
    s.throttleStorm ? 'throttle-storm' : '',
    s.eventualConsistencyMs ? `ec ${s.eventualConsistencyMs}ms` : '',
    s.crashProbability ? `crash ${s.crashProbability}` : '',
    s.duplicateRate ? `dup ${s.duplicateRate}` : '',
    s.replayLateEvents ? 'late' : '',
    s.dynamoThrottleRate ? `ddb-throttle ${s.dynamoThrottleRate}` : '',
    s.terminateMidProvisioning ? 'terminate-mid' : '',
    s.shortHookTimeoutS ? 'hook-timeout' : '',
    s.scaleInAtEnd ? 'scale-in' : '',
    s.hookless ? 'hookless' : '',
    s.fillSubnets ? `fill-subnet ${s.fillSubnets}` : '',
  ].filter(Boolean);
  return `${s.instances}×${s.instanceType}${s.prefixDelegation ? ' pd' : ''} [${faults.join('; ')}]`;
}
