import type { RtNetlinkSocket } from 'netlink/dist/rt/rt.js';
import { VpcLeaseError } from '../../shared/errors.js';
import { parseIpv4 } from '../../shared/ipv4.js';
import { inNetns } from './native.js';

/**
 * Small rtnetlink helpers shared by the L3/L3S tables and rules and the host veth: the error wrapper that keeps
 * the kernel's errno name, address encodings, and opening an rtnetlink socket inside another netns.
 */

/** A netlink request failed; `errnoName` is the kernel's answer when there was one (e.g. EEXIST). */
export class RtnlError extends VpcLeaseError {
  constructor(
    message: string,
    readonly errnoName?: string,
    options?: { cause?: unknown },
  ) {
    super(message, options);
  }
}

export const AF_INET = 2;
export const RT_TABLE_MAIN = 254;
export const REQUEST_TIMEOUT_MS = 5_000;
/** NLM_F_CREATE | NLM_F_EXCL: a create never silently reuses an object someone else made. */
export const CREATE_EXCL = 0x400 | 0x200;
/** NLM_F_CREATE | NLM_F_REPLACE: idempotent for objects that are ours by construction (keyed by the pod's address). */
export const CREATE_REPLACE = 0x400 | 0x100;
/** RTNH_F_ONLINK in rtm_flags: the gateway is on the link even though the link has no address in its subnet. */
export const RTNH_F_ONLINK = 4;

export function errnoOf(err: unknown): string | undefined {
  if (err instanceof RtnlError) return err.errnoName;
  const m = /Request rejected: (\w+)/.exec(err instanceof Error ? err.message : String(err));
  return m?.[1];
}

export async function rtnl<T>(what: string, call: () => Promise<T>): Promise<T> {
  try {
    return await call();
  } catch (err) {
    const name = errnoOf(err);
    throw new RtnlError(`failed to ${what}: ${name ?? (err instanceof Error ? err.message : String(err))}`, name, {
      cause: err,
    });
  }
}

/** Runs a delete; "already gone" (ENOENT, ESRCH, ENODEV) is 'absent' — DEL and undo must be idempotent. */
export async function rtnlDelete(what: string, call: () => Promise<unknown>): Promise<'removed' | 'absent'> {
  try {
    await call();
    return 'removed';
  } catch (err) {
    const name = errnoOf(err);
    if (name === 'ENOENT' || name === 'ESRCH' || name === 'ENODEV' || name === 'EADDRNOTAVAIL') return 'absent';
    throw new RtnlError(`failed to ${what}: ${name ?? (err instanceof Error ? err.message : String(err))}`, name, {
      cause: err,
    });
  }
}

/** An IPv4 address in network order, as rtnetlink attributes carry it. */
export function ipv4Bytes(ip: string): Buffer {
  const b = Buffer.alloc(4);
  b.writeUInt32BE(parseIpv4(ip));
  return b;
}

export function ipv4Of(buf: Buffer | undefined): string | undefined {
  if (buf?.length !== 4) return undefined;
  return [...buf].join('.');
}

export function u32le(value: number): Buffer {
  const b = Buffer.alloc(4);
  b.writeUInt32LE(value >>> 0);
  return b;
}

type CreateRtNetlink = typeof import('netlink/dist/rt/rt.js').createRtNetlink;

let createFn: CreateRtNetlink | undefined;

/** Only the rtnetlink module of the package (its index also loads nl80211, WireGuard and genl). */
export async function loadCreateRtNetlink(): Promise<CreateRtNetlink> {
  if (createFn) return createFn;
  const rt = await import('netlink/dist/rt/rt.js');
  // CommonJS: named exports under ESM interop, or everything on `default` in the bundle.
  const mod = rt as unknown as { createRtNetlink?: CreateRtNetlink; default?: { createRtNetlink: CreateRtNetlink } };
  const create = mod.default?.createRtNetlink ?? mod.createRtNetlink;
  if (!create) throw new RtnlError('the netlink package has no createRtNetlink');
  createFn = create;
  return createFn;
}

/**
 * A socket belongs to the netns of the thread that opened it: enter the netns on this thread for the socket()
 * call only, then return. CLONE_NEWNET is per-thread, so libuv's workers never notice.
 */
export function socketInNetns(create: CreateRtNetlink, nsFd: number): RtNetlinkSocket {
  return inNetns(nsFd, create);
}
