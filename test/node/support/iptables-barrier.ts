import { chmodSync, mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { IMAGE_IPTABLES_DIR, type IptablesMode, imageIptables } from '../../../node/agent/iptables-mode.js';
import { useIptables } from '../../../node/datapath/connmark.js';
import { type AgentProcess, loggedLine, startAgent } from './agent-process.js';
import type { NodeFixture } from './node-fixture.js';

/** How long an install waits at the barrier before it fails the ADD (the failure the overlap tests exist to show). */
const DEFAULT_BARRIER_WAIT_S = 20;

/**
 * Writes wrapper multi binaries into `dir` around the real ones: every pod-side mark install (an
 * iptables-restore or ip6tables-restore whose input adds `PREROUTING -i`) reports to `gate` and waits there
 * until `installs` of them have started, so the barrier opens only when that many are in flight at once.
 * A file `fail` in `gate` then fails each install, `fail-ip6tables-restore` (or `fail-iptables-restore`) one family's.
 */
export function wrapperIptables(dir: string, gate: string, installs: number, waitS = DEFAULT_BARRIER_WAIT_S): void {
  mkdirSync(gate, { recursive: true });
  const script = [
    '#!/bin/sh',
    'real=/usr/sbin/$(basename "$0")',
    'if [ "$1" = iptables-restore ] || [ "$1" = ip6tables-restore ]; then',
    '  input=$(cat)',
    '  case "$input" in',
    '  *"-A PREROUTING -i"*)',
    `    : > "${gate}/started.$$"`,
    '    tries=0',
    '    while :; do',
    '      n=0',
    `      for f in "${gate}"/started.*; do [ -e "$f" ] && n=$((n + 1)); done`,
    `      [ "$n" -ge ${installs} ] && break`,
    '      tries=$((tries + 1))',
    `      if [ "$tries" -gt ${waitS * 50} ]; then echo "barrier: $n of ${installs} installs in flight" >&2; exit 3; fi`,
    '      sleep 0.02',
    '    done',
    `    if [ -e "${gate}/fail" ] || [ -e "${gate}/fail-$1" ]; then echo "injected install failure" >&2; exit 4; fi ;;`,
    '  esac',
    `  printf '%s\\n' "$input" | exec "$real" "$@"`,
    'fi',
    'exec "$real" "$@"',
    '',
  ].join('\n');
  mkdirSync(dir, { recursive: true });
  for (const name of ['xtables-nft-multi', 'xtables-legacy-multi']) {
    writeFileSync(join(dir, name), script);
    chmodSync(join(dir, name), 0o755);
  }
}

/**
 * An agent of the fixture's build whose iptables is the barrier wrapper for `installs` installs; this process
 * then reads rules (useIptables) in the backend the agent chose. The caller resets useIptables and stops it.
 */
export async function startBarrierAgent(
  f: NodeFixture,
  installs: number,
  waitS = DEFAULT_BARRIER_WAIT_S,
): Promise<{ agent: AgentProcess; socket: string; gate: string }> {
  const root = mkdtempSync(join(f.dir, 'overlap-'));
  const gate = join(root, 'gate');
  wrapperIptables(join(root, 'sbin'), gate, installs, waitS);
  const socket = join(root, 'run', 'agent.sock');
  const agent = await startAgent(f.cni, socket, { ...f.baseEnv(), VPC_LEASE_IPTABLES_DIR: join(root, 'sbin') });
  const mode = (await loggedLine(agent, 'iptables backend chosen'))['mode'] as IptablesMode;
  useIptables(imageIptables(IMAGE_IPTABLES_DIR, mode));
  return { agent, socket, gate };
}
