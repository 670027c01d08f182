import { createSdkDynamoApi } from '../../shared/dynamo/sdk-client.js';
import { DynamoLeaseStore } from '../../shared/lease-store/dynamo-lease-store.js';
import type { LeaseStore } from '../../shared/lease-store/port.js';
import { type ControlPlaneCloud, TABLE } from '../bench/control-plane-cloud.js';

/** The harness's read-only view of the table, and the client to close when the schedule ends. */
export interface Observer {
  readonly store: LeaseStore;
  close(): void;
}

/**
 * The chaos harness's own reads of the table (node phases while it waits, the facts it checks and writes to a
 * trail) go to dynalite directly, past the proxy that throttles the control plane's DynamoDB requests: those
 * faults are aimed at the system under test. Read through the proxy, a throttled read that outlasts the SDK's
 * four attempts ends the schedule as a failure of the harness itself; the harness polls every 25 ms while a
 * hook-less fleet provisions, and a loaded machine stretches that window, so such a read becomes likely.
 */
export function observerOf(c: ControlPlaneCloud): Observer {
  const api = createSdkDynamoApi({ endpoint: c.cloud.endpoints.dynamodbDirect });
  return { store: new DynamoLeaseStore({ api, tableName: TABLE }), close: () => api.client.destroy() };
}
