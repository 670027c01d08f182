import { createServer, type RequestListener, type Server } from 'node:http';
import type { AwsCredentials } from '../../../shared/dynamo/sigv4.js';
import { type FabricNode, IMDS_IP, IMDS_IP6, ownerOf } from '../topology.js';

/**
 * The IMDS stand-in at 169.254.169.254:80 and [fd00:ec2::254]:80 (Nitro's IPv6 endpoint) on the fabric. Like EC2's, it answers any address assigned to one of
 * the instance's ENIs (pods' addresses included — which is why the datapath must keep pods away from it) and
 * tells instances apart by the ENI that owns the source address. It serves IMDSv2 tokens, the identity
 * document and the instance's role session (which the IAM-enforcing endpoint knows); every request is logged
 * with its source. `GET /fabric-probe/<nonce>` is answered to anyone, token or not, so a cell's probe that gets
 * through is answered and logged whatever address it arrives from.
 */
export const PROBE_PATH = '/fabric-probe/';

export interface FabricImds {
  /** "source method path" of every request. */
  readonly requests: string[];
  close(): Promise<void>;
}

export async function startFabricImds(
  nodes: readonly FabricNode[],
  sessionFor: (instanceId: string) => Required<AwsCredentials>,
): Promise<FabricImds> {
  const requests: string[] = [];
  const handler: RequestListener = (req, res) => {
    const source = (req.socket.remoteAddress ?? '').replace(/^::ffff:/, '');
    requests.push(`${source} ${req.method} ${req.url}`);
    if (req.method === 'GET' && req.url?.startsWith(PROBE_PATH))
      return void res.writeHead(200).end(`probe ${req.url.slice(PROBE_PATH.length)} from ${source}\n`);
    const eni = ownerOf(nodes, source);
    const node = nodes.find((n) => n.name === eni?.node);
    if (!node) return void res.writeHead(403).end();
    const token = `tok-${node.instanceId}`;
    if (req.method === 'PUT' && req.url === '/latest/api/token') return void res.writeHead(200).end(token);
    if (req.headers['x-aws-ec2-metadata-token'] !== token) return void res.writeHead(401).end();
    if (req.url === '/latest/dynamic/instance-identity/document')
      return void res.writeHead(200, { 'content-type': 'application/json' }).end(
        JSON.stringify({
          instanceId: node.instanceId,
          region: 'us-east-1',
          accountId: '123456789012',
          availabilityZone: 'us-east-1a',
          instanceType: 'm5.large',
          privateIp: node.bootIp,
        }),
      );
    if (req.url === '/latest/meta-data/iam/security-credentials/') return void res.writeHead(200).end('node-role');
    if (req.url === '/latest/meta-data/iam/security-credentials/node-role') {
      const session = sessionFor(node.instanceId);
      return void res.writeHead(200).end(
        JSON.stringify({
          Code: 'Success',
          AccessKeyId: session.accessKeyId,
          SecretAccessKey: session.secretAccessKey,
          Token: session.sessionToken,
          Expiration: new Date(Date.now() + 6 * 3600_000).toISOString(),
        }),
      );
    }
    res.writeHead(404).end();
  };
  const servers: Server[] = [];
  for (const address of [IMDS_IP, IMDS_IP6]) {
    const server = createServer(handler);
    servers.push(server);
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(80, address, () => resolve());
    });
  }
  return {
    requests,
    close: async () => {
      for (const server of servers)
        await new Promise<void>((resolve) => {
          server.closeAllConnections();
          server.close(() => resolve());
        });
    },
  };
}
