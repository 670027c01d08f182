import {
  chmodSync,
  copyFileSync,
  existsSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  realpathSync,
  renameSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { basename, dirname, join } from 'node:path';
import { ValidationError, VpcLeaseError } from '../../shared/errors.js';
import { parseNetconf } from '../config/netconf.js';
import { NETNS_ADDON_FILE } from '../datapath/native.js';
import { ALLOW_OTHER_CNI_ENV, ALLOW_OTHER_CNI_FLAG, type ConfDirEntry, foreignPrimaryCni } from './foreign-cni.js';
import type { ReadinessProbe } from './readiness.js';
import { askChainedVersions, DEFAULT_CNI_VERSION, DEFAULT_CNI_VERSIONS, planVersions } from './versions.js';

/**
 * `vpc-lease-cni install`, run by the DaemonSet's init container: copies the plugin and its native parts into
 * the host's CNI bin dir at once, and writes the conflist once the node can serve ADDs (READY in the store):
 * runtimes without CNI STATUS (libcni 1.1: containerd 1.6/1.7) judge network readiness by the conflist's
 * presence. Every file lands through a temp file + rename in the same directory, so kubelet never executes a
 * half-copied binary nor reads a half-written conflist.
 */
export const PLUGIN_TYPE = 'vpc-lease-cni';
/**
 * The bin dir holds two executables: the shim under the conflist's `type` (what the runtime runs: it forwards to
 * the node agent) and the full plugin under this name, which the shim execs when the agent cannot answer.
 */
export const PLUGIN_EXECUTABLE = 'vpc-lease-cni-plugin';
/** The build writes the shim beside the executable under this name (packaging/shim.ts). */
export const SHIM_SOURCE_FILE = 'vpc-lease-cni-shim';
/** What the launcher needs beside it: the bundle and the native parts. */
export const SUPPORT_FILES = ['vpc-lease-cni.js', NETNS_ADDON_FILE, 'netlink.node'] as const;

export interface InstallOptions {
  /** The executable to install (default: this one). */
  readonly source: string;
  readonly binDir: string;
  readonly confDir: string;
  readonly confName: string;
  /** What `cniVersion` says (libcni 1.1 reads only this). */
  readonly cniVersion: string;
  /** Offered through `cniVersions` to libcni ≥ 1.2; absent when `--cni-version` pinned one version. */
  readonly cniVersions?: readonly string[];
  readonly networkName: string;
  /** Our plugin's netconf fields (validated before anything is written). */
  readonly pluginConfig: Record<string, unknown>;
  /** Plugins chained after ours, e.g. portmap. */
  readonly chained: readonly Record<string, unknown>[];
  /** What must sit beside the executable (default SUPPORT_FILES; a single executable needs only its natives). */
  readonly supportFiles?: readonly string[];
  /** Write the conflist without waiting for the node to be READY (`--no-wait-ready`). */
  readonly skipReadyWait: boolean;
  /** Give up waiting after this long, exiting 1 without a conflist; 0 waits as long as it takes. */
  readonly readyTimeoutS: number;
  /** Install even though another primary CNI configuration sorts before ours (`--allow-other-cni`). */
  readonly allowOtherCni: boolean;
  /** Where kubelet's configuration and flags are, for the max-pods check (`--kubelet-config`, `--kubelet-args`). */
  readonly kubeletConfigPath?: string;
  readonly kubeletArgsPath?: string;
}

export interface InstallReport {
  readonly installed: string[];
  readonly conflist: string;
  /** What was written. */
  readonly body: Record<string, unknown>;
  readonly warnings: readonly string[];
  /** Why the conflist was written when it was. */
  readonly written: 'ready' | 'existing-conflist' | 'no-wait';
}

/** What waiting for READY needs; injected so tests run on a fake clock. */
export interface ReadyWait {
  readonly probe: ReadinessProbe;
  readonly sleep: (ms: number) => Promise<void>;
  readonly nowMs: () => number;
  /** One line per change of the reason, and a reminder every `REMIND_MS`. */
  readonly log: (line: string) => void;
}

/** The poll interval starts at 1 s and doubles up to 10 s: a READY node gets its conflist within 10 s. */
export const READY_POLL_MIN_MS = 1_000;
export const READY_POLL_MAX_MS = 10_000;
const REMIND_MS = 60_000;

export class NotReadyError extends VpcLeaseError {}

function atomicCopy(from: string, to: string, mode: number): void {
  const tmp = join(dirname(to), `.${basename(to)}.${process.pid}.tmp`);
  copyFileSync(from, tmp);
  chmodSync(tmp, mode);
  renameSync(tmp, to);
}

/**
 * The service CIDR is essential and has no safe default (clusters use 10.96.0.0/12, 10.100.0.0/16,
 * 172.20.0.0/16, …): without it a pod's ClusterIP traffic, kube-dns included, takes the ipvlan default route into
 * the VPC and is never answered. No file on a node states it (only kube-apiserver's
 * --service-cluster-ip-range does), so the installer takes it from a flag and refuses to install without one.
 */
export const SERVICE_CIDRS_FLAG = '--service-cidrs';
export const SERVICE_CIDRS_ENV = 'VPC_LEASE_SERVICE_CIDRS';

function requireServiceCidrs(config: ReturnType<typeof parseNetconf>): void {
  if (!config.hostVeth || config.serviceCidrs.length > 0) return;
  throw new ValidationError(
    `install: no service CIDR: pass ${SERVICE_CIDRS_FLAG} <cidr>[,<cidr>] (or ${SERVICE_CIDRS_ENV}, or ` +
      "serviceCidrs in the config) with the cluster's service range, kube-apiserver's --service-cluster-ip-range; " +
      'without it pods cannot reach ClusterIP services, kube-dns included',
  );
}

/**
 * Whether the conflist at `path` is ours: a node that already has it was serving pods (or was set up by this
 * installer before a reboot), so a rollout rewrites it at once, never removing it or leaving it unwritten.
 */
export function isOurConflist(path: string): boolean {
  try {
    const list = JSON.parse(readFileSync(path, 'utf8')) as { plugins?: { type?: unknown }[] };
    return list.plugins?.[0]?.type === PLUGIN_TYPE;
  } catch {
    return false;
  }
}

/** Polls until the node is READY; @throws NotReadyError after `timeoutS` (0: never). */
export async function waitUntilReady(wait: ReadyWait, timeoutS: number): Promise<void> {
  const startMs = wait.nowMs();
  let intervalMs = READY_POLL_MIN_MS;
  let said: string | undefined;
  let saidAtMs = startMs;
  for (;;) {
    const reason = await wait.probe();
    if (reason === undefined) return;
    const nowMs = wait.nowMs();
    const waitedS = Math.round((nowMs - startMs) / 1000);
    if (timeoutS > 0 && nowMs - startMs >= timeoutS * 1000)
      throw new NotReadyError(`the node is not READY after ${waitedS} s (${reason}); no conflist written`);
    if (reason !== said || nowMs - saidAtMs >= REMIND_MS) {
      wait.log(`waiting for the node to be READY before writing the conflist (${waitedS} s): ${reason}`);
      said = reason;
      saidAtMs = nowMs;
    }
    await wait.sleep(intervalMs);
    intervalMs = Math.min(intervalMs * 2, READY_POLL_MAX_MS);
  }
}

export async function install(options: InstallOptions, wait?: ReadyWait): Promise<InstallReport> {
  const entry = { type: PLUGIN_TYPE, ...options.pluginConfig };
  // Fail before touching the host when the configuration would fail every ADD.
  requireServiceCidrs(parseNetconf({ cniVersion: options.cniVersion, name: options.networkName, ...entry }));
  const versions = planVersions(
    { cniVersion: options.cniVersion, ...(options.cniVersions ? { cniVersions: options.cniVersions } : {}) },
    askChainedVersions(options.binDir, options.chained, options.cniVersion),
  );
  for (const warning of versions.warnings) wait?.log(`warning: ${warning}`);
  const foreign = foreignPrimaryCni({
    entries: confDirEntries(options.confDir),
    ourConfName: options.confName,
    ourPluginType: PLUGIN_TYPE,
    confDir: options.confDir,
  });
  if (foreign && !options.allowOtherCni) throw new ValidationError(`install: ${foreign.message}`);
  if (foreign) wait?.log(`warning (${ALLOW_OTHER_CNI_FLAG}): ${foreign.message}`);
  const source = realpathSync(options.source);
  const sourceDir = dirname(source);
  const shim = join(sourceDir, SHIM_SOURCE_FILE);
  if (!existsSync(shim))
    throw new ValidationError(`missing ${SHIM_SOURCE_FILE} beside ${source}; install from the dist/ build`);
  mkdirSync(options.binDir, { recursive: true });
  mkdirSync(options.confDir, { recursive: true });
  const installed: string[] = [];
  // Support files first: a new launcher must never run beside an old (or missing) bundle or addon.
  for (const file of options.supportFiles ?? SUPPORT_FILES) {
    const from = join(sourceDir, file);
    if (!existsSync(from)) throw new ValidationError(`missing ${file} beside ${source}; install from the dist/ build`);
    atomicCopy(from, join(options.binDir, file), 0o755);
    installed.push(join(options.binDir, file));
  }
  // Code caches of the previous bundle: V8 would reject them; the next calls write fresh ones.
  for (const name of readdirSync(options.binDir))
    if (name.startsWith(`${PLUGIN_TYPE}.`) && name.endsWith('.v8cache'))
      rmSync(join(options.binDir, name), { force: true });
  // The plugin before the shim: a shim never runs without the plugin it falls back to beside it.
  atomicCopy(source, join(options.binDir, PLUGIN_EXECUTABLE), 0o755);
  installed.push(join(options.binDir, PLUGIN_EXECUTABLE));
  atomicCopy(shim, join(options.binDir, PLUGIN_TYPE), 0o755);
  installed.push(join(options.binDir, PLUGIN_TYPE));

  const conflist = join(options.confDir, options.confName);
  const written = options.skipReadyWait ? 'no-wait' : isOurConflist(conflist) ? 'existing-conflist' : 'ready';
  if (written === 'ready') {
    if (!wait) throw new ValidationError('install: waiting for READY needs a readiness probe');
    await waitUntilReady(wait, options.readyTimeoutS);
  }
  const body = {
    cniVersion: versions.cniVersion,
    ...(versions.cniVersions ? { cniVersions: versions.cniVersions } : {}),
    name: options.networkName,
    plugins: [entry, ...options.chained],
  };
  const tmp = join(options.confDir, `.${options.confName}.${process.pid}.tmp`);
  writeFileSync(tmp, `${JSON.stringify(body, null, 2)}\n`, { mode: 0o644 });
  renameSync(tmp, conflist);
  return { installed, conflist, body, warnings: versions.warnings, written };
}

/** What the runtime would see in the conf dir: regular files (through symlinks, as libcni) with their content. */
function confDirEntries(confDir: string): ConfDirEntry[] {
  if (!existsSync(confDir)) return [];
  return readdirSync(confDir).map((name) => {
    const path = join(confDir, name);
    try {
      return statSync(path).isFile() ? { name, content: readFileSync(path, 'utf8') } : { name };
    } catch {
      return { name };
    }
  });
}

/** Flags without a value. */
const SWITCHES = ['no-wait-ready', ALLOW_OTHER_CNI_FLAG.slice(2)];

/**
 * Parses `install [--bin-dir D] [--conf-dir D] [--conf-name N] [--cni-version V] [--name N] [--config JSON]
 * [--service-cidrs CIDR[,CIDR]] [--chain T[,T]] [--ready-timeout-s S] [--no-wait-ready] [--allow-other-cni]
 * [--kubelet-config PATH] [--kubelet-args PATH]`.
 */
export function installOptionsFromArgs(
  args: readonly string[],
  env: NodeJS.ProcessEnv,
  source: string,
): InstallOptions {
  const flags = new Map<string, string>();
  for (let i = 0; i < args.length; i += 2) {
    const flag = args[i]!;
    if (SWITCHES.includes(flag.slice(2))) {
      flags.set(flag.slice(2), 'true');
      i -= 1;
      continue;
    }
    const value = args[i + 1];
    if (!flag.startsWith('--') || value === undefined) throw new ValidationError(`install: bad argument ${flag}`);
    flags.set(flag.slice(2), value);
  }
  const known = [
    ...SWITCHES,
    ...['bin-dir', 'conf-dir', 'conf-name', 'cni-version', 'name', 'config', 'chain', 'service-cidrs'],
    ...['ready-timeout-s', 'kubelet-config', 'kubelet-args'],
  ];
  const unknown = [...flags.keys()].filter((k) => !known.includes(k));
  if (unknown.length > 0)
    throw new ValidationError(`install: unknown option ${unknown.map((k) => `--${k}`).join(', ')}`);
  const configText = flags.get('config') ?? env['VPC_LEASE_CNI_CONFIG'] ?? '{}';
  let pluginConfig: Record<string, unknown>;
  try {
    pluginConfig = JSON.parse(configText) as Record<string, unknown>;
  } catch {
    throw new ValidationError('install: --config (or VPC_LEASE_CNI_CONFIG) is not JSON');
  }
  // The flag (or its environment variable, which the DaemonSet fills from the ConfigMap) wins over the config.
  const serviceCidrs = (flags.get('service-cidrs') ?? env[SERVICE_CIDRS_ENV] ?? '')
    .split(',')
    .map((c) => c.trim())
    .filter(Boolean);
  if (serviceCidrs.length > 0) pluginConfig = { ...pluginConfig, serviceCidrs };
  const chain = (flags.get('chain') ?? env['VPC_LEASE_CNI_CHAIN'] ?? 'portmap')
    .split(',')
    .filter(Boolean)
    .map((type) => (type === 'portmap' ? { type, capabilities: { portMappings: true } } : { type }));
  return {
    source,
    binDir: flags.get('bin-dir') ?? env['VPC_LEASE_CNI_BIN_DIR'] ?? '/opt/cni/bin',
    confDir: flags.get('conf-dir') ?? env['VPC_LEASE_CNI_CONF_DIR'] ?? '/etc/cni/net.d',
    confName: flags.get('conf-name') ?? '10-vpc-lease.conflist',
    // An explicit version pins the list to it; the default offers 1.1.0 to the runtimes that can take it.
    ...(flags.has('cni-version')
      ? { cniVersion: flags.get('cni-version')! }
      : { cniVersion: DEFAULT_CNI_VERSION, cniVersions: DEFAULT_CNI_VERSIONS }),
    networkName: flags.get('name') ?? 'vpc-lease',
    pluginConfig,
    chained: chain,
    skipReadyWait: flags.has('no-wait-ready'),
    readyTimeoutS: readyTimeout(flags.get('ready-timeout-s') ?? '0'),
    allowOtherCni: flags.has(ALLOW_OTHER_CNI_FLAG.slice(2)) || env[ALLOW_OTHER_CNI_ENV] === 'true',
    ...(flags.has('kubelet-config') ? { kubeletConfigPath: flags.get('kubelet-config')! } : {}),
    ...(flags.has('kubelet-args') ? { kubeletArgsPath: flags.get('kubelet-args')! } : {}),
  };
}

function readyTimeout(text: string): number {
  const seconds = Number(text);
  if (!/^\d+$/.test(text) || !Number.isSafeInteger(seconds))
    throw new ValidationError(
      `install: --ready-timeout-s must be a whole number of seconds (0: no limit), not ${text}`,
    );
  return seconds;
}
