import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { errorMessage, ValidationError } from '../../shared/errors.js';

/** kubelet's own default when neither its config nor its flags set maxPods. */
export const KUBELET_DEFAULT_MAX_PODS = 110;

/** Where AL2023's nodeadm writes kubelet's config; its drop-ins (spec.kubelet.config) go in `<path>.d/`. */
export const NODEADM_KUBELET_CONFIG = '/etc/kubernetes/kubelet/config.json';
/** Where AL2023's nodeadm writes kubelet's flags (NODEADM_KUBELET_ARGS, spec.kubelet.flags last). */
export const NODEADM_KUBELET_ENV = '/etc/eks/kubelet/environment';

/** The max-pods kubelet runs with, and the file that set it. */
export interface KubeletMaxPods {
  readonly maxPods: number;
  readonly source: string;
}

const MAX_PODS_LINE = /^maxPods[ \t]*:[ \t]*(.*?)[ \t]*(#.*)?$/;

/**
 * `maxPods` of a KubeletConfiguration in JSON or YAML. YAML is read strictly but minimally: maxPods is a
 * top-level key, so only unindented `maxPods:` lines count, and anything but one plain integer is refused.
 */
export function maxPodsInKubeletConfig(text: string, path: string): number | undefined {
  const fail = (why: string): never => {
    throw new ValidationError(`kubelet config ${path}: ${why}`);
  };
  if (text.trimStart().startsWith('{')) {
    let doc: unknown;
    try {
      doc = JSON.parse(text);
    } catch (err) {
      return fail(`not JSON: ${errorMessage(err)}`);
    }
    const value = (doc as Record<string, unknown>)['maxPods'];
    if (value === undefined) return undefined;
    if (!Number.isSafeInteger(value) || (value as number) < 0) fail(`maxPods is not a count: ${JSON.stringify(value)}`);
    return value as number;
  }
  const values = text
    .split(/\r?\n/)
    .map((line) => MAX_PODS_LINE.exec(line))
    .filter((m): m is RegExpExecArray => m !== null)
    .map((m) => m[1] ?? '');
  if (values.length === 0) return undefined;
  if (values.length > 1) fail('maxPods is set more than once');
  if (!/^\d{1,9}$/.test(values[0]!)) fail(`maxPods is not a count: ${JSON.stringify(values[0])}`);
  return Number(values[0]);
}

/** The last `--max-pods=N` or `--max-pods N` in a kubelet args or environment file (later flags win). */
export function maxPodsInKubeletArgs(text: string, path: string): number | undefined {
  let found: string | undefined;
  for (const m of text.matchAll(/(?:^|[\s"'=])--max-pods(?:=|[ \t]+)([^\s"']*)/g)) found = m[1] ?? '';
  if (found === undefined) return undefined;
  if (!/^\d{1,9}$/.test(found)) throw new ValidationError(`kubelet args ${path}: --max-pods is not a count: ${found}`);
  return Number(found);
}

function read(path: string, what: string): string {
  try {
    return readFileSync(path, 'utf8');
  } catch (err) {
    throw new ValidationError(`cannot read the ${what} ${path}: ${errorMessage(err)}`);
  }
}

/**
 * The max-pods kubelet takes from what it is given, in kubelet's own order: its config file, then the drop-in
 * directory beside it (`<config>.d/*.conf` in lexical order, the layout nodeadm uses), then its flags.
 */
export function kubeletMaxPods(paths: { readonly configPath?: string; readonly argsPath?: string }): KubeletMaxPods {
  let result: KubeletMaxPods = { maxPods: KUBELET_DEFAULT_MAX_PODS, source: 'kubelet default' };
  const take = (value: number | undefined, source: string): void => {
    if (value !== undefined) result = { maxPods: value, source };
  };
  if (paths.configPath) {
    const { configPath } = paths;
    take(maxPodsInKubeletConfig(read(configPath, 'kubelet config'), configPath), configPath);
    const dropIns = `${configPath}.d`;
    if (existsSync(dropIns) && statSync(dropIns).isDirectory())
      for (const name of readdirSync(dropIns)
        .filter((n) => n.endsWith('.conf'))
        .sort()) {
        const file = join(dropIns, name);
        take(maxPodsInKubeletConfig(read(file, 'kubelet config drop-in'), file), file);
      }
  }
  if (paths.argsPath) take(maxPodsInKubeletArgs(read(paths.argsPath, 'kubelet args'), paths.argsPath), paths.argsPath);
  return result;
}

export interface MaxPodsComparison {
  readonly ours: number;
  readonly kubelet: KubeletMaxPods;
  /** kubelet admits more pods than vpc-lease can give addresses to. */
  readonly exceeds: boolean;
  readonly message: string;
}

export function compareMaxPods(ours: number, kubelet: KubeletMaxPods): MaxPodsComparison {
  const exceeds = kubelet.maxPods > ours;
  return {
    ours,
    kubelet,
    exceeds,
    message: exceeds
      ? `kubelet's max-pods ${kubelet.maxPods} (${kubelet.source}) exceeds vpc-lease's ${ours}: pods beyond ${ours} ` +
        `are scheduled here and then wait in ContainerCreating; give kubelet maxPods ${ours}`
      : `kubelet's max-pods ${kubelet.maxPods} (${kubelet.source}) is within vpc-lease's ${ours}`,
  };
}
