import { createSocket } from 'node:dgram';
import { createServer } from 'node:http';
import { connect, createServer as createTcpServer } from 'node:net';

/**
 * Workloads that busybox cannot play, run as `node guest.mjs agent <kind> <name>` inside a namespace:
 * - `web`: HTTP on :8080 — `/` answers "<name> <client address>", `/big` sends 256 KiB, POST `/sink` answers
 *   the byte count (the outside host: NAT, path MTU);
 * - `dns`: a DNS server on UDP :53 answering every A query with DNS_ANSWER (the cluster DNS backend).
 */
export const DNS_ANSWER = '10.77.254.254';
export const BIG_BYTES = 256 * 1024;

function dnsReply(query: Buffer): Buffer | undefined {
  if (query.length < 12) return undefined;
  let off = 12;
  while (off < query.length && query[off] !== 0) off += query[off]! + 1;
  const questionEnd = off + 5;
  if (questionEnd > query.length) return undefined;
  const qtype = query.readUInt16BE(off + 1);
  const header = Buffer.from(query.subarray(0, 12));
  header.writeUInt16BE(0x8180, 2); // response, recursion desired + available, no error
  header.writeUInt16BE(1, 4);
  header.writeUInt16BE(qtype === 1 ? 1 : 0, 6);
  header.writeUInt32BE(0, 8);
  const question = query.subarray(12, questionEnd);
  if (qtype !== 1) return Buffer.concat([header, question]);
  const answer = Buffer.alloc(16);
  answer.writeUInt16BE(0xc00c, 0);
  answer.writeUInt16BE(1, 2);
  answer.writeUInt16BE(1, 4);
  answer.writeUInt32BE(60, 6);
  answer.writeUInt16BE(4, 10);
  Buffer.from(DNS_ANSWER.split('.').map(Number)).copy(answer, 12);
  return Buffer.concat([header, question, answer]);
}

/** The port the fabric's DynamoDB listens on, and each node's loopback relay to it. */
export const DYNAMO_PORT = 8000;

export function runAgent(kind: string, name: string): void {
  if (kind === 'relay') {
    // The plugin speaks plain http only to loopback (credentials): the node's loopback relays to the fabric.
    createTcpServer((client) => {
      const upstream = connect(DYNAMO_PORT, name);
      client.pipe(upstream).pipe(client);
      const drop = (): void => {
        client.destroy();
        upstream.destroy();
      };
      client.on('error', drop);
      upstream.on('error', drop);
    }).listen(DYNAMO_PORT, '127.0.0.1', () => console.log('ready'));
    return;
  }
  if (kind === 'dns') {
    const socket = createSocket('udp4');
    socket.on('message', (msg, from) => {
      const reply = dnsReply(msg);
      if (reply) socket.send(reply, from.port, from.address);
    });
    socket.bind(53, '0.0.0.0', () => console.log('ready'));
    return;
  }
  const big = Buffer.alloc(BIG_BYTES, 0x61);
  // '::' takes both families: the outside host answers IPv6 pods too (through the egress-only gateway).
  createServer((req, res) => {
    const client = (req.socket.remoteAddress ?? '').replace(/^::ffff:/, '');
    if (req.method === 'POST') {
      let n = 0;
      req.on('data', (c: Buffer) => {
        n += c.length;
      });
      req.on('end', () => res.end(`got ${n}\n`));
      return;
    }
    if (req.url === '/big') return void res.end(big);
    res.end(`${name} ${client}\n`);
  }).listen(8080, '::', () => console.log('ready'));
}
