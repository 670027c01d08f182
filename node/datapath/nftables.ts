import { endianness } from 'node:os';
import type { RawNetlinkSocket } from 'netlink/dist/raw.js';
import { inNetns } from './native.js';
import { type AddressFamily, attr, cString, loadRawSocket, parseAttrs, REQUEST_TIMEOUT_MS, RtnlError } from './rtnl.js';

/**
 * The nf_tables half of netlink (NETLINK_NETFILTER, subsystem NFTABLES): what `nft` sends, without a process.
 * Changes go as one batch, which the kernel applies as one transaction; a dump reads a table's rules back.
 */
const NETLINK_NETFILTER = 12;
const NFNL_SUBSYS_NFTABLES = 10;
const NFNL_MSG_BATCH_BEGIN = 16;
const NFNL_MSG_BATCH_END = 17;
export const NFT_MSG_NEWTABLE = 0;
export const NFT_MSG_DELTABLE = 2;
export const NFT_MSG_NEWCHAIN = 3;
export const NFT_MSG_NEWRULE = 6;
export const NFT_MSG_GETRULE = 7;
const NLM_F_REQUEST = 1;
const NLM_F_ACK = 4;
export const NLM_F_CREATE = 0x400;
export const NLM_F_APPEND = 0x800;
const NLM_F_DUMP = 0x300;
const NLMSG_ERROR = 2;
const NLMSG_DONE = 3;
const NLMSG_HDRLEN = 16;
const NFGENMSG_LEN = 4;
const NLA_F_NESTED = 0x8000;

/** One message of a batch: its nf_tables type, family (NFPROTO_IPV4 = AF_INET, NFPROTO_IPV6 = AF_INET6), attributes. */
export interface NftMessage {
  readonly type: number;
  readonly family: AddressFamily;
  readonly flags?: number;
  readonly attrs: readonly Buffer[];
}

export function nested(type: number, parts: readonly Buffer[]): Buffer {
  return attr(type | NLA_F_NESTED, Buffer.concat(parts));
}

export function be32(value: number): Buffer {
  const b = Buffer.alloc(4);
  b.writeInt32BE(value | 0);
  return b;
}

/** The header nf_tables messages share: nlmsghdr, then nfgenmsg (family, version 0, resource id). */
function nfMessage(type: number, flags: number, seq: number, family: number, resId: number, body: Buffer): Buffer {
  const out = Buffer.alloc(NLMSG_HDRLEN + NFGENMSG_LEN);
  out.writeUInt32LE(NLMSG_HDRLEN + NFGENMSG_LEN + body.length, 0);
  out.writeUInt16LE(type, 4);
  out.writeUInt16LE(flags, 6);
  out.writeUInt32LE(seq, 8);
  out.writeUInt8(family, NLMSG_HDRLEN);
  out.writeUInt16BE(resId, NLMSG_HDRLEN + 2);
  return Buffer.concat([out, body]);
}

interface Answer {
  readonly type: number;
  readonly seq: number;
  /** NLMSG_ERROR: the errno (0: an ACK); else the payload after nfgenmsg. */
  readonly errno?: number;
  readonly payload: Buffer;
}

function answersIn(datagram: Buffer): Answer[] {
  const out: Answer[] = [];
  for (let off = 0; off + NLMSG_HDRLEN <= datagram.length; ) {
    const len = datagram.readUInt32LE(off);
    if (len < NLMSG_HDRLEN || off + len > datagram.length) break;
    const type = datagram.readUInt16LE(off + 4);
    const seq = datagram.readUInt32LE(off + 8);
    const body = datagram.subarray(off + NLMSG_HDRLEN, off + len);
    if (type === NLMSG_ERROR) out.push({ type, seq, errno: 0 - body.readInt32LE(0), payload: body });
    else out.push({ type, seq, payload: body.subarray(NFGENMSG_LEN) });
    off += (len + 3) & ~3;
  }
  return out;
}

/** One nfnetlink socket, opened in a netns; requests run one at a time. */
export class Nfnl {
  private seq = (Date.now() & 0x3fffffff) >>> 0;

  private constructor(private readonly socket: RawNetlinkSocket) {}

  static async open(nsFd?: number): Promise<Nfnl> {
    const Socket = await loadRawSocket();
    const make = (): RawNetlinkSocket => new Socket(NETLINK_NETFILTER);
    return new Nfnl(nsFd === undefined ? make() : inNetns(nsFd, make));
  }

