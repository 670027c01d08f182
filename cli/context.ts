import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { EC2Client } from '@aws-sdk/client-ec2';
import { SQSClient } from '@aws-sdk/client-sqs';
import { SdkDynamoApi } from '../shared/dynamo/sdk-client.js';
import { EC2_CLIENT_DEFAULTS, SdkEc2 } from '../shared/ec2/sdk-ec2.js';
import { DynamoLeaseStore } from '../shared/lease-store/dynamo-lease-store.js';
import type { LeaseStore } from '../shared/lease-store/port.js';
import { silentLogger } from '../shared/log.js';
import { Metrics } from '../shared/metrics.js';
import { DynamoLeasePartitions, type LeasePartitions } from '../shared/reconcile/lease-partitions.js';
import { type BackfillReport, backfillNodeIndex } from '../shared/schedule/node-index-backfill.js';
import type { AwsErrorContext } from './errors.js';
import { defaultLocalDir, type LocalState, readLocalState } from './local-state.js';

/** Options every command accepts. */
export interface GlobalOptions {
  readonly json: boolean;
  readonly region?: string;
  readonly table?: string;
  readonly cluster?: string;
  readonly local: boolean;
  readonly localDir?: string;
}

export interface Io {
  readonly out: (text: string) => void;
  readonly err: (text: string) => void;
  readonly env: NodeJS.ProcessEnv;
}

/**
 * Where a command's clients point: AWS through the standard credential chain and Region resolution (and the
 * SDK's own AWS_ENDPOINT_URL_* variables), or with --local the running local cloud of the state file. Clients
 * are built on first use, so `limits` and `max-pods` never need credentials.
 */
export class CliContext {
  readonly local: LocalState | undefined;
  readonly tableName: string;
  readonly clusterName: string;
  readonly region: string | undefined;
  readonly metrics = new Metrics(silentLogger, 'cli');
  private clients: { destroy(): void }[] = [];
  private dynamoInstance: SdkDynamoApi | undefined;
  private storeInstance: LeaseStore | undefined;
  private ec2Instance: SdkEc2 | undefined;
  private sqsInstance: SQSClient | undefined;

  constructor(
    readonly options: GlobalOptions,
    readonly io: Io,
  ) {
    this.local = options.local ? readLocalState(options.localDir ?? defaultLocalDir(io.env)) : undefined;
    this.tableName = options.table ?? this.local?.tableName ?? io.env['VPC_LEASE_TABLE'] ?? 'vpc-lease';
    this.clusterName = options.cluster ?? this.local?.clusterName ?? io.env['VPC_LEASE_CLUSTER_NAME'] ?? 'vpc-lease';
    this.region = options.region ?? this.local?.region ?? io.env['AWS_REGION'] ?? io.env['AWS_DEFAULT_REGION'];
  }

  get errorContext(): AwsErrorContext {
    return { region: this.region, tableName: this.tableName, local: this.local !== undefined };
  }

  private config(service: 'ec2' | 'dynamodb' | 'sqs'): Record<string, unknown> {
    const base: Record<string, unknown> = this.region ? { region: this.region } : {};
    if (!this.local) return base;
    return {
      ...base,
      endpoint: this.local.endpoints[service],
      // The local cloud checks no signature; fixed dummy keys keep the SDK from searching the credential chain.
      credentials: { accessKeyId: 'local', secretAccessKey: 'local' },
    };
  }

  private dynamo(): SdkDynamoApi {
    if (!this.dynamoInstance) {
      const client = new DynamoDBClient({ maxAttempts: 3, ...this.config('dynamodb') });
      this.clients.push(client);
      this.dynamoInstance = new SdkDynamoApi(client);
    }
    return this.dynamoInstance;
  }

  store(): LeaseStore {
    this.storeInstance ??= new DynamoLeaseStore({ api: this.dynamo(), tableName: this.tableName });
    return this.storeInstance;
  }

  /** `migrate node-index`: the one-time backfill of the node index key (a Scan of the table). */
  backfillNodeIndex(): Promise<BackfillReport> {
    return backfillNodeIndex(this.dynamo(), this.tableName);
  }

  /** The reconciler's search for lease partitions no node item stands for (`gc` only: it scans the table). */
  leasePartitions(): LeasePartitions {
    return new DynamoLeasePartitions(this.dynamo(), this.tableName);
  }

  ec2(): SdkEc2 {
    if (!this.ec2Instance) {
      const client = new EC2Client({ ...EC2_CLIENT_DEFAULTS, maxAttempts: 3, ...this.config('ec2') });
      this.clients.push(client);
      this.ec2Instance = new SdkEc2({ client, metrics: this.metrics });
    }
    return this.ec2Instance;
  }

  sqs(): SQSClient {
    if (!this.sqsInstance) {
      this.sqsInstance = new SQSClient({ maxAttempts: 3, ...this.config('sqs') });
      this.clients.push(this.sqsInstance);
    }
    return this.sqsInstance;
  }

  destroy(): void {
    for (const c of this.clients.splice(0)) c.destroy();
  }
}
