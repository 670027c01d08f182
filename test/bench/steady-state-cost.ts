import type { DynamoApi } from '../../shared/dynamo/api.js';
import { round } from './stats.js';

/**
 * The steady-state bench's cost model: what one hour of schedules, stream passes and pod starts consumed
 * (DynamoDB's ConsumedCapacity as dynalite computes it: 4 KB per strongly consistent read unit, half for
 * eventual, 1 KB per write unit; Query and Scan by the total size read before any filter), turned into figures
 * per node-hour and dollars per 1,000 node-months. The runner (steady-state.ts) decides what runs when.
 */
export const FUNCTION_MEMORY_GB = 0.5; // allocator.ts memorySizeMb for every control-plane function
const HOURS_PER_MONTH = 730;

/**
 * On-demand prices, us-east-1, as published on https://aws.amazon.com/dynamodb/pricing/on-demand/ (since the
 * 2024-11-01 reduction) and https://aws.amazon.com/lambda/pricing/ (x86), read 2026-12-02 from the figures
 * these pages state; this machine has no network, so they were not re-fetched.
 */
export const PRICES = {
  source: ['https://aws.amazon.com/dynamodb/pricing/on-demand/', 'https://aws.amazon.com/lambda/pricing/'],
  region: 'us-east-1',
  asOf: '2026-12-02',
  dynamoPerMillionReadUnits: 0.125,
  dynamoPerMillionWriteUnits: 0.625,
  lambdaPerMillionRequests: 0.2,
  lambdaPerGbSecond: 0.0000166667,
} as const;

const READS = new Set(['getItem', 'query', 'scan', 'batchGetItem']);

export interface Tally {
  readUnits: number;
  writeUnits: number;
  requests: number;
  invocations: number;
  handlerMs: number;
  /** Read units by kind of request (see `requestKind`): what still reads, and how much. */
  readUnitsBy: Record<string, number>;
}

export const zero = (): Tally => ({
  readUnits: 0,
  writeUnits: 0,
  requests: 0,
  invocations: 0,
  handlerMs: 0,
  readUnitsBy: {},
});

/**
 * A read's kind: the call, the index it reads, how consistent, and for a GetItem the item's sort key up to
 * its first `#` (`node`, `pool-sweep`, `drift-seen#`, …) — the bench's names, not DynamoDB's.
 */
function requestKind(call: string, input: Record<string, unknown>): string {
  const sortKey = (input['Key'] as { sk?: { S?: string } } | undefined)?.sk?.S;
  return [
    call,
    input['IndexName'] ? `index ${String(input['IndexName'])}` : undefined,
    input['ConsistentRead'] === true ? 'consistent' : 'eventual',
    input['Select'] === 'COUNT' ? 'COUNT' : undefined,
    sortKey ? `item ${sortKey.replace(/#.*/, '#')}` : undefined,
  ]
    .filter((part) => part !== undefined)
    .join(' ');
}

/** A DynamoApi that asks for ConsumedCapacity on every call and adds it to `into.current`. */
export function meteredApi(api: DynamoApi, into: { current: Tally | undefined }): DynamoApi {
  return new Proxy(api, {
    get(target, prop, receiver) {
      const fn = Reflect.get(target, prop, receiver) as unknown;
      if (typeof fn !== 'function') return fn;
      return async (input: Record<string, unknown>) => {
        const out = (await (fn as (i: unknown) => Promise<Record<string, unknown>>).call(target, {
          ...input,
          ReturnConsumedCapacity: 'TOTAL',
        })) as { ConsumedCapacity?: { CapacityUnits?: number } | { CapacityUnits?: number }[] };
        const tally = into.current;
        if (tally) {
          const list = Array.isArray(out.ConsumedCapacity) ? out.ConsumedCapacity : [out.ConsumedCapacity ?? {}];
          const units = list.reduce((s, c) => s + (c.CapacityUnits ?? 0), 0);
          tally.requests += 1;
          if (READS.has(String(prop))) {
            tally.readUnits += units;
            const kind = requestKind(String(prop), input);
            tally.readUnitsBy[kind] = (tally.readUnitsBy[kind] ?? 0) + units;
          } else tally.writeUnits += units;
        }
        return out;
      };
    },
  });
}

