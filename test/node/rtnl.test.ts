import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { EventEmitter } from 'node:events';
import { closeSync, openSync } from 'node:fs';
import { constants } from 'node:os';
import { getSystemErrorName } from 'node:util';
import type { RtNetlinkSocket } from 'netlink/dist/rt/rt.js';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { ipvlanModeOf, linkKind } from '../../node/datapath/netlink-datapath.js';
import {
  AF_INET,
  attr,
  CREATE_EXCL,
  cString,
  errnoAnswering,
  errnoOf,
  ipBytes,
  ipOf,
  linkByName,
  loadCreateRtNetlink,
  loadRawSocket,
  message,
  NLMSG_ERROR,
  parseAttrs,
  RawRtnl,
  REQUEST_TIMEOUT_MS,
  RTM_DELLINK,
  RtnlError,
  rtnl,
  rtnlDelete,
  socketInNetns,
  stringOf,
  u16le,
  u32le,
} from '../../node/datapath/rtnl.js';
import { missing } from '../support/capabilities.js';

const { EEXIST, ENODEV, EOPNOTSUPP } = constants.errno;

describe('rtnl: attribute encoder and decoder', () => {
  it('pads each attribute to 4 bytes and reads back kind and nested data, ignoring the NESTED flag', () => {
    const nested = attr(1, u16le(2));
    const blob = Buffer.concat([attr(1, cString('ipvlan')), attr(2 | 0x8000, nested)]);

    expect(attr(1, cString('ipvlan')).length).toBe(12); // 4 + 7, padded
    const top = parseAttrs(blob);
    expect(stringOf(top.get(1))).toBe('ipvlan');
    expect(parseAttrs(top.get(2)).get(1)?.readUInt16LE(0)).toBe(2);
  });

  it('stops at a truncated attribute instead of reading past the blob', () => {
    const good = attr(3, u32le(7));
    const truncated = Buffer.from(attr(4, u32le(9)).subarray(0, 6));
    truncated.writeUInt16LE(8, 0); // claims 8 bytes, has 6

    const parsed = parseAttrs(Buffer.concat([good, truncated]));
    expect(parsed.get(3)?.readUInt32LE(0)).toBe(7);
    expect(parsed.has(4)).toBe(false);
  });

  it('encodes IPv4 addresses in network order and refuses payloads of another length', () => {
    expect([...ipBytes(AF_INET, '10.1.2.3')]).toEqual([10, 1, 2, 3]);
    expect(ipOf(AF_INET, ipBytes(AF_INET, '192.168.0.254'))).toBe('192.168.0.254');
    expect(ipOf(AF_INET, Buffer.alloc(16))).toBeUndefined();
    expect(ipOf(AF_INET, undefined)).toBeUndefined();
  });

  it('finds the errno of the NLMSG_ERROR that answers its own sequence number only', () => {
    const answer = (seq: number, errno: number): Buffer => {
      const body = Buffer.alloc(20);
      body.writeInt32LE(-errno, 0);
      return message(NLMSG_ERROR, seq, body);
    };
    const datagram = Buffer.concat([answer(41, EEXIST), answer(42, ENODEV)]);

    expect(errnoAnswering(datagram, 42)).toBe(ENODEV);
    expect(errnoAnswering(datagram, 41)).toBe(EEXIST);
    expect(errnoAnswering(datagram, 43)).toBeUndefined();
    expect(errnoAnswering(answer(7, 0), 7)).toBe(0);
  });

  it('keeps the errno and its name through rtnl()', async () => {
    const err = await rtnl('add a thing', () => Promise.reject(new RtnlError('refused', EEXIST))).catch((e) => e);

    expect(err).toBeInstanceOf(RtnlError);
    expect(errnoOf(err)).toBe(EEXIST);
    expect((err as RtnlError).errnoName).toBe('EEXIST');
    expect((err as Error).message).toBe('failed to add a thing: EEXIST');
  });

  it('takes "already gone" as absent in a delete and rethrows any other refusal', async () => {
    await expect(rtnlDelete('delete x', () => Promise.reject(new RtnlError('gone', ENODEV)))).resolves.toBe('absent');
    await expect(rtnlDelete('delete x', () => Promise.reject(new RtnlError('no', EOPNOTSUPP)))).rejects.toMatchObject({
      errno: EOPNOTSUPP,
      message: `failed to delete x: ${getSystemErrorName(-EOPNOTSUPP)}`,
    });
  });
});

const skip = missing('root', 'netns');

