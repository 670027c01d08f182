import { constants, endianness } from 'node:os';
import { getSystemErrorName } from 'node:util';
import { CONNMARK } from './connmark.js';
import {
  bitwise,
  CT_KEYS,
  baseChain as chain,
  cmp,
  describeExpressions,
  load,
  META_KEYS,
  NFT_MSG_DELTABLE,
  NFT_MSG_GETRULE,
  NFT_MSG_NEWTABLE,
  NFTA_RULE_CHAIN,
  NFTA_RULE_EXPRESSIONS,
  NFTA_RULE_TABLE,
  Nfnl,
  type NftMessage,
  NLM_F_CREATE,
  rule,
  store,
  table,
} from './nftables.js';
import { assertIfName } from './rp-filter.js';
import { type AddressFamily, AF_INET6, attr, cString, errnoOf, parseAttrs, RtnlError, stringOf } from './rtnl.js';

/**
 * The pod's half of the NodePort return path (connmark.ts): connections arriving on the host veth get connmark
 * 0x80, and the pod's replies take it as their mark, which `fwmark 0x80/0x80 lookup 117` routes back through the
 * veth. One nf_tables table per family and pod veth, written over netlink in one transaction: no process per pod.
 * Operators read it with `nft list table ip vpc-lease-vh-eth0` (ip6 alike) in the pod's netns.
 */
const NF_INET_PRE_ROUTING = 0;
const NF_INET_LOCAL_OUT = 3;
const NF_IP_PRI_MANGLE = -150;
const IFNAMSIZ = 16;

export function podMarksTable(podVeth: string): string {
  return `vpc-lease-${podVeth}`;
}

/** Marks are host-order words in nf_tables registers. */
function word(value: number): Buffer {
  const b = Buffer.alloc(4);
  if (endianness() === 'LE') b.writeUInt32LE(value >>> 0);
  else b.writeUInt32BE(value >>> 0);
  return b;
}

/** The two rules: `iifname <veth> ct mark set ct mark | 0x80`, and in a route chain `ct mark & 0x80 != 0 meta mark set meta mark | 0x80`. */
function ruleExpressions(podVeth: string): { prerouting: Buffer[]; output: Buffer[] } {
  const name = Buffer.alloc(IFNAMSIZ);
  name.write(podVeth);
  const setBit = [bitwise(word(~CONNMARK), word(CONNMARK))];
  return {
    prerouting: [
      load('meta', META_KEYS.iifname),
      cmp('eq', name),
      load('ct', CT_KEYS.mark),
      ...setBit,
      store('ct', CT_KEYS.mark),
    ],
    output: [
      load('ct', CT_KEYS.mark),
      bitwise(word(CONNMARK), word(0)),
      cmp('neq', word(0)),
      load('meta', META_KEYS.mark),
      ...setBit,
      store('meta', META_KEYS.mark),
    ],
  };
}

/** Add, delete, add: the table is made afresh whether or not an earlier ADD left one, in one transaction. */
function installMessages(family: AddressFamily, podVeth: string): NftMessage[] {
  const t = podMarksTable(podVeth);
  const exprs = ruleExpressions(podVeth);
  return [
    table(family, t, NFT_MSG_NEWTABLE, NLM_F_CREATE),
    table(family, t, NFT_MSG_DELTABLE),
    table(family, t, NFT_MSG_NEWTABLE, NLM_F_CREATE),
    chain(family, {
      table: t,
      name: 'prerouting',
      hook: NF_INET_PRE_ROUTING,
      priority: NF_IP_PRI_MANGLE,
      type: 'filter',
    }),
    chain(family, { table: t, name: 'output', hook: NF_INET_LOCAL_OUT, priority: NF_IP_PRI_MANGLE, type: 'route' }),
    rule(family, t, 'prerouting', exprs.prerouting),
    rule(family, t, 'output', exprs.output),
  ];
}

function familyWord(family: AddressFamily): string {
  return family === AF_INET6 ? 'IPv6 ' : '';
}

async function inPod<T>(podNsFd: number, fn: (nl: Nfnl) => Promise<T>): Promise<T> {
  const nl = await Nfnl.open(podNsFd);
  try {
    return await fn(nl);
  } finally {
    nl.close();
  }
}

async function apply(podNsFd: number, messages: NftMessage[], what: string): Promise<void> {
  const errnos = await inPod(podNsFd, (nl) => nl.batch(messages, what));
  const failed = errnos.find((e) => e !== 0);
  if (failed === undefined) return;
  // nf_tables answers ENOENT for an expression whose module is not loaded and cannot be autoloaded.
  const hint = failed === -constants.errno.ENOENT ? ' (is the nft_ct kernel module loaded?)' : '';
  throw new RtnlError(`failed to ${what}: ${getSystemErrorName(-failed)}${hint}`, failed);
}

/** Installs the pod's mark rules of each family in one transaction; a bad name throws before anything is sent. */
export function installPodMarks(podNsFd: number, podVeth: string, families: readonly AddressFamily[]): Promise<void> {
  assertIfName(podVeth);
  const words = families.map(familyWord).join('and ');
  return apply(
    podNsFd,
    families.flatMap((f) => installMessages(f, podVeth)),
    `install the pod ${words}connmark rules`,
  );
}

/** Removes them; a table already gone is fine (DEL and undo are idempotent): added first, so the delete always finds one. */
export function removePodMarks(podNsFd: number, podVeth: string, families: readonly AddressFamily[]): Promise<void> {
  assertIfName(podVeth);
  const t = podMarksTable(podVeth);
  const messages = families.flatMap((f) => [
    table(f, t, NFT_MSG_NEWTABLE, NLM_F_CREATE),
    table(f, t, NFT_MSG_DELTABLE),
  ]);
  return apply(podNsFd, messages, 'remove the pod connmark rules');
}

/** The pod's mark rules of a family as `<chain>: [ expr ] …` (CHECK and tests); none when the table is gone. */
export async function podMarkRules(podNsFd: number, podVeth: string, family: AddressFamily): Promise<string[]> {
  assertIfName(podVeth);
  const payloads = await inPod(podNsFd, (nl) =>
    nl.dump(
      NFT_MSG_GETRULE,
      family,
      [attr(NFTA_RULE_TABLE, cString(podMarksTable(podVeth)))],
      'list the pod connmark rules',
    ),
  ).catch((err: unknown) => {
    throw new RtnlError(`failed to list the pod connmark rules: ${String(err)}`, errnoOf(err), { cause: err });
  });
  return payloads.map((p) => {
    const a = parseAttrs(p);
    return describe(stringOf(a.get(NFTA_RULE_CHAIN)) ?? '?', describeExpressions(a.get(NFTA_RULE_EXPRESSIONS)));
  });
}

function describe(chainName: string, exprs: string[]): string {
  return `${chainName}: ${exprs.map((e) => `[ ${e} ]`).join(' ')}`;
}

/** What podMarkRules lists when the rules are what installPodMarks wrote. */
export function expectedPodMarkRules(podVeth: string): string[] {
  const exprs = ruleExpressions(podVeth);
  const inner = (e: Buffer[]): string[] => describeExpressions(Buffer.concat(e));
  return [describe('prerouting', inner(exprs.prerouting)), describe('output', inner(exprs.output))];
}