  /**
   * Sends the messages as one transaction and resolves with each one's errno (0: applied). The kernel answers
   * every message of a batch it processed, and only the batch's start when it refused the batch as a whole.
   */
  async batch(messages: readonly NftMessage[], what: string): Promise<number[]> {
    const begin = ++this.seq;
    const seqs = messages.map(() => ++this.seq);
    const end = ++this.seq;
    const datagram = Buffer.concat([
      nfMessage(NFNL_MSG_BATCH_BEGIN, NLM_F_REQUEST, begin, 0, NFNL_SUBSYS_NFTABLES, Buffer.alloc(0)),
      ...messages.map((m, i) =>
        nfMessage(
          (NFNL_SUBSYS_NFTABLES << 8) | m.type,
          NLM_F_REQUEST | NLM_F_ACK | (m.flags ?? 0),
          seqs[i]!,
          m.family,
          0,
          Buffer.concat(m.attrs),
        ),
      ),
      nfMessage(NFNL_MSG_BATCH_END, NLM_F_REQUEST, end, 0, NFNL_SUBSYS_NFTABLES, Buffer.alloc(0)),
    ]);
    const errnos = new Map<number, number>();
    await this.exchange(datagram, what, (a) => {
      if (a.errno === undefined) return false;
      if (a.seq === begin && a.errno !== 0) {
        for (const s of seqs) errnos.set(s, a.errno);
        return true;
      }
      errnos.set(a.seq, a.errno);
      return seqs.every((s) => errnos.has(s));
    });
    return seqs.map((s) => errnos.get(s)!);
  }

  /** A dump's messages (payloads after nfgenmsg); a refusal (no such table) is an empty dump. */
  async dump(type: number, family: AddressFamily, attrs: readonly Buffer[], what: string): Promise<Buffer[]> {
    const seq = ++this.seq;
    const datagram = nfMessage(
      (NFNL_SUBSYS_NFTABLES << 8) | type,
      NLM_F_REQUEST | NLM_F_DUMP,
      seq,
      family,
      0,
      Buffer.concat(attrs),
    );
    const out: Buffer[] = [];
    await this.exchange(datagram, what, (a) => {
      if (a.seq !== seq) return false;
      if (a.type === NLMSG_DONE || a.errno !== undefined) return true;
      out.push(a.payload);
      return false;
    });
    return out;
  }

  private exchange(datagram: Buffer, what: string, take: (a: Answer) => boolean): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      const done = (fn: () => void): void => {
        clearTimeout(timer);
        this.socket.off('message', onMessage);
        this.socket.off('error', onError);
        fn();
      };
      const onMessage = (msg: Buffer): void => {
        if (answersIn(msg).some(take)) done(resolve);
      };
      const onError = (err: Error): void =>
        done(() => reject(new RtnlError(`failed to ${what}: ${err.message}`, undefined, { cause: err })));
      const timer = setTimeout(() => done(() => reject(new RtnlError(`${what} timed out`))), REQUEST_TIMEOUT_MS);
      this.socket.on('message', onMessage);
      this.socket.on('error', onError);
      this.socket.send(datagram, { port: 0 }, (err) => {
        if (err) onError(err);
      });
    });
  }

  close(): void {
    this.socket.close();
  }
}

// ---- expressions (attribute numbers from linux/netfilter/nf_tables.h)

const NFTA_LIST_ELEM = 1;
const NFTA_EXPR_NAME = 1;
const NFTA_EXPR_DATA = 2;
const NFTA_DATA_VALUE = 1;
const NFT_REG_1 = 1;

export const NFTA_TABLE_NAME = 1;
export const NFTA_CHAIN_TABLE = 1;
export const NFTA_CHAIN_NAME = 3;
const NFTA_CHAIN_HOOK = 4;
const NFTA_CHAIN_POLICY = 5;
const NFTA_CHAIN_TYPE = 7;
const NFTA_HOOK_HOOKNUM = 1;
const NFTA_HOOK_PRIORITY = 2;
export const NFTA_RULE_TABLE = 1;
export const NFTA_RULE_CHAIN = 2;
export const NFTA_RULE_EXPRESSIONS = 4;
const NF_ACCEPT = 1;

export const META_KEYS = { mark: 3, iifname: 6 } as const;
export const CT_KEYS = { mark: 3 } as const;
const CMP_OPS = { eq: 0, neq: 1 } as const;

function expr(name: string, parts: readonly Buffer[]): Buffer {
  return nested(NFTA_LIST_ELEM, [attr(NFTA_EXPR_NAME, cString(name)), nested(NFTA_EXPR_DATA, parts)]);
}

function data(type: number, value: Buffer): Buffer {
  return nested(type, [attr(NFTA_DATA_VALUE, value)]);
}

/** `meta <key>` or `ct <key>` loaded into register 1. */
export function load(what: 'meta' | 'ct', key: number): Buffer {
  return expr(what, [attr(1 /* DREG */, be32(NFT_REG_1)), attr(2 /* KEY */, be32(key))]);
}

/** `meta <key> set` / `ct <key> set` from register 1 (SREG is 3 for meta, 4 for ct). */
export function store(what: 'meta' | 'ct', key: number): Buffer {
  return expr(what, [attr(2 /* KEY */, be32(key)), attr(what === 'meta' ? 3 : 4, be32(NFT_REG_1))]);
}

