/**
 * The shim ↔ agent wire format (node/shim/shim.c is the other side). A request is the whole CNI invocation as the
 * runtime made it: "VLA1", u32le env bytes, env as "K=V\0"…, u32le stdin bytes, stdin. The agent answers one byte,
 * 'A' (accepted: the shim now waits for the answer) or 'R' (refused: the shim runs the full plugin), then the
 * plugin's exit code (u8), u32le stdout bytes and stdout. A shim that sends "VLA2" instead is told how long to wait
 * for the answer: 'W' then u32le milliseconds replaces 'A' (node/agent/budget.ts); a "VLA1" shim (an older
 * version, during a rollout) still gets 'A' and waits its own 60 s.
 */
export const REQUEST_MAGIC = Buffer.from('VLA1', 'latin1');
export const REQUEST_MAGIC_V2 = Buffer.from('VLA2', 'latin1');
export const ACCEPTED = 0x41; // 'A'
export const ACCEPTED_WITH_WAIT = 0x57; // 'W'
export const REFUSED = 0x52; // 'R'
/** The shim never sends more (it runs the plugin itself instead); anything larger is not a shim. */
export const MAX_FRAME_BYTES = 1 << 20;

/** Where the agent listens and the shim connects: a root-only directory on the host that no pod mounts. */
export const AGENT_SOCKET_PATH = '/run/vpc-lease/agent.sock';

export interface AgentRequest {
  readonly env: Record<string, string>;
  readonly stdin: string;
  /** 2 when the shim takes its answer wait from the agent ("VLA2"). */
  readonly version?: 1 | 2;
}

export class FrameError extends Error {}

/**
 * Decodes a request from what has arrived so far: undefined while incomplete.
 * @throws FrameError when the bytes are not a shim's request.
 */
export function decodeRequest(buf: Buffer): AgentRequest | undefined {
  const magic = buf.subarray(0, 4);
  if (buf.length >= 4 && !magic.equals(REQUEST_MAGIC) && !magic.equals(REQUEST_MAGIC_V2))
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
  const stdin = buf.subarray(12 + envBytes, end).toString('utf8');
  return magic.equals(REQUEST_MAGIC_V2) ? { env, stdin, version: 2 } : { env, stdin };
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
  (request.version === 2 ? REQUEST_MAGIC_V2 : REQUEST_MAGIC).copy(head);
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

/** The acceptance a "VLA2" shim gets: 'W' and how long it waits for the answer. */
export function encodeAcceptWithWait(waitMs: number): Buffer {
  const out = Buffer.alloc(5);
  out.writeUInt8(ACCEPTED_WITH_WAIT, 0);
  out.writeUInt32LE(waitMs, 1);
  return out;
}