describe.skipIf(skip)('rtnl: errno from a real kernel, in a private netns', () => {
  const ns = `vlrt-${randomBytes(3).toString('hex')}`;
  let nsFd = -1;
  let socket: RtNetlinkSocket;

  beforeAll(async () => {
    execFileSync('ip', ['netns', 'add', ns]);
    nsFd = openSync(`/run/netns/${ns}`, 'r');
    socket = socketInNetns(await loadCreateRtNetlink(), nsFd);
  });

  afterAll(() => {
    socket?.socket.close();
    if (nsFd >= 0) closeSync(nsFd);
    execFileSync('ip', ['netns', 'del', ns]);
  });

  it('rejects a lookup of a missing link with the kernel errno as a number (ENODEV)', async () => {
    const err = await socket.getLink({}, { ifname: 'nosuchlink0' }).catch((e) => e);

    expect(err).toBeInstanceOf(RtnlError);
    expect(errnoOf(err)).toBe(ENODEV);
    expect((err as RtnlError).errnoName).toBe('ENODEV');
  });

  it('rejects an exclusive create of an existing rule with EEXIST, and succeeds the first time', async () => {
    const rule = () =>
      socket.newRule(
        { family: AF_INET, srcLen: 32, table: 77, action: 1 },
        { src: ipBytes(AF_INET, '10.9.9.9'), table: 77, priority: 777 },
        { flags: CREATE_EXCL },
      );
    await expect(rule()).resolves.toEqual([]);

    const err = await rule().catch((e) => e);
    expect(errnoOf(err)).toBe(EEXIST);
  });

  it('answers dumps as before: the netns has its loopback link', async () => {
    const links = await socket.getLinks();

    expect(links.map((l) => l.attrs.ifname)).toContain('lo');
  });

  it('raw socket: a missing link is absent, a refused delete (loopback) is an RtnlError with its errno', async () => {
    const raw = RawRtnl.open(await loadRawSocket(), nsFd);
    try {
      await expect(raw.remove(RTM_DELLINK, linkByName('nosuchlink0'), 'delete nosuchlink0')).resolves.toBe('absent');
      await expect(raw.remove(RTM_DELLINK, linkByName('lo'), 'delete lo')).rejects.toMatchObject({
        name: 'RtnlError',
        errno: EOPNOTSUPP,
      });
    } finally {
      raw.close();
    }
  });
});

describe('rtnl: a request waiting on a busy RTNL mutex', () => {
  /** A raw socket whose kernel answers only when the test says so (the mutex held by others until then). */
  class SlowSocket extends EventEmitter {
    static last: SlowSocket | undefined;
    sent: Buffer[] = [];
    constructor() {
      super();
      SlowSocket.last = this;
    }
    send(msg: Buffer, _to: unknown, done: (err?: Error) => void): void {
      this.sent.push(msg);
      done();
    }
    answer(errno: number): void {
      const reply = Buffer.alloc(36);
      reply.writeUInt32LE(36, 0);
      reply.writeUInt16LE(NLMSG_ERROR, 4);
      reply.writeUInt32LE(this.sent.at(-1)!.readUInt32LE(8), 8);
      reply.writeInt32LE(-errno, 16);
      this.emit('message', reply);
    }
    close(): void {}
  }
  const open = (): { raw: RawRtnl; socket: SlowSocket } => {
    const raw = RawRtnl.open(SlowSocket as unknown as Parameters<typeof RawRtnl.open>[0]);
    return { raw, socket: SlowSocket.last! };
  };
  afterEach(() => {
    vi.useRealTimers();
  });

  it('is answered after the old 5 s limit and succeeds: the per-request timeout leaves room for contention', async () => {
    vi.useFakeTimers();
    const { raw, socket } = open();
    const pending = raw.request(RTM_DELLINK, linkByName('vl-slow'), 'delete vl-slow');
    await vi.advanceTimersByTimeAsync(6_000);
    socket.answer(0);
    await expect(pending).resolves.toBe(0);
  });

  it('still fails a request the kernel never answers, once REQUEST_TIMEOUT_MS has passed', async () => {
    vi.useFakeTimers();
    const { raw } = open();
    const pending = raw.request(RTM_DELLINK, linkByName('vl-hung'), 'delete vl-hung');
    const outcome = pending.then(
      () => 'answered',
      (err: unknown) => err,
    );
    await vi.advanceTimersByTimeAsync(REQUEST_TIMEOUT_MS - 1);
    let settled = false;
    void outcome.then(() => {
      settled = true;
    });
    await Promise.resolve();
    expect(settled).toBe(false);
    await vi.advanceTimersByTimeAsync(1);
    expect(await outcome).toMatchObject({ name: 'RtnlError', message: 'delete vl-hung timed out' });
  });
});

describe('rtnl: link info as the kernel reports it', () => {
  const IFLA_INFO_KIND = 1;
  const IFLA_INFO_DATA = 2;
  const NLA_F_NESTED = 0x8000;
  const info = (kind: string, data: Buffer): Buffer =>
    Buffer.concat([attr(IFLA_INFO_KIND, cString(kind)), attr(IFLA_INFO_DATA | NLA_F_NESTED, data)]);

  it('reads the kind and the ipvlan mode out of IFLA_LINKINFO, past other attributes in the data', () => {
    const data = Buffer.concat([attr(2, u16le(0)), attr(1, u16le(2))]); // IFLA_IPVLAN_FLAGS, then MODE l3s

    expect(linkKind(info('ipvlan', data))).toBe('ipvlan');
    expect(ipvlanModeOf(info('ipvlan', data))).toBe('l3s');
    expect(ipvlanModeOf(info('ipvlan', attr(1, u16le(1))))).toBe('l3');
  });

  it('has no ipvlan mode for another kind, a missing mode, or an unknown value', () => {
    expect(ipvlanModeOf(info('macvlan', attr(1, u32le(4))))).toBeUndefined();
    expect(ipvlanModeOf(info('ipvlan', attr(2, u16le(0))))).toBeUndefined();
    expect(ipvlanModeOf(info('ipvlan', attr(1, u16le(7))))).toBeUndefined();
    expect(ipvlanModeOf(undefined)).toBeUndefined();
  });
});
