import type { Logger } from '../../shared/log.js';

/**
 * An explicit undo stack: each completed step pushes how to take it back; on failure the stack runs in reverse.
 * (A deferred rollback that reads a shadowed `err` is how host-local-style plugins leak addresses.) An undo that
 * fails is logged and the rest still run; the original error is what the caller rethrows.
 */
export class UndoStack {
  private readonly steps: { readonly name: string; readonly run: () => Promise<void> | void }[] = [];

  constructor(private readonly log: Logger) {}

  push(name: string, run: () => Promise<void> | void): void {
    this.steps.push({ name, run });
  }

  get size(): number {
    return this.steps.length;
  }

  /** Forget everything (the change is complete and now owned by DEL). */
  commit(): void {
    this.steps.length = 0;
  }

  async unwind(cause: unknown): Promise<void> {
    while (this.steps.length > 0) {
      const step = this.steps.pop()!;
      try {
        await step.run();
        this.log.info('undid step', { step: step.name });
      } catch (err) {
        this.log.error('failed to undo step', { step: step.name, err, cause });
      }
    }
  }
}
