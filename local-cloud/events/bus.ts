import type { Logger } from '../../shared/log.js';
import { silentLogger } from '../../shared/log.js';
import type { BusEvent } from './event.js';
import type { EventPattern } from './pattern.js';
import { matchesPattern, validateEventPattern } from './pattern.js';

/** Where a rule sends a matching event: a queue (its body is the event JSON, as EventBridge's SQS target). */
export interface BusTarget {
  readonly id: string;
  readonly arn: string;
  deliver(eventJson: string): void;
}

export interface BusRule {
  readonly name: string;
  readonly eventPattern: EventPattern;
  readonly targets: readonly BusTarget[];
  readonly enabled?: boolean;
}

export interface BusStats {
  readonly put: number;
  readonly matched: number;
  readonly delivered: number;
  readonly failed: number;
}

/**
 * The default event bus: every event is matched against every enabled rule and delivered to each target of
 * each matching rule, once per rule (two rules with the same queue deliver twice, as EventBridge does).
 * Delivery is synchronous to the in-process queue engine; a target that throws counts as a failed invocation.
 */
export class EventBus {
  private readonly rules = new Map<string, BusRule>();
  private readonly listeners = new Set<(event: BusEvent) => void>();
  private readonly history: BusEvent[] = [];
  private stats = { put: 0, matched: 0, delivered: 0, failed: 0 };

  constructor(
    private readonly log: Logger = silentLogger,
    private readonly historyLimit = 10_000,
  ) {}

  putRule(rule: BusRule): void {
    validateEventPattern(rule.eventPattern);
    this.rules.set(rule.name, rule);
  }

  deleteRule(name: string): boolean {
    return this.rules.delete(name);
  }

  listRules(): BusRule[] {
    return [...this.rules.values()];
  }

  /** Every event put, in order (the last `historyLimit`). */
  events(): readonly BusEvent[] {
    return this.history;
  }

  getStats(): BusStats {
    return { ...this.stats };
  }

  /** Sees every event put, matched or not; returns an unsubscribe function. */
  subscribe(listener: (event: BusEvent) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  put(event: BusEvent): void {
    this.stats.put += 1;
    this.history.push(event);
    if (this.history.length > this.historyLimit) this.history.shift();
    for (const listener of this.listeners) listener(event);
    const json = JSON.stringify(event);
    for (const rule of this.rules.values()) {
      if (rule.enabled === false || !matchesPattern(rule.eventPattern, event)) continue;
      this.stats.matched += 1;
      for (const target of rule.targets) {
        try {
          target.deliver(json);
          this.stats.delivered += 1;
        } catch (err) {
          this.stats.failed += 1;
          this.log.warn('failed to deliver event to target', { rule: rule.name, target: target.arn, err });
        }
      }
    }
  }
}
