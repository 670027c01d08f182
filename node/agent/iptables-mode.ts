import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import type { IptablesCommands } from '../datapath/connmark.js';

/**
 * The agent's iptables: the image's xtables multi binaries (packaging/image/iptables.ts), in the backend the host's
 * own rules live in. Legacy and nft are two kernel subsystems: rules the agent wrote into the other one would sit
 * beside kube-proxy's instead of among them, and the fallback plugin (the host's iptables) would not see them.
 *
 * The choice is kubernetes-sigs/iptables-wrappers' (pkg/xtables/detect.go): kubelet (1.17+) creates
 * KUBE-IPTABLES-HINT or KUBE-KUBELET-CANARY in the mangle table of the backend it uses; look in nft first, then
 * legacy. Where neither has them (no kubelet: local runs, tests), our own VPC-LEASE chains, which the fallback
 * plugin writes with the host's iptables, decide; with none of these, nft (the wrapper's default).
 */
export type IptablesMode = 'legacy' | 'nft';

/** Where the image keeps the multi binaries (IMAGE_SBIN_DIR of packaging/image/iptables.ts). */
export const IMAGE_IPTABLES_DIR = '/usr/sbin';
const MULTI: Readonly<Record<IptablesMode, string>> = { legacy: 'xtables-legacy-multi', nft: 'xtables-nft-multi' };
const SAVE_TIMEOUT_MS = 10_000;

const KUBELET_CHAINS = /^:(KUBE-IPTABLES-HINT|KUBE-KUBELET-CANARY) /m;
const OWN_CHAINS = /^:VPC-LEASE-/m;

/** What each backend's save printed: nft's mangle tables (v4 and v6), legacy's whole tables (v4 and v6). */
export interface BackendListings {
  readonly nft: string;
  readonly legacy: string;
}

/** The choice, and why (logged at start, so an operator can see which rule decided). */
export function chooseIptablesMode(listings: BackendListings): { mode: IptablesMode; reason: string } {
  if (KUBELET_CHAINS.test(listings.nft)) return { mode: 'nft', reason: 'kubelet chains in nft' };
  if (KUBELET_CHAINS.test(listings.legacy)) return { mode: 'legacy', reason: 'kubelet chains in legacy' };
  if (OWN_CHAINS.test(listings.legacy) && !OWN_CHAINS.test(listings.nft))
    return { mode: 'legacy', reason: 'VPC-LEASE chains in legacy only' };
  return { mode: 'nft', reason: 'no kubelet chains: the default' };
}

/** The image's two multi binaries are in `dir`. */
export function hasImageIptables(dir: string): boolean {
  return Object.values(MULTI).every((f) => existsSync(`${dir}/${f}`));
}

/** Runs one save; a failure (a backend the kernel lacks) reads as an empty listing, as in the wrapper. */
function save(dir: string, mode: IptablesMode, args: readonly string[]): Promise<string> {
  return new Promise((resolve) => {
    execFile(`${dir}/${MULTI[mode]}`, [...args], { timeout: SAVE_TIMEOUT_MS, env: {} }, (_err, stdout) =>
      resolve(typeof stdout === 'string' ? stdout : ''),
    );
  });
}

/**
 * Lists both backends and chooses. Legacy's save gets no `-t mangle`: naming a table makes the legacy kernel
 * module create it (the wrapper's note).
 */
export async function detectIptablesMode(dir: string): Promise<{ mode: IptablesMode; reason: string }> {
  const [nft4, nft6, legacy4, legacy6] = await Promise.all([
    save(dir, 'nft', ['iptables-save', '-t', 'mangle']),
    save(dir, 'nft', ['ip6tables-save', '-t', 'mangle']),
    save(dir, 'legacy', ['iptables-save']),
    save(dir, 'legacy', ['ip6tables-save']),
  ]);
  return chooseIptablesMode({ nft: nft4 + nft6, legacy: legacy4 + legacy6 });
}

/** connmark.ts's commands for the image's multi binary of `mode`. */
export function imageIptables(dir: string, mode: IptablesMode): IptablesCommands {
  const multi = `${dir}/${MULTI[mode]}`;
  return { iptables: [multi, 'iptables'], restore: [multi, 'iptables-restore'] };
}
