import { INSTANCE_TYPE_PATTERN } from '../../shared/domain/instance-types.js';
import { isPartition, partitionOfRegion } from '../../shared/domain/partition.js';
import { errorMessage, VpcLeaseError } from '../../shared/errors.js';
import { httpCall } from './http.js';

export const DEFAULT_IMDS_ENDPOINT = 'http://169.254.169.254';

/** IMDS could not be reached or answered with an error: the node cannot know who it is right now. */
export class ImdsError extends VpcLeaseError {}

export interface IdentityDocument {
  readonly instanceId: string;
  readonly region: string;
  readonly accountId: string;
  readonly availabilityZone: string;
  readonly instanceType?: string;
}

export interface AwsCredentials {
  readonly accessKeyId: string;
  readonly secretAccessKey: string;
  readonly sessionToken?: string;
  readonly expirationMs?: number;
}

/** IMDSv2 only: a PUT for a session token first, then GETs carrying it (v1 is off on hardened instances). */
export class ImdsClient {
  private token?: string;

  constructor(
    readonly endpoint: string,
    private readonly timeoutMs: number,
  ) {}

  private url(path: string): string {
    return `${this.endpoint.replace(/\/$/, '')}${path}`;
  }

  private async sessionToken(): Promise<string> {
    if (this.token) return this.token;
    const res = await httpCall(
      'PUT',
      this.url('/latest/api/token'),
      { 'x-aws-ec2-metadata-token-ttl-seconds': '60' },
      this.timeoutMs,
    ).catch((err: unknown) => {
      throw new ImdsError(`failed to get an IMDS token from ${this.endpoint}: ${errorMessage(err)}`, { cause: err });
    });
    if (res.status !== 200)
      throw new ImdsError(`failed to get an IMDS token from ${this.endpoint}: HTTP ${res.status}`);
    this.token = res.body.trim();
    return this.token;
  }

  async get(path: string): Promise<string> {
    const body = await this.getIfPresent(path);
    if (body === undefined) throw new ImdsError(`failed to read IMDS ${path}: HTTP 404`);
    return body;
  }

  /** Like get, but undefined when IMDS has no such path (HTTP 404) rather than an error. */
  async getIfPresent(path: string): Promise<string | undefined> {
    const token = await this.sessionToken();
    const res = await httpCall('GET', this.url(path), { 'x-aws-ec2-metadata-token': token }, this.timeoutMs).catch(
      (err: unknown) => {
        throw new ImdsError(`failed to read IMDS ${path}: ${errorMessage(err)}`, { cause: err });
      },
    );
    if (res.status === 404) return undefined;
    if (res.status !== 200) throw new ImdsError(`failed to read IMDS ${path}: HTTP ${res.status}`);
    return res.body;
  }

  /**
   * The partition the instance runs in (`aws`, `aws-cn`, `aws-us-gov`, …): IMDS says so; an IMDS without the
   * path (a stand-in) leaves it to the Region, whose name fixes its partition.
   */
  async partition(region: string): Promise<string> {
    const answered = (await this.getIfPresent('/latest/meta-data/services/partition'))?.trim();
    const partition = answered || partitionOfRegion(region)?.id;
    if (!partition || !isPartition(partition))
      throw new ImdsError(
        `failed to tell the partition of ${region}: IMDS answered ${JSON.stringify(answered ?? null)}`,
      );
    return partition;
  }

  async identityDocument(): Promise<IdentityDocument> {
    const raw = await this.get('/latest/dynamic/instance-identity/document');
    let doc: Record<string, unknown>;
    try {
      doc = JSON.parse(raw) as Record<string, unknown>;
    } catch (err) {
      throw new ImdsError(`failed to parse the instance identity document: ${errorMessage(err)}`, { cause: err });
    }
    const str = (k: string): string => {
      const v = doc[k];
      if (typeof v !== 'string' || v === '') throw new ImdsError(`the instance identity document has no ${k}`);
      return v;
    };
    return {
      instanceId: str('instanceId'),
      region: str('region'),
      accountId: str('accountId'),
      availabilityZone: str('availabilityZone'),
      ...(typeof doc['instanceType'] === 'string' ? { instanceType: doc['instanceType'] } : {}),
    };
  }

  /** The instance's type (m5.large): what its network limits, and so its max-pods, follow from. */
  async instanceType(): Promise<string> {
    const type = (await this.get('/latest/meta-data/instance-type')).trim();
    if (!INSTANCE_TYPE_PATTERN.test(type))
      throw new ImdsError(`IMDS instance-type is not one: ${JSON.stringify(type)}`);
    return type;
  }

  /** The instance profile's temporary credentials (the first role listed). */
  async roleCredentials(): Promise<AwsCredentials> {
    const roles = (await this.get('/latest/meta-data/iam/security-credentials/')).split('\n').filter(Boolean);
    const role = roles[0];
    if (!role) throw new ImdsError('the instance has no IAM role');
    const raw = JSON.parse(await this.get(`/latest/meta-data/iam/security-credentials/${role}`)) as Record<
      string,
      unknown
    >;
    if (raw['Code'] !== undefined && raw['Code'] !== 'Success')
      throw new ImdsError(`IMDS credentials for ${role}: ${String(raw['Code'])}`);
    if (typeof raw['AccessKeyId'] !== 'string' || typeof raw['SecretAccessKey'] !== 'string')
      throw new ImdsError(`IMDS credentials for ${role} are incomplete`);
    const expiration = typeof raw['Expiration'] === 'string' ? Date.parse(raw['Expiration']) : Number.NaN;
    return {
      accessKeyId: raw['AccessKeyId'],
      secretAccessKey: raw['SecretAccessKey'],
      ...(typeof raw['Token'] === 'string' ? { sessionToken: raw['Token'] } : {}),
      ...(Number.isFinite(expiration) ? { expirationMs: expiration } : {}),
    };
  }
}
