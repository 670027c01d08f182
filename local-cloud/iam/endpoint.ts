import { randomBytes, randomUUID } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { Agent, request as httpRequest } from 'node:http';
import { DescribeTableCommand, DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { instanceArn } from '../../shared/domain/arn.js';
import { partitionIdOfRegion } from '../../shared/domain/partition.js';
import type { AwsCredentials } from '../../shared/dynamo/sigv4.js';
import type { HttpListener } from '../sqs/http-listener.js';
import { listen } from '../sqs/http-listener.js';
import { evaluate } from './evaluate.js';
import type { PolicyDocument, SynthesizedNodePolicy } from './node-policy.js';
import { localizePolicy } from './node-policy.js';
import type { IamRequest, TableSchema } from './request-context.js';
import { iamRequestsOf } from './request-context.js';
import { parseAuthorization, signatureMatches } from './sigv4-verify.js';

/** A simulated instance's role session: what its IMDS hands out, bound to the instance. */
export interface InstanceSession {
  readonly instanceId: string;
  readonly instanceArn: string;
  readonly vpcId: string;
  readonly roleName: string;
  readonly credentials: Required<AwsCredentials>;
}

export interface IamDecisionRecord {
  readonly atMs: number;
  /** The instance, or `control-plane`. */
  readonly principal: string;
  readonly operation: string;
  readonly action: string;
  readonly resource: string;
  readonly allowed: boolean;
}

export interface IamEndpointOptions {
  /** dynalite's URL; every allowed request is forwarded there unchanged. */
  readonly target: string;
  readonly region: string;
  readonly accountId: string;
  readonly policy: SynthesizedNodePolicy;
  /** The lease table the node policy names; node requests to any other table are denied by the policy. */
  readonly tableName: string | undefined;
  /** The cluster VPC of the policy's `aws:SourceVpc`; else the VPC of the instance making the request. */
  readonly clusterVpcId?: () => string | undefined;
  /**
   * Access keys of the control plane (the Lambdas, tests, the operator CLI): passed through unevaluated.
   * `unissued` takes any key that IMDS did not issue and that is not shaped like a session key (ASIA…).
   */
  readonly controlPlaneKeys: 'unissued' | readonly string[];
}

const TARGET_PREFIX = 'DynamoDB_20120810.';
const MAX_DENIALS_KEPT = 10_000;
const MAX_DECISIONS_KEPT = 10_000;

function coralError(response: ServerResponse, type: string, message: string, messageKey = 'message'): void {
  const body = JSON.stringify({ __type: `com.amazon.coral.service#${type}`, [messageKey]: message });
  response.writeHead(400, {
    'content-type': 'application/x-amz-json-1.0',
    'content-length': String(Buffer.byteLength(body)),
    'x-amzn-requestid': randomUUID().replace(/-/g, '').toUpperCase(),
  });
  response.end(body);
}

/**
 * The DynamoDB endpoint of the local cloud, in front of dynalite: it verifies each request's SigV4 signature,
 * maps the access key to its principal, and evaluates every request of an instance's credentials against the
 * node policy synthesized from the construct, with `ec2:SourceInstanceARN` and `aws:SourceVpc` bound to the
 * instance the credentials were issued to. A denial is DynamoDB's own AccessDeniedException.
 */
export class IamEndpoint {
  private readonly sessions = new Map<string, InstanceSession>();
  private readonly byInstance = new Map<string, InstanceSession>();
  private readonly schemas = new Map<string, TableSchema>();
  private readonly policies = new Map<string, PolicyDocument>();
  private readonly decisions = new Map<string, boolean>();
  private readonly agent = new Agent({ keepAlive: true });
  private readonly describer: DynamoDBClient;
  private readonly listeners = new Set<(record: IamDecisionRecord) => void>();
  private listener: HttpListener | undefined;
  /** Denied node requests, oldest first (bounded). */
  readonly denials: IamDecisionRecord[] = [];
  readonly counts = { allowed: 0, denied: 0, controlPlane: 0, unauthenticated: 0 };
  /** The Region's partition: in every ARN here, and the one the policy's `${AWS::Partition}` resolves to. */
  readonly partition: string;

  constructor(private readonly options: IamEndpointOptions) {
    this.partition = partitionIdOfRegion(options.region);
    this.describer = new DynamoDBClient({
      endpoint: options.target,
      region: options.region,
      credentials: { accessKeyId: 'local', secretAccessKey: 'local' },
    });
  }

  get endpoint(): string {
    if (!this.listener) throw new Error('failed to read the IAM endpoint: not started');
    return this.listener.url;
  }

  async start(port = 0, host?: string): Promise<void> {
    // The evaluator loads its IAM data on first use (seconds under the VM's emulation): pay it here, not inside
    // the first node request's timeout.
    await evaluate(
      [{ Statement: [] }],
      `arn:${this.partition}:iam::${this.options.accountId}:root`,
      this.options.accountId,
      {
        action: 'dynamodb:GetItem',
        resource: `arn:${this.partition}:dynamodb:${this.options.region}:${this.options.accountId}:table/warm-up`,
        context: {},
      },
    );
    this.listener = await listen((request, body, response) => this.handle(request, body, response), port, host);
  }

  async close(): Promise<void> {
    await this.listener?.close();
    this.agent.destroy();
    this.describer.destroy();
  }

  /** The instance's role session, issued on first use and stable for the instance's life. */
  issue(instanceId: string, vpcId: string, roleName: string): InstanceSession {
    const existing = this.byInstance.get(instanceId);
    if (existing) return existing;
    const session: InstanceSession = {
      instanceId,
      instanceArn: instanceArn(this.options.region, this.options.accountId, instanceId, this.partition),
      vpcId,
      roleName,
      credentials: {
        accessKeyId: `ASIA${randomBytes(8).toString('hex').toUpperCase()}`,
        secretAccessKey: randomBytes(30).toString('base64'),
        sessionToken: randomBytes(96).toString('base64'),
      },
    };
    this.sessions.set(session.credentials.accessKeyId, session);
    this.byInstance.set(instanceId, session);
    return session;
  }

  /** Called for every decision on an instance's request (allowed or denied); returns an unsubscribe function. */
  onDecision(listener: (record: IamDecisionRecord) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /** The node policy as this endpoint enforces it for a VPC (the synthesized one with local values). */
  policyFor(vpcId: string): PolicyDocument {
    let policy = this.policies.get(vpcId);
    if (!policy) {
      policy = localizePolicy(this.options.policy, {
        region: this.options.region,
        accountId: this.options.accountId,
        partition: this.partition,
        // A table no request names: without a lease table the policy allows nothing.
        tableName: this.options.tableName ?? '-no-lease-table-',
        vpcId,
      });
      this.policies.set(vpcId, policy);
    }
    return policy;
  }

  private isControlPlaneKey(accessKeyId: string): boolean {
    const keys = this.options.controlPlaneKeys;
    return keys === 'unissued' ? !accessKeyId.startsWith('ASIA') : keys.includes(accessKeyId);
  }

  private async handle(request: IncomingMessage, body: Buffer, response: ServerResponse): Promise<void> {
    const auth = parseAuthorization(request.headers.authorization);
    if (!auth) {
      this.counts.unauthenticated += 1;
      coralError(response, 'MissingAuthenticationTokenException', 'Request is missing Authentication Token');
      return;
    }
    const session = this.sessions.get(auth.accessKeyId);
    if (!session) {
      if (this.isControlPlaneKey(auth.accessKeyId)) {
        this.counts.controlPlane += 1;
        this.forward(request, body, response);
        return;
      }
      this.counts.unauthenticated += 1;
      coralError(response, 'UnrecognizedClientException', 'The security token included in the request is invalid.');
      return;
    }
    const path = new URL(request.url ?? '/', 'http://local').pathname;
    const token = request.headers['x-amz-security-token'];
    if (token !== session.credentials.sessionToken) {
      this.counts.unauthenticated += 1;
      coralError(response, 'UnrecognizedClientException', 'The security token included in the request is invalid.');
      return;
    }
    if (
      auth.service !== 'dynamodb' ||
      auth.region !== this.options.region ||
      !signatureMatches(
        auth,
        { method: request.method ?? 'POST', path, headers: request.headers, body },
        session.credentials,
        Date.now(),
      )
    ) {
      this.counts.unauthenticated += 1;
      coralError(
        response,
        'InvalidSignatureException',
        'The request signature we calculated does not match the signature you provided. Check your AWS Secret Access Key and signing method. Consult the service documentation for details.',
      );
      return;
    }
    const target = request.headers['x-amz-target'];
    const operation =
      typeof target === 'string' && target.startsWith(TARGET_PREFIX) ? target.slice(TARGET_PREFIX.length) : 'Unknown';
    const denied = await this.firstDenied(session, operation, body);
    if (denied) {
      const principal = `arn:${this.partition}:sts::${this.options.accountId}:assumed-role/${session.roleName}/${session.instanceId}`;
      coralError(
        response,
        'AccessDeniedException',
        `User: ${principal} is not authorized to perform: ${denied.action} on resource: ${denied.resource} because no identity-based policy allows the ${denied.action} action`,
        'Message',
      );
      return;
    }
    this.forward(request, body, response);
  }

  /** The first of the request's authorizations the policy denies, or undefined when all are allowed. */
  private async firstDenied(
    session: InstanceSession,
    operation: string,
    body: Buffer,
  ): Promise<IamRequest | undefined> {
    const fallback: IamRequest = { action: `dynamodb:${operation}`, resource: '*', context: {} };
    let requests: IamRequest[];
    try {
      const parsed = JSON.parse(body.toString('utf8')) as Record<string, unknown>;
      requests = await iamRequestsOf(operation, parsed, {
        region: this.options.region,
        accountId: this.options.accountId,
        partition: this.partition,
        schemaOf: (table) => this.schemaOf(table),
      });
    } catch {
      // A request this endpoint cannot read is one it cannot authorize.
      requests = [];
      this.record(session, operation, fallback, false);
      return fallback;
    }
    if (requests.length === 0) requests = [fallback];
    const vpcId = this.options.clusterVpcId?.() ?? session.vpcId;
    const policy = this.policyFor(vpcId);
    for (const r of requests) {
      const context = {
        ...r.context,
        'ec2:SourceInstanceARN': session.instanceArn,
        'aws:SourceVpc': session.vpcId,
      };
      const principal = `arn:${this.partition}:sts::${this.options.accountId}:assumed-role/${session.roleName}/${session.instanceId}`;
      // Fail closed: an action the simulator cannot evaluate (PartiQL's, named by operation) is one no policy
      // grants, and IAM refuses it as AccessDenied rather than with a server error.
      const allowed = await this.decide(vpcId, policy, principal, { ...r, context }).catch(() => false);
      this.record(session, operation, r, allowed);
      if (!allowed) return r;
    }
    return undefined;
  }

  /**
   * An evaluation is a pure function of the policy and the request, so a repeated one (a node's claims all look
   * alike) is answered from memory: the emulated VM guests cannot afford iam-simulate on every request.
   */
  private async decide(vpcId: string, policy: PolicyDocument, principal: string, r: IamRequest): Promise<boolean> {
    const key = JSON.stringify([vpcId, principal, r.action, r.resource, Object.entries(r.context).sort()]);
    const known = this.decisions.get(key);
    if (known !== undefined) return known;
    const { allowed } = await evaluate([policy], principal, this.options.accountId, r);
    if (this.decisions.size >= MAX_DECISIONS_KEPT) this.decisions.clear();
    this.decisions.set(key, allowed);
    return allowed;
  }

  private record(session: InstanceSession, operation: string, r: IamRequest, allowed: boolean): void {
    const record: IamDecisionRecord = {
      atMs: Date.now(),
      principal: session.instanceId,
      operation,
      action: r.action,
      resource: r.resource,
      allowed,
    };
    if (allowed) this.counts.allowed += 1;
    else {
      this.counts.denied += 1;
      this.denials.push(record);
      if (this.denials.length > MAX_DENIALS_KEPT) this.denials.shift();
    }
    for (const l of this.listeners) l(record);
  }

  private async schemaOf(tableName: string): Promise<TableSchema | undefined> {
    const known = this.schemas.get(tableName);
    if (known) return known;
    try {
      const out = await this.describer.send(new DescribeTableCommand({ TableName: tableName }));
      const keys = (
        schema: { AttributeName?: string; KeyType?: string }[] | undefined,
      ): { partitionKey: string; sortKey?: string } => {
        const sortKey = schema?.find((k) => k.KeyType === 'RANGE')?.AttributeName;
        return {
          partitionKey: schema?.find((k) => k.KeyType === 'HASH')?.AttributeName ?? '',
          ...(sortKey ? { sortKey } : {}),
        };
      };
      const indexes = Object.fromEntries(
        [...(out.Table?.GlobalSecondaryIndexes ?? []), ...(out.Table?.LocalSecondaryIndexes ?? [])].map((i) => [
          i.IndexName ?? '',
          keys(i.KeySchema),
        ]),
      );
      const schema: TableSchema = { ...keys(out.Table?.KeySchema), indexes };
      this.schemas.set(tableName, schema);
      return schema;
    } catch {
      return undefined;
    }
  }

  private forward(request: IncomingMessage, body: Buffer, response: ServerResponse): void {
    const headers = { ...request.headers };
    delete headers.connection;
    delete headers['keep-alive'];
    const upstream = httpRequest(
      `${this.options.target}${request.url ?? '/'}`,
      { method: request.method, headers, agent: this.agent },
      (res) => {
        const out = { ...res.headers };
        delete out.connection;
        delete out['keep-alive'];
        response.writeHead(res.statusCode ?? 502, out);
        res.pipe(response);
      },
    );
    upstream.on('error', (err) => {
      if (!response.headersSent) response.writeHead(502, { 'content-type': 'text/plain' });
      response.end(`failed to reach dynalite: ${err.message}`);
    });
    upstream.end(body);
  }
}
