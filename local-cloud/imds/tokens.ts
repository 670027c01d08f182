import { randomBytes } from 'node:crypto';
import type { SimScheduler } from '../events/scheduler.js';

/** IMDSv2 session tokens of one instance: opaque strings valid for their TTL (1–21600 s, simulated). */
export class ImdsTokens {
  private readonly expiresAtMs = new Map<string, number>();

  constructor(private readonly scheduler: SimScheduler) {}

  issue(ttlS: number): string {
    this.sweep();
    const token = `AQAEA${randomBytes(42).toString('base64url')}==`;
    this.expiresAtMs.set(token, this.scheduler.clock.nowMs() + this.scheduler.realMs(ttlS * 1000));
    return token;
  }

  /** Remaining simulated seconds, or undefined when the token is unknown or expired. */
  remainingS(token: string): number | undefined {
    const expiresAtMs = this.expiresAtMs.get(token);
    const leftMs = expiresAtMs === undefined ? -1 : expiresAtMs - this.scheduler.clock.nowMs();
    if (leftMs <= 0) {
      this.expiresAtMs.delete(token);
      return undefined;
    }
    return this.scheduler.timeScale === 0 ? 21_600 : Math.ceil(leftMs / this.scheduler.timeScale / 1000);
  }

  private sweep(): void {
    const now = this.scheduler.clock.nowMs();
    for (const [token, expiresAtMs] of this.expiresAtMs) if (expiresAtMs <= now) this.expiresAtMs.delete(token);
  }
}
