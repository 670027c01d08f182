import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

/**
 * A small IMDSv2 stand-in for one instance (token PUT, identity document, role credentials), counting requests
 * so tests can see the disk cache at work. The local cloud's IMDS (local-cloud/imds) serves the same paths.
 */
export interface FakeImds {
  readonly endpoint: string;
  readonly instanceId: string;
  readonly requests: string[];
  /** Make every request fail with HTTP 500 (IMDS outage). */
  failing: boolean;
  close(): Promise<void>;
}

/** A role session as IMDS hands it out; the default is one no endpoint checks (plain dynalite). */
export interface ImdsCredentials {
  readonly accessKeyId: string;
  readonly secretAccessKey: string;
  readonly sessionToken: string;
}

const UNCHECKED: ImdsCredentials = { accessKeyId: 'AKIDNODE', secretAccessKey: 'secret', sessionToken: 'session' };

export async function startFakeImds(
  instanceId: string,
  region = 'us-east-1',
  accountId = '123456789012',
  credentials: ImdsCredentials = UNCHECKED,
  /** What `services/partition` answers; absent, the path is a 404 (an IMDS stand-in without it). */
  partition?: string,
): Promise<FakeImds> {
  const requests: string[] = [];
  const state = { failing: false };
  const token = `tok-${instanceId}`;
  const server: Server = createServer((req, res) => {
    requests.push(`${req.method} ${req.url}`);
    if (state.failing) {
      res.writeHead(500).end();
      return;
    }
    if (req.method === 'PUT' && req.url === '/latest/api/token') {
      if (!req.headers['x-aws-ec2-metadata-token-ttl-seconds']) return void res.writeHead(400).end();
      return void res.writeHead(200).end(token);
    }
    if (req.headers['x-aws-ec2-metadata-token'] !== token) return void res.writeHead(401).end();
    if (req.url === '/latest/dynamic/instance-identity/document') {
      return void res
        .writeHead(200, { 'content-type': 'application/json' })
        .end(
          JSON.stringify({ instanceId, region, accountId, availabilityZone: `${region}a`, instanceType: 'm5.large' }),
        );
    }
    if (req.url === '/latest/meta-data/instance-type') return void res.writeHead(200).end('m5.large');
    if (req.url === '/latest/meta-data/services/partition' && partition) return void res.writeHead(200).end(partition);
    if (req.url === '/latest/meta-data/iam/security-credentials/') return void res.writeHead(200).end('node-role');
    if (req.url === '/latest/meta-data/iam/security-credentials/node-role') {
      return void res.writeHead(200).end(
        JSON.stringify({
          Code: 'Success',
          AccessKeyId: credentials.accessKeyId,
          SecretAccessKey: credentials.secretAccessKey,
          Token: credentials.sessionToken,
          Expiration: new Date(Date.now() + 6 * 3600_000).toISOString(),
        }),
      );
    }
    res.writeHead(404).end();
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    endpoint: `http://127.0.0.1:${port}`,
    instanceId,
    requests,
    get failing() {
      return state.failing;
    },
    set failing(value: boolean) {
      state.failing = value;
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
