import type { StoredSweepState, SweepCursorStore, SweepState } from '../../shared/schedule/cursor.js';

/** The sweep cursor store's contract in memory. */
export class MemorySweepCursorStore implements SweepCursorStore {
  readonly saved = new Map<string, StoredSweepState<unknown>>();

  async load<S = SweepState>(name: string): Promise<StoredSweepState<S> | undefined> {
    return this.saved.get(name) as StoredSweepState<S> | undefined;
  }

  async save<S = SweepState>(name: string, state: S, expectedVersion: number): Promise<boolean> {
    if ((this.saved.get(name)?.version ?? 0) !== expectedVersion) return false;
    this.saved.set(name, { state: structuredClone(state), version: expectedVersion + 1 });
    return true;
  }
}
