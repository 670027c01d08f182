import { execFileSync } from 'node:child_process';
import {
  chmodSync,
  copyFileSync,
  existsSync,
  mkdirSync,
  readdirSync,
  realpathSync,
  renameSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { basename, dirname, join } from 'node:path';
import { errorMessage, ValidationError } from '../../shared/errors.js';
import { parseNetconf } from '../config/netconf.js';
import { NETNS_ADDON_FILE } from '../datapath/native.js';

/**
 * `vpc-lease-cni install`, run by the DaemonSet's init container: copies the plugin and its native parts into
 * the host's CNI bin dir and writes the conflist. Every file lands through a temp file + rename in the same
 * directory, so kubelet never executes a half-copied binary nor reads a half-written conflist.
 */
export const PLUGIN_TYPE = 'vpc-lease-cni';
/** What the launcher needs beside it: the bundle and the native parts. */
export const SUPPORT_FILES = ['vpc-lease-cni.js', NETNS_ADDON_FILE, 'netlink.node'] as const;

export interface InstallOptions {
  /** The executable to install (default: this one). */
  readonly source: string;
  readonly binDir: string;
  readonly confDir: string;
  readonly confName: string;
  readonly cniVersion: string;
  readonly networkName: string;
  /** Our plugin's netconf fields (validated before anything is written). */
  readonly pluginConfig: Record<string, unknown>;
  /** Plugins chained after ours, e.g. portmap. */
  readonly chained: readonly Record<string, unknown>[];
  /** What must sit beside the executable (default SUPPORT_FILES; a single executable needs only its natives). */
  readonly supportFiles?: readonly string[];
}

export interface InstallReport {
  readonly installed: string[];
  readonly conflist: string;
}

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

const PLUGIN_NAME = /^[A-Za-z0-9][A-Za-z0-9_.-]*$/;

/**
 * Every plugin of a list must speak the list's cniVersion: libcni hands each the same version, and one that does
 * not speak it fails every ADD, and with 1.1.0 also STATUS (a NotReady node). Chained plugins already in the bin
 * dir are asked (CNI VERSION, fixed arguments) before anything is written; absent ones cannot be checked here.
 */
function checkChainedVersions(options: InstallOptions): void {
  for (const plugin of options.chained) {
    const type = plugin['type'];
    if (typeof type !== 'string' || !PLUGIN_NAME.test(type))
      throw new ValidationError(`install: bad chained plugin type ${JSON.stringify(type)}`);
    const file = join(options.binDir, type);
    if (!existsSync(file)) continue;
    let supported: unknown;
    try {
      const out = execFileSync(file, [], {
        env: { CNI_COMMAND: 'VERSION' },
        input: JSON.stringify({ cniVersion: options.cniVersion }),
        encoding: 'utf8',
        timeout: 5_000,
        stdio: ['pipe', 'pipe', 'ignore'],
      });
      supported = (JSON.parse(out) as { supportedVersions?: unknown }).supportedVersions;
    } catch (err) {
      throw new ValidationError(`install: cannot ask ${file} for its CNI versions: ${errorMessage(err)}`);
    }
    if (!Array.isArray(supported) || !supported.includes(options.cniVersion))
      throw new ValidationError(
        `install: ${file} does not speak cniVersion ${options.cniVersion} (it supports ${
          Array.isArray(supported) ? supported.join(', ') : 'nothing it reports'
        }); upgrade the CNI plugins (v1.5 or later speak 1.1.0), or pass --cni-version 1.0.0, which turns off GC and STATUS`,
      );
  }
}

export function install(options: InstallOptions): InstallReport {
  const entry = { type: PLUGIN_TYPE, ...options.pluginConfig };
  // Fail before touching the host when the configuration would fail every ADD.
  requireServiceCidrs(parseNetconf({ cniVersion: options.cniVersion, name: options.networkName, ...entry }));
  checkChainedVersions(options);
  const source = realpathSync(options.source);
  const sourceDir = dirname(source);
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
  atomicCopy(source, join(options.binDir, PLUGIN_TYPE), 0o755);
  installed.push(join(options.binDir, PLUGIN_TYPE));
  const conflist = join(options.confDir, options.confName);
  const body = {
    cniVersion: options.cniVersion,
    name: options.networkName,
    plugins: [entry, ...options.chained],
  };
  const tmp = join(options.confDir, `.${options.confName}.${process.pid}.tmp`);
  writeFileSync(tmp, `${JSON.stringify(body, null, 2)}\n`, { mode: 0o644 });
  renameSync(tmp, conflist);
  return { installed, conflist };
}

/**
 * Parses `install [--bin-dir D] [--conf-dir D] [--conf-name N] [--cni-version V] [--name N] [--config JSON]
 * [--service-cidrs CIDR[,CIDR]]`.
 */
export function installOptionsFromArgs(
  args: readonly string[],
  env: NodeJS.ProcessEnv,
  source: string,
): InstallOptions {
  const flags = new Map<string, string>();
  for (let i = 0; i < args.length; i += 2) {
    const flag = args[i]!;
    const value = args[i + 1];
    if (!flag.startsWith('--') || value === undefined) throw new ValidationError(`install: bad argument ${flag}`);
    flags.set(flag.slice(2), value);
  }
  const known = ['bin-dir', 'conf-dir', 'conf-name', 'cni-version', 'name', 'config', 'chain', 'service-cidrs'];
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
    cniVersion: flags.get('cni-version') ?? '1.1.0',
    networkName: flags.get('name') ?? 'vpc-lease',
    pluginConfig,
    chained: chain,
  };
}
