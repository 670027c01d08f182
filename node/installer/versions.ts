import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { errorMessage, ValidationError } from '../../shared/errors.js';
import { compareVersions } from '../cni/version.js';

/**
 * Which CNI versions the conflist offers. libcni 1.1 (containerd 1.6/1.7) reads only `cniVersion` and knows
 * results up to 1.0.0; libcni ≥ 1.2 (containerd 2, CRI-O) takes the highest of `cniVersions` and `cniVersion`
 * that it implements itself (libcni/conf.go ConfListFromBytes), without asking the plugins, and then calls GC and
 * STATUS when that is 1.1.0. Since libcni hands that one version to every plugin of the list, the installer
 * offers only versions every chained plugin speaks: it asks each one in the bin dir (CNI VERSION).
 */
export const DEFAULT_CNI_VERSION = '1.0.0';
export const DEFAULT_CNI_VERSIONS = ['1.0.0', '1.1.0'] as const;

export interface VersionRequest {
  /** What `cniVersion` says: the version of runtimes that read only it. */
  readonly cniVersion: string;
  /** Offered to runtimes that read `cniVersions`; absent when `--cni-version` pinned one version. */
  readonly cniVersions?: readonly string[];
}

export interface VersionPlan {
  readonly cniVersion: string;
  readonly cniVersions?: readonly string[];
  readonly warnings: readonly string[];
}

/** What a chained plugin answered to VERSION; `undefined` when it is not in the bin dir (cannot be asked). */
export type ChainedVersions = ReadonlyMap<string, readonly string[] | undefined>;

const UPGRADE = 'upgrade the CNI plugins (v1.5 or later speak 1.1.0)';

/**
 * The versions to write, or a ValidationError when a chained plugin cannot speak `cniVersion` (every runtime would
 * fail every ADD). A version some chained plugin lacks is dropped from `cniVersions`, with a warning.
 */
export function planVersions(request: VersionRequest, chained: ChainedVersions): VersionPlan {
  const warnings: string[] = [];
  for (const [type, supported] of chained) {
    if (supported === undefined) warnings.push(`${type} is not in the bin dir yet: its CNI versions were not checked`);
    else if (!supported.includes(request.cniVersion))
      throw new ValidationError(
        `install: ${type} does not speak cniVersion ${request.cniVersion} (it supports ${supported.join(', ') || 'nothing it reports'}); ${UPGRADE}${
          request.cniVersions ? '' : ', or pass another --cni-version'
        }`,
      );
  }
  if (!request.cniVersions) return { cniVersion: request.cniVersion, warnings };
  const lacking = (v: string) => [...chained].filter(([, s]) => s !== undefined && !s.includes(v)).map(([t]) => t);
  const offered = [...new Set([request.cniVersion, ...request.cniVersions])].sort(compareVersions);
  const cniVersions = offered.filter((v) => lacking(v).length === 0);
  for (const v of offered.filter((v) => lacking(v).length > 0))
    warnings.push(
      `${lacking(v).join(', ')} ${lacking(v).length > 1 ? 'do' : 'does'} not speak ${v}: runtimes with libcni ≥ 1.2 will use ${cniVersions.at(-1)}${
        compareVersions(v, '1.1.0') >= 0 && compareVersions(cniVersions.at(-1)!, '1.1.0') < 0
          ? ', without GC and STATUS'
          : ''
      }; ${UPGRADE}`,
    );
  return { cniVersion: request.cniVersion, cniVersions, warnings };
}

const PLUGIN_NAME = /^[A-Za-z0-9][A-Za-z0-9_.-]*$/;

/** Asks each chained plugin present in `binDir` which versions it speaks (CNI VERSION, fixed arguments). */
export function askChainedVersions(
  binDir: string,
  chained: readonly Record<string, unknown>[],
  cniVersion: string,
): ChainedVersions {
  const answers = new Map<string, readonly string[] | undefined>();
  for (const plugin of chained) {
    const type = plugin['type'];
    if (typeof type !== 'string' || !PLUGIN_NAME.test(type))
      throw new ValidationError(`install: bad chained plugin type ${JSON.stringify(type)}`);
    const file = join(binDir, type);
    if (!existsSync(file)) {
      answers.set(type, undefined);
      continue;
    }
    let supported: unknown;
    try {
      const out = execFileSync(file, [], {
        env: { CNI_COMMAND: 'VERSION' },
        input: JSON.stringify({ cniVersion }),
        encoding: 'utf8',
        timeout: 5_000,
        stdio: ['pipe', 'pipe', 'ignore'],
      });
      supported = (JSON.parse(out) as { supportedVersions?: unknown }).supportedVersions;
    } catch (err) {
      throw new ValidationError(`install: cannot ask ${file} for its CNI versions: ${errorMessage(err)}`);
    }
    answers.set(type, Array.isArray(supported) ? supported.filter((v): v is string => typeof v === 'string') : []);
  }
  return answers;
}
