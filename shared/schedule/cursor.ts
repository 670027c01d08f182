import type { DynamoApi } from '../dynamo/api.js';
import { isConditionalCheckFailed } from '../dynamo/errors.js';
import type { NodeCursor } from '../lease-store/port.js';
import { TABLE_KEYS } from '../lease-store/table.js';

/**
 * Where a paced schedule stands in its walk of the node index: the cycle's start, the next page (absent once
 * the cycle is done) and how many cycles have started. Kept between runs, so a run that meets its deadline
 * hands the rest of the cycle to the next one instead of starting over.
 */
export interface SweepState {
  readonly cycleStartedAtMs: number;
  readonly position?: NodeCursor;
  readonly cycles: number;
}

export interface StoredSweepState<S = SweepState> {
  readonly state: S;
  readonly version: number;
}

/** A versioned JSON state per schedule name; `S` is the walk's state (SweepState) unless a schedule keeps its own. */
export interface SweepCursorStore {
  /**
   * Consistent unless `eventual`: half the read units, for states read long after their last save (a stale
   * read only makes the conditional save refuse).
   */
  load<S = SweepState>(name: string, read?: { eventual?: boolean }): Promise<StoredSweepState<S> | undefined>;
  /** Writes if the stored version is still `expectedVersion` (0: none yet); false when another run moved it. */
  save<S = SweepState>(name: string, state: S, expectedVersion: number): Promise<boolean>;
}

/** The control plane's own partition for schedule cursors: no node's `dynamodb:LeadingKeys` can name it. */
export const SCHEDULES_PARTITION = 'vpc-lease#schedules';

export class DynamoSweepCursorStore implements SweepCursorStore {
  constructor(
    private readonly api: DynamoApi,
    private readonly tableName: string,
  ) {}

  private key(name: string) {
    return { [TABLE_KEYS.partitionKey]: { S: SCHEDULES_PARTITION }, [TABLE_KEYS.sortKey]: { S: name } };
  }

  async load<S = SweepState>(
    name: string,
    read: { eventual?: boolean } = {},
  ): Promise<StoredSweepState<S> | undefined> {
    const out = await this.api.getItem({
      TableName: this.tableName,
      Key: this.key(name),
      ConsistentRead: read.eventual !== true,
    });
    const json = out.Item?.['state']?.S;
    const version = Number(out.Item?.['v']?.N);
    if (json === undefined || !Number.isSafeInteger(version)) return undefined;
    return { state: JSON.parse(json) as S, version };
  }

  async save<S = SweepState>(name: string, state: S, expectedVersion: number): Promise<boolean> {
    try {
      await this.api.putItem({
        TableName: this.tableName,
        Item: { ...this.key(name), state: { S: JSON.stringify(state) }, v: { N: String(expectedVersion + 1) } },
        ConditionExpression: expectedVersion === 0 ? 'attribute_not_exists(v)' : 'v = :expected',
        ...(expectedVersion === 0
          ? {}
          : { ExpressionAttributeValues: { ':expected': { N: String(expectedVersion) } } }),
      });
      return true;
    } catch (err) {
      if (isConditionalCheckFailed(err)) return false;
      throw err;
    }
  }
}