/** Register 1 compared with a value; the rule stops here when it does not hold. */
export function cmp(op: keyof typeof CMP_OPS, value: Buffer): Buffer {
  return expr('cmp', [attr(1, be32(NFT_REG_1)), attr(2, be32(CMP_OPS[op])), data(3, value)]);
}

/** Register 1 = (register 1 & mask) ^ xor, over the value's length. */
export function bitwise(mask: Buffer, xor: Buffer): Buffer {
  return expr('bitwise', [
    attr(1, be32(NFT_REG_1)),
    attr(2, be32(NFT_REG_1)),
    attr(3, be32(mask.length)),
    data(4, mask),
    data(5, xor),
  ]);
}

export function table(family: AddressFamily, name: string, type: number, flags = 0): NftMessage {
  return { type, family, flags, attrs: [attr(NFTA_TABLE_NAME, cString(name))] };
}

/** A base chain at a netfilter hook, policy accept. */
export function baseChain(
  family: AddressFamily,
  spec: { table: string; name: string; hook: number; priority: number; type: 'filter' | 'route' },
): NftMessage {
  return {
    type: NFT_MSG_NEWCHAIN,
    family,
    flags: NLM_F_CREATE,
    attrs: [
      attr(NFTA_CHAIN_TABLE, cString(spec.table)),
      attr(NFTA_CHAIN_NAME, cString(spec.name)),
      nested(NFTA_CHAIN_HOOK, [
        attr(NFTA_HOOK_HOOKNUM, be32(spec.hook)),
        attr(NFTA_HOOK_PRIORITY, be32(spec.priority)),
      ]),
      attr(NFTA_CHAIN_POLICY, be32(NF_ACCEPT)),
      attr(NFTA_CHAIN_TYPE, cString(spec.type)),
    ],
  };
}

export function rule(family: AddressFamily, tableName: string, chain: string, exprs: readonly Buffer[]): NftMessage {
  return {
    type: NFT_MSG_NEWRULE,
    family,
    flags: NLM_F_CREATE | NLM_F_APPEND,
    attrs: [
      attr(NFTA_RULE_TABLE, cString(tableName)),
      attr(NFTA_RULE_CHAIN, cString(chain)),
      nested(NFTA_RULE_EXPRESSIONS, exprs),
    ],
  };
}

/** A rule's expressions as `nft --debug=netlink` would name them: `[ meta load iifname => reg 1 ]`. */
export function describeExpressions(blob: Buffer | undefined): string[] {
  const out: string[] = [];
  for (let off = 0; blob && off + 4 <= blob.length; ) {
    const len = blob.readUInt16LE(off);
    if (len < 4) break;
    const e = parseAttrs(blob.subarray(off + 4, off + len));
    const name = e.get(NFTA_EXPR_NAME)?.toString('utf8').replace(/\0+$/, '') ?? '?';
    out.push(describeExpression(name, parseAttrs(e.get(NFTA_EXPR_DATA))));
    off += (len + 3) & ~3;
  }
  return out;
}

function keyName(keys: Record<string, number>, n: number | undefined): string {
  return Object.entries(keys).find(([, v]) => v === n)?.[0] ?? `key ${n}`;
}

/** A word as the host reads it (marks), other lengths byte by byte. */
function dataHex(a: Map<number, Buffer>, type: number): string {
  const v = parseAttrs(a.get(type)).get(NFTA_DATA_VALUE);
  if (v?.length !== 4) return `0x${v?.toString('hex') ?? ''}`;
  const n = endianness() === 'LE' ? v.readUInt32LE(0) : v.readUInt32BE(0);
  return `0x${n.toString(16).padStart(8, '0')}`;
}

function describeExpression(name: string, a: Map<number, Buffer>): string {
  const u32 = (t: number): number | undefined => a.get(t)?.readUInt32BE(0);
  if (name === 'meta' || name === 'ct') {
    const keys = name === 'meta' ? META_KEYS : CT_KEYS;
    const key = keyName(keys, u32(2));
    const sreg = u32(name === 'meta' ? 3 : 4);
    return sreg === undefined ? `${name} load ${key} => reg ${u32(1)}` : `${name} set ${key} with reg ${sreg}`;
  }
  if (name === 'cmp') {
    const value = parseAttrs(a.get(3)).get(NFTA_DATA_VALUE);
    const text =
      value && value[0] !== 0 && value.length > 4 ? `"${value.toString('utf8').replace(/\0+$/, '')}"` : undefined;
    return `cmp ${keyName(CMP_OPS, u32(2))} reg ${u32(1)} ${text ?? dataHex(a, 3)}`;
  }
  if (name === 'bitwise') return `bitwise reg ${u32(2)} = (reg ${u32(1)} & ${dataHex(a, 4)}) ^ ${dataHex(a, 5)}`;
  return name;
}
