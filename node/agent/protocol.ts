/**
 * The shim ↔ agent wire format (node/shim/shim.c is the other side). A request is the whole CNI invocation as the
 * runtime made it: "VLA1", u32le env bytes, env as "K=V\0"…, u32le stdin bytes, stdin. The agent answers one byte,
 * 'A' (accepted: the shim now waits for the answer) or 'R' (refused: the shim runs the full plugin), then the
 * plugin's exit code (u8), u32le stdout bytes and stdout.
 */
export const REQUEST_MAGIC = Buffer.from('VLA1', 'latin1');
export const ACCEPTED = 0x41; // 'A'
export const REFUSED = 0x52; // 'R'
/** The shim never sends more (it runs the plugin itself instead); anything larger is not a shim. */
export const MAX_FRAME_BYTES = 1 << 20;

/** Where the agent listens and the shim connects: a root-only directory on the host that no pod mounts. */
export const AGENT_SOCKET_PATH = '/run/vpc-lease/agent.sock';

export interface AgentRequest {
  readonly env: Record<string, string>;
  readonly stdin: string;
}

export class FrameError extends Error {}

/**
 * Decodes a request from what has arrived so far: undefined while incomplete.
 * @throws FrameError when the bytes are not a shim's request.
 */
export function decodeRequest(buf: Buffer): AgentRequest | undefined {
  if (buf.length >= 4 && !buf.subarray(0, 4).equals(REQUEST_MAGIC))
    throw new FrameError('not a vpc-lease shim request');
  if (buf.length < 8) return undefined;
  const envBytes = buf.readUInt32LE(4);
  if (envBytes > MAX_FRAME_BYTES) throw new FrameError(`environment of ${envBytes} bytes`);
  if (buf.length < 12 + envBytes) return undefined;
  const stdinBytes = buf.readUInt32LE(8 + envBytes);
  if (envBytes + stdinBytes > MAX_FRAME_BYTES) throw new FrameError(`request of ${envBytes + stdinBytes} bytes`);
  const end = 12 + envBytes + stdinBytes;
  if (buf.length < end) return undefined;
  if (buf.length > end) throw new FrameError('bytes after the request');
  const env: Record<string, string> = {};
  for (const entry of buf
    .subarray(8, 8 + envBytes)
    .toString('utf8')
    .split('\0')) {
    const eq = entry.indexOf('=');
    if (eq > 0) env[entry.slice(0, eq)] = entry.slice(eq + 1);
  }
  return { env, stdin: buf.subarray(12 + envBytes, end).toString('utf8') };
}

/** The request as the shim sends it (tests and the bench drive the agent without the shim with it too). */
export function encodeRequest(request: AgentRequest): Buffer {
  const env = Buffer.from(
    Object.entries(request.env)
      .map(([k, v]) => `${k}=${v}\0`)
      .join(''),
    'utf8',
  );
  const stdin = Buffer.from(request.stdin, 'utf8');
  const head = Buffer.alloc(8);
  REQUEST_MAGIC.copy(head);
  head.writeUInt32LE(env.length, 4);
  const mid = Buffer.alloc(4);
  mid.writeUInt32LE(stdin.length);
  return Buffer.concat([head, env, mid, stdin]);
}

export function encodeAnswer(exitCode: number, stdout: string): Buffer {
  const out = Buffer.from(stdout, 'utf8');
  const head = Buffer.alloc(5);
  head.writeUInt8(exitCode & 0xff, 0);
  head.writeUInt32LE(out.length, 1);
  return Buffer.concat([head, out]);
}
