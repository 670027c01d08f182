import { cmd, ipBatch } from '../../fabric/guest/net.js';

/**
 * Everything a pod attachment could leave on the guest node, to compare before and after: one line per object
 * (ip's JSON for links, rules and routes; nft's rule text). Each namespace is read with one `ip -j -batch`
 * (a process start costs ~0.1-1 s in the emulated guest) and one nft per family.
 */
export type Snapshot = Record<string, string[]>;
/** One object of ip's JSON answer (a link, a rule, a route). */
export type IpObject = Record<string, unknown>;

/** One parsed JSON array per command (ip prints each command's answer on a line of its own). */
export function ipJson(netns: string | undefined, commands: readonly string[], family?: '-6'): IpObject[][] {
  const lines = ipBatch(netns, commands, family ? [family, '-j'] : ['-j'])
    .split('\n')
    .filter((l) => l.trim() !== '');
  if (lines.length !== commands.length) throw new Error(`ip -batch answered ${lines.length} of ${commands.join('; ')}`);
  return lines.map((l) => JSON.parse(l) as IpObject[]);
}

/** An object ip printed, as the one line a snapshot compares. */
export const text = (o: IpObject): string => JSON.stringify(o);
const notLocal = (r: IpObject): boolean => r['table'] !== 'local';

/**
 * Every nf_tables rule of a family in a pod's namespace, as `nft` prints it: the plugin's per-pod mark tables
 * and anything iptables-nft wrote, read by the operators' tool rather than the plugin's own reader.
 */
export function podRuleset(netns: string, family: 'ip' | 'ip6'): string[] {
  return cmd('ip', 'netns', 'exec', netns, 'nft', 'list', 'ruleset', family)
    .split('\n')
    .map((l) => l.trim())
    .filter((l) => l !== '' && l !== '}')
    .map((l) => `${netns}: ${l}`);
}

/** The node's links, rules and routes (both families' routes: ip lists every family for `table all`), and each pod's. */
export function snapshot(pods: readonly string[]): Snapshot {
  const [links = [], rules = [], routes = []] = ipJson(undefined, ['link show', 'rule show', 'route show table all']);
  const podLinks: string[] = [];
  const podRules: string[] = [];
  for (const p of pods) {
    const [own = [], ownRules = []] = ipJson(p, ['link show', 'rule show']);
    podLinks.push(...own.map((l) => `${p}:${String(l['ifname'])}`).filter((l) => !l.endsWith(':lo')));
    podRules.push(...ownRules.map((r) => `${p}: ${text(r)}`));
  }
  return {
    hostLinks: links.map((l) => String(l['ifname'])).sort(),
    rules: rules.map(text),
    routes: routes.filter(notLocal).map(text),
    podLinks,
    podRules,
    podRuleset: pods.flatMap((p) => podRuleset(p, 'ip')),
  };
}

/** The one rule a pod may leave on the node: the node-wide NodePort rule, shared by every L3/L3S pod. */
export const NODE_WIDE_RULE = /^\{"priority":1024,"src":"all","fwmark":"0x80","fwmask":"0x80","table":"main"\}$/;

/** Differences between two snapshots, as readable lines ("+" appeared, "-" vanished); `allowed` may appear. */
export function leftovers(before: Snapshot, after: Snapshot, allowed?: RegExp): string[] {
  const out: string[] = [];
  for (const key of Object.keys(after)) {
    const was = new Set(before[key] ?? []);
    const now = new Set(after[key] ?? []);
    for (const l of now) if (!was.has(l) && !(allowed?.test(l) ?? false)) out.push(`+ ${key}: ${l}`);
    for (const l of was) if (!now.has(l)) out.push(`- ${key}: ${l}`);
  }
  return out;
}
