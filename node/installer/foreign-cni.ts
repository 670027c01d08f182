import { extname, join } from 'node:path';

/** The installer's explicit override: install even though another primary CNI configuration wins. */
export const ALLOW_OTHER_CNI_FLAG = '--allow-other-cni';
/** The same override from the environment (the DaemonSet's init container). */
export const ALLOW_OTHER_CNI_ENV = 'VPC_LEASE_ALLOW_OTHER_CNI';

/** A file of the CNI conf dir: its name and, for a regular file, its text. */
export interface ConfDirEntry {
  readonly name: string;
  /** Undefined for a directory or a file that could not be read: the runtime skips both. */
  readonly content?: string;
}

export interface ForeignCniQuery {
  readonly entries: readonly ConfDirEntry[];
  /** Our conflist's file name (`10-vpc-lease.conflist`), counted as present whether or not it is there yet. */
  readonly ourConfName: string;
  /** Our plugin's type: a configuration whose first plugin is ours is ours (an older name, a chain around it). */
  readonly ourPluginType: string;
  /** For the message only. */
  readonly confDir: string;
}

/** Another primary CNI configuration the runtime would pick instead of ours. */
export interface ForeignCni {
  readonly file: string;
  /** The types of its plugins, the primary first. */
  readonly pluginTypes: readonly string[];
  readonly message: string;
}

/** The extensions containerd's go-cni (and kubelet before it) hand to libcni's ConfFiles. */
const CONF_EXTENSIONS = new Set(['.conf', '.conflist', '.json']);

function object(value: unknown): Record<string, unknown> | undefined {
  return value !== null && typeof value === 'object' && !Array.isArray(value)
    ? (value as Record<string, unknown>)
    : undefined;
}

function typeOf(plugin: unknown): string | undefined {
  const type = object(plugin)?.['type'];
  return typeof type === 'string' && type !== '' ? type : undefined;
}

/**
 * The plugin types of a file as the runtime loads it, or undefined where it skips the file: a `.conflist` needs a
 * name and a non-empty plugin list whose every entry has a type; a `.conf`/`.json` is one plugin and needs a type
 * ("no 'type'; perhaps this is a .conflist?"). Unparseable JSON is skipped too.
 */
function loadedPluginTypes(entry: ConfDirEntry): string[] | undefined {
  if (entry.content === undefined) return undefined;
  let parsed: Record<string, unknown> | undefined;
  try {
    parsed = object(JSON.parse(entry.content));
  } catch {
    return undefined;
  }
  if (!parsed) return undefined;
  if (extname(entry.name) !== '.conflist') {
    const type = typeOf(parsed);
    return type ? [type] : undefined;
  }
  const plugins = parsed['plugins'];
  if (typeof parsed['name'] !== 'string' || !Array.isArray(plugins) || plugins.length === 0) return undefined;
  const types = plugins.map(typeOf);
  return types.every((t): t is string => t !== undefined) ? types : undefined;
}

/** Go's sort.Strings order: byte-wise over UTF-8, which is not JavaScript's UTF-16 order beyond the BMP. */
function byteOrder(a: string, b: string): number {
  return Buffer.compare(Buffer.from(a, 'utf8'), Buffer.from(b, 'utf8'));
}

function fixFor(path: string, pluginTypes: readonly string[]): string {
  if (pluginTypes[0] === 'aws-cni')
    return (
      'remove the AWS VPC CNI first: `kubectl -n kube-system delete daemonset aws-node` (or create the cluster ' +
      'without the default networking add-ons, EKS `bootstrapSelfManagedAddons: false`), then delete ' +
      `${path} on each node that ran it`
    );
  return `remove the CNI that writes it (its DaemonSet or add-on) first, then delete ${path} on each node`;
}

/**
 * Which other primary CNI configuration the container runtime would use instead of ours, or undefined when ours
 * wins. The runtime (containerd's go-cni, CRI-O, kubelet's old dockershim) lists the conf dir through libcni's
 * ConfFiles (regular files whose extension is exactly `.conf`, `.conflist` or `.json`), sorts the names byte-wise,
 * skips files it cannot load, and takes the first; so EKS's `10-aws.conflist` beats `10-vpc-lease.conflist`.
 */
export function foreignPrimaryCni(query: ForeignCniQuery): ForeignCni | undefined {
  const candidates = query.entries
    .filter((e) => e.name !== query.ourConfName && CONF_EXTENSIONS.has(extname(e.name)))
    .map((e) => ({ name: e.name, types: loadedPluginTypes(e) }))
    .filter((c): c is { name: string; types: string[] } => c.types !== undefined)
    .filter((c) => byteOrder(c.name, query.ourConfName) < 0)
    .sort((a, b) => byteOrder(a.name, b.name));
  const winner = candidates[0];
  if (!winner || winner.types[0] === query.ourPluginType) return undefined;
  const file = join(query.confDir, winner.name);
  return {
    file,
    pluginTypes: winner.types,
    message:
      `another CNI configuration would be used instead of ${query.ourConfName}: ${file} (plugins ${winner.types.join(', ')}) ` +
      'sorts first, and the container runtime takes the first valid file of the conf dir; ' +
      `${fixFor(file, winner.types)}. To install anyway, pass ${ALLOW_OTHER_CNI_FLAG}.`,
  };
}