export type PartName = 'poolSchedule' | 'reconciler' | 'stream' | 'pods';
export type Parts = Record<PartName, Tally>;

/** `t` with every figure times `f` (runs not executed, extrapolated from the executed ones' mean). */
export function scaleTally(t: Tally, f: number, invocations = t.invocations * f): Tally {
  return {
    readUnits: t.readUnits * f,
    writeUnits: t.writeUnits * f,
    requests: t.requests * f,
    invocations,
    handlerMs: t.handlerMs * f,
    readUnitsBy: Object.fromEntries(Object.entries(t.readUnitsBy).map(([k, v]) => [k, v * f])),
  };
}

/** a·wa + b·wb, figure by figure. */
function mix(a: Tally, wa: number, b: Tally, wb: number): Tally {
  const by: Record<string, number> = {};
  for (const [k, v] of Object.entries(a.readUnitsBy)) by[k] = (by[k] ?? 0) + v * wa;
  for (const [k, v] of Object.entries(b.readUnitsBy)) by[k] = (by[k] ?? 0) + v * wb;
  return {
    readUnits: a.readUnits * wa + b.readUnits * wb,
    writeUnits: a.writeUnits * wa + b.writeUnits * wb,
    requests: a.requests * wa + b.requests * wb,
    invocations: a.invocations * wa + b.invocations * wb,
    handlerMs: a.handlerMs * wa + b.handlerMs * wb,
    readUnitsBy: by,
  };
}

const sum = (ts: Tally[]): Tally => ts.reduce((s, t) => mix(s, 1, t, 1), zero());

/** The hour's figures per node, by part and in total; reads also by kind of request (largest first). */
export function perNodeHourTable(parts: Parts, nodes: number) {
  const perNode = (t: Tally) => ({
    dynamoReadUnits: round(t.readUnits / nodes, 3),
    dynamoWriteUnits: round(t.writeUnits / nodes, 3),
    dynamoRequests: round(t.requests / nodes, 3),
    lambdaInvocations: round(t.invocations / nodes, 4),
    lambdaGbSeconds: round(((t.handlerMs / 1000) * FUNCTION_MEMORY_GB) / nodes, 4),
  });
  const total = sum(Object.values(parts));
  return {
    total: perNode(total),
    ...Object.fromEntries(Object.entries(parts).map(([k, t]) => [k, perNode(t)])),
    readUnitsByRequest: Object.fromEntries(
      Object.entries(total.readUnitsBy)
        .sort(([, a], [, b]) => b - a)
        .map(([k, v]) => [k, round(v / nodes, 4)]),
    ),
  };
}

/**
 * A day's mean hour: one hour like the first (the daily full cycles and stray Scan, which recur once a day)
 * and 23 like the steady one.
 */
export function dayMean(steady: Parts, first: Parts): Parts {
  const day = (k: PartName): Tally => mix(first[k], 1 / 24, steady[k], 23 / 24);
  return { poolSchedule: day('poolSchedule'), reconciler: day('reconciler'), stream: day('stream'), pods: day('pods') };
}

/** Dollars per 1,000 node-months at PRICES for an hour's consumption by `nodes` nodes. */
export function dollarsPer1000NodeMonths(parts: Parts, nodes: number) {
  const total = sum(Object.values(parts));
  const nodeMonths = (x: number): number => (x / nodes) * HOURS_PER_MONTH * 1000;
  const dollars = {
    dynamoReads: round((nodeMonths(total.readUnits) / 1e6) * PRICES.dynamoPerMillionReadUnits, 2),
    dynamoWrites: round((nodeMonths(total.writeUnits) / 1e6) * PRICES.dynamoPerMillionWriteUnits, 2),
    lambdaRequests: round((nodeMonths(total.invocations) / 1e6) * PRICES.lambdaPerMillionRequests, 2),
    lambdaCompute: round(nodeMonths((total.handlerMs / 1000) * FUNCTION_MEMORY_GB) * PRICES.lambdaPerGbSecond, 2),
  };
  return {
    ...dollars,
    total: round(
      Object.values(dollars).reduce((s, x) => s + x, 0),
      2,
    ),
    prices: PRICES,
  };
}
